"""Streaming evaluation of a causal LM over a text split: summed NLL -> perplexities."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from .data.lm import bos_token_id, build_lm_dataset, collate_blocks, stream_stats, tokenize_corpus
from .data.stream import StreamColumns, bptt_chunks, stream_columns
from .modeling_utils import NLMPreTrainedModel


def lm_context_size(model) -> int:
    """How many input-only tokens each block needs: n - 1 for n-gram models, 1 otherwise."""
    return int(getattr(model.config, "context_size", 1) or 1)


def is_stateful(model) -> bool:
    """Does ``model`` carry a recurrent state from one chunk of text to the next (``_is_stateful``)?"""
    return bool(getattr(model, "_is_stateful", False))


@torch.no_grad()
def stream_nll(
    model, columns: StreamColumns, bptt: int, device=None, rows=None, desc: str | None = None
) -> tuple[float, int]:
    """Sum of -log p(target) over the targets of ``columns`` (or of its ``rows``), and their number,
    reading each column in chunks of ``bptt`` with the recurrent state carried from chunk to chunk."""
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count, state = 0.0, 0, None
    try:
        for start, length in tqdm(bptt_chunks(columns.length, bptt), desc=desc, disable=desc is None, leave=False):
            batch = {k: v.to(device) for k, v in columns.chunk(start, length, rows).items()}
            out = model(**batch, past_key_values=state, use_cache=True, logits_to_keep=1)
            state = out.past_key_values
            n = int((batch["shift_labels"] != -100).sum())
            if n == 0:
                continue
            if not torch.isfinite(out.loss):
                raise FloatingPointError(f"evaluation loss is {out.loss.item()} (not finite) after {count} tokens")
            total += out.loss.item() * n
            count += n
    finally:
        model.train(was_training)
    return total, count


@torch.no_grad()
def summed_nll(model, loader, device=None, desc: str | None = None) -> tuple[float, int]:
    """Sum of -log p(target) over every labelled token the loader yields, and their number."""
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    # Our models compute the loss from the head whatever logits_to_keep says; skipping the |V|-wide
    # logits of every position halves the cost of evaluating a softmax model.
    extra = {"logits_to_keep": 1} if isinstance(model, NLMPreTrainedModel) else {}
    try:
        for batch in tqdm(loader, desc=desc, disable=desc is None, leave=False):
            batch = {k: v.to(device) for k, v in batch.items()}
            n = int((batch["labels"][:, 1:] != -100).sum())
            if n == 0:
                continue
            loss = model(**batch, **extra).loss
            if not torch.isfinite(loss):
                raise FloatingPointError(f"evaluation loss is {loss.item()} (not finite) after {count} tokens")
            total += loss.item() * n
            count += n
    finally:
        model.train(was_training)
    return total, count


def evaluate_lm(
    model,
    dataset,
    tokenizer,
    text_column: str = "text",
    block_size: int = 256,
    batch_size: int = 32,
    device: torch.device | str | None = None,
    show_progress: bool = False,
) -> dict[str, float | int]:
    """Perplexity of ``model`` on one split of raw text.

    The split is read as one stream (every line followed by ``<eos>``; see ``hf_nlm.data.lm``), so
    every word and every sentence end is predicted once, from its full context for n-gram models.

    Args:
        model: a causal LM (any ``transformers`` model whose forward takes ``labels``).
        dataset: a ``datasets.Dataset`` (one split) with a ``text_column``, or a list of strings.
        tokenizer: the model's tokenizer.

    Returns:
        The ``perplexity`` metric's output (``hf_nlm.metrics``) -- ``perplexity`` (per token),
        ``word_perplexity`` (per whitespace word incl. sentence ends: comparable across tokenizations),
        ``nll_per_token``, ``bits_per_token``, ``total_nll``, ``num_tokens``, ``num_words`` -- plus
        ``loss`` (= ``nll_per_token``) and ``num_unk`` (targets that are ``<unk>``).

    Recurrent models (``_is_stateful``) read the stream as ``batch_size`` columns side by side, in
    chunks of ``block_size`` with the state carried over (``hf_nlm.data.stream``); each column starts
    from an empty state, so ``batch_size=1`` gives the exact perplexity of the whole stream and larger
    batches an approximation that is faster (Merity et al. evaluate the test set with batch 1).
    """
    texts = split_texts(dataset, text_column)
    if is_stateful(model):
        ids, num_words = tokenize_corpus(texts, tokenizer)
        stats = stream_stats(ids, num_words, tokenizer)
        columns = stream_columns(ids, min(batch_size, ids.numel()), bos_token_id(tokenizer))
        total, count = stream_nll(model, columns, block_size, device, desc="evaluate" if show_progress else None)
        if count != stats["num_tokens"]:
            raise RuntimeError(f"evaluated {count} targets but the split has {stats['num_tokens']} tokens")
        return perplexity_report(total, count, stats["num_words"], stats["num_unk"])
    lm_data, stats = build_lm_dataset(texts, tokenizer, block_size, lm_context_size(model))
    loader = DataLoader(lm_data, batch_size=batch_size, shuffle=False, collate_fn=collate_blocks)
    total, count = summed_nll(model, loader, device, desc="evaluate" if show_progress else None)
    if count != stats["num_tokens"]:
        raise RuntimeError(f"evaluated {count} targets but the split has {stats['num_tokens']} tokens")
    return perplexity_report(total, count, stats["num_words"], stats["num_unk"])


def split_texts(dataset, text_column: str = "text") -> list[str]:
    """The texts of one split: a ``datasets.Dataset`` with ``text_column``, or a list of strings."""
    if isinstance(dataset, dict) or (hasattr(dataset, "keys") and not hasattr(dataset, "column_names")):
        raise TypeError("pass one split (e.g. dataset['test']), not a DatasetDict")
    if hasattr(dataset, "column_names"):
        if text_column not in dataset.column_names:
            raise KeyError(f"dataset has columns {dataset.column_names}, expected a text column {text_column!r}")
        return dataset[text_column]
    return list(dataset)


def perplexity_report(total_nll: float, num_tokens: int, num_words: int, num_unk: int) -> dict[str, float | int]:
    """The ``perplexity`` metric's output for summed NLL and counts, plus ``loss`` and ``num_unk``:
    the one result format of every evaluation in the package (neural, n-gram, mixture)."""
    from .metrics import Perplexity  # evaluate is slow to import; only evaluation needs it

    scores = Perplexity().compute(nll=[total_nll], num_tokens=[num_tokens], num_words=[num_words])
    return {"loss": scores["nll_per_token"], **scores, "num_unk": num_unk}


@torch.no_grad()
def token_log_probs(
    model, texts, tokenizer, block_size: int = 256, batch_size: int = 32, device=None
) -> tuple[torch.LongTensor, torch.Tensor, int]:
    """log p(w_t | context) of every token of a split's stream, in stream order.

    Recurrent models read the stream as one sequence, the state carried over chunks of ``block_size``.

    Returns ``(ids, log_probs, num_words)``: the stream (as ``tokenize_corpus`` builds it) and one
    natural-log probability per token. Mixtures combine these with another model's, token by token.
    """
    texts = split_texts(texts)
    ids, num_words = tokenize_corpus(texts, tokenizer)
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []

    def target_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        keep = labels != -100
        logp = torch.log_softmax(logits[keep].float(), dim=-1)
        return logp.gather(1, labels[keep][:, None]).squeeze(1).cpu()

    try:
        if is_stateful(model):
            # One column, the state carried from chunk to chunk: every token sees the whole stream before it.
            columns, state = stream_columns(ids, 1, bos_token_id(tokenizer)), None
            for start, length in bptt_chunks(columns.length, block_size):
                chunk = {k: v.to(device) for k, v in columns.chunk(start, length).items()}
                output = model(input_ids=chunk["input_ids"], past_key_values=state, use_cache=True)
                state = output.past_key_values
                out.append(target_log_probs(output.logits, chunk["shift_labels"]))
        else:
            lm_data, _ = build_lm_dataset(texts, tokenizer, block_size, lm_context_size(model))
            for batch in DataLoader(lm_data, batch_size=batch_size, shuffle=False, collate_fn=collate_blocks):
                logits = model(input_ids=batch["input_ids"].to(device)).logits[:, :-1]
                out.append(target_log_probs(logits, batch["labels"][:, 1:].to(device)))
    finally:
        model.train(was_training)
    log_probs = torch.cat(out)
    if log_probs.numel() != ids.numel():
        raise RuntimeError(f"scored {log_probs.numel()} tokens but the stream has {ids.numel()}")
    return ids, log_probs, num_words
