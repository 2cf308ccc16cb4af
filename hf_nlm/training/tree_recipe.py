"""Mnih & Hinton's (2008) recipe for a data-built word tree, as library calls.

A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008, sec. 4:

1. train an HLBL with a random tree;
2. represent each word by the average of the predicted vectors r_hat over the contexts in which
   it occurs (:func:`word_vectors_from_model`);
3. build a tree by recursive two-component spherical-Gaussian EM on those vectors, with BALANCED,
   ADAPTIVE or ADAPTIVE(eps) splits (:func:`hf_nlm.trees.adaptive_tree`);
4. train a fresh HLBL on the new tree.

:func:`hf_nlm.training.train` runs all four steps for a spec with ``tree_mode`` set
(:func:`hf_nlm.training.run.train_data_tree`; ``hf-nlm train --tree-mode``, ``hf-nlm build-tree``); this
module holds steps 2-3. They work for any tree-headed fixed-window model (HLBL, or Morin & Bengio's
hierarchical NPLM): the vectors are the body's output, i.e. what the tree head reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..data.lm import build_lm_dataset
from ..evaluation.scoring import eval_mode
from ..heads import tree_config_fields
from ..modeling_utils import shifted_targets
from ..trees import WordTree, adaptive_tree, check_tree_mode


@torch.no_grad()
def word_vectors_from_model(
    model,
    texts: Sequence[str],
    tokenizer,
    block_size: int = 256,
    batch_size: int = 32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Each word's average predicted vector r_hat over the contexts it occurs in (step 2), shape (|V|, D).

    Streams ``texts`` through the model's body in blocks, so memory stays O(|V| D) however long the
    corpus is. The same result as :func:`hf_nlm.trees.word_vectors_from_predictions` on all (r_hat,
    next word) pairs at once; a word that never occurs gets the mean of all predicted vectors.
    """
    dataset, _ = build_lm_dataset(list(texts), tokenizer, block_size, model.config.context_size)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    V = model.config.vocab_size
    sums = counts = total = None
    n_total = 0
    with eval_mode(model):
        for start in range(0, len(dataset), batch_size):
            batch = dataset.__getitems__(list(range(start, min(start + batch_size, len(dataset)))))
            ids, labels = batch["input_ids"].to(device), batch["labels"].to(device)
            r_hat = model.model(ids, return_dict=True).last_hidden_state
            hidden, targets = shifted_targets(r_hat, labels)
            hidden = hidden.double()
            if sums is None:
                sums = hidden.new_zeros(V, hidden.shape[1])
                counts = hidden.new_zeros(V)
                total = hidden.new_zeros(hidden.shape[1])
            sums.index_add_(0, targets, hidden)
            counts += torch.bincount(targets, minlength=V).to(counts.dtype)
            total += hidden.sum(0)
            n_total += hidden.shape[0]
    if sums is None or n_total == 0:
        raise ValueError("the texts hold no token to compute word vectors from")
    mean_all = total / n_total
    return torch.where(counts[:, None] > 0, sums / counts.clamp_min(1)[:, None], mean_all).cpu()


def build_data_tree(
    model,
    texts: Sequence[str],
    tokenizer,
    mode: str = "adaptive",
    eps: float = 0.0,
    block_size: int = 256,
    batch_size: int = 32,
    seed: int = 0,
    max_codes: int = 8,
) -> WordTree:
    """Steps 2-3: the word tree Mnih & Hinton build from a trained model's predicted vectors.

    ``mode``: ``"balanced"`` or ``"adaptive"``; ``eps`` > 0 (adaptive only) lets words whose
    responsibilities are within eps of 1/2 go down both branches (several codes).
    """
    check_tree_mode(mode, eps)  # before the pass over the texts
    vectors = word_vectors_from_model(model, texts, tokenizer, block_size=block_size, batch_size=batch_size)
    return adaptive_tree(vectors, mode=mode, eps=eps, seed=seed, max_codes=max_codes)


def config_for_tree(config, tree: WordTree):
    """A copy of ``config`` whose tree shape fields describe ``tree`` (for a fresh model on it)."""
    return type(config).from_dict({**config.to_dict(), **tree_config_fields(tree)})


def tree_summary(tree: WordTree) -> dict:
    """Sizes of a tree, for logs and results."""
    lengths = [length for word in tree.code_lengths() for length in word]
    return {
        "vocab_size": tree.vocab_size,
        "num_nodes": tree.num_nodes,
        "max_depth": tree.max_depth,
        "max_codes": tree.max_codes,
        "words_with_several_codes": int((tree.num_codes() > 1).sum()),
        "mean_code_length": sum(lengths) / len(lengths),
    }


__all__ = [
    "build_data_tree",
    "config_for_tree",
    "tree_summary",
    "word_vectors_from_model",
]
