"""Perplexity of a causal LM on a split of raw text, read as one stream.

How the split is read (blocks or stateful stream columns) is decided by the model's batching
(:func:`hf_nlm.data.batching.batching_for`); :mod:`hf_nlm.evaluation.scoring` scores it; this module
turns the scores into the one report format of the package (:func:`perplexity_report`).
"""

from __future__ import annotations

import torch

from ..data.batching import batching_for, is_encoder_decoder, split_texts
from ..data.lm import check_split_has_text
from .numeracy import is_numeracy_tokenizer, numeracy_report
from .report import perplexity_report
from .scoring import score_split, split_log_probs


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

    With a numeracy tokenizer (words and numerals, ``hf_nlm.tokenization.train_numeracy_tokenizer``) the
    report adds the ``adjusted_perplexity`` metric's figures (Spithourakis & Riedel 2018): perplexity and
    adjusted perplexity over all tokens, words only and numerals only, and the counts of unknown tokens
    and of the OOV types behind them; every token is then scored exactly (recurrent models: batch 1).

    Recurrent models (``is_stateful``) read the stream as ``batch_size`` columns side by side, in chunks of
    ``block_size`` with the state carried over (``hf_nlm.data.stream``); each column starts from a fresh state
    (the one after a sentence boundary), so ``batch_size=1`` gives the exact perplexity of the whole stream
    and larger batches an approximation that is faster (Merity et al. evaluate the test set with batch 1).
    """
    if is_encoder_decoder(model):
        raise TypeError("evaluate_lm reads lines of text for a causal LM; an encoder-decoder model is "
                        "evaluated on (source, target) pairs with evaluate_seq2seq")
    batching = batching_for(model, tokenizer, block_size)
    texts = split_texts(dataset, text_column)
    check_split_has_text(texts)
    stream, stats = batching.encode(texts)
    if is_numeracy_tokenizer(tokenizer):
        return numeracy_report(batching, model, tokenizer, texts, stream, stats, batch_size, device)
    total, count = score_split(batching, model, stream, batch_size, device,
                               desc="evaluate" if show_progress else None)
    if count != stats["num_tokens"]:
        raise RuntimeError(f"evaluated {count} targets but the split has {stats['num_tokens']} tokens")
    return perplexity_report(total, count, stats["num_words"], stats["num_unk"])


def token_log_probs(
    model, texts, tokenizer, block_size: int = 256, batch_size: int = 32, device=None
) -> tuple[torch.LongTensor, torch.Tensor, int]:
    """log p(w_t | context) of every token of a split's stream, in stream order.

    Recurrent models read the stream as one sequence, the state carried over chunks of ``block_size``.

    Returns ``(ids, log_probs, num_words)``: the stream (as ``tokenize_corpus`` builds it) and one
    natural-log probability per token. Mixtures combine these with another model's, token by token.
    """
    batching = batching_for(model, tokenizer, block_size)
    stream, stats = batching.encode(split_texts(texts))
    ids = stream["input_ids"]
    log_probs = split_log_probs(batching, model, stream, batch_size, device)
    if log_probs.numel() != ids.numel():
        raise RuntimeError(f"scored {log_probs.numel()} tokens but the stream has {ids.numel()}")
    return ids, log_probs, stats["num_words"]

