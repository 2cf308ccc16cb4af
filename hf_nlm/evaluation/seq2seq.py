"""Evaluation of an encoder-decoder model on a split of (source, target) pairs: the targets' perplexity
given the sources, and the BLEU of the targets it generates."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from ..data.batching import PairedBatching
from ..data.pairs import PairFormat, check_texts, encode_side, pad_sources, read_pairs
from ..tokenization.decoding import decode_generated
from .report import perplexity_report
from .scoring import eval_mode, score_split


def evaluate_seq2seq(
    model,
    dataset,
    tokenizer,
    source_column: str = "source",
    target_column: str = "target",
    max_source_length: int | None = None,
    max_target_length: int | None = None,
    batch_size: int = 32,
    device: torch.device | str | None = None,
    show_progress: bool = False,
    split: str | None = None,
) -> dict[str, float | int]:
    """Target perplexity of an encoder-decoder ``model`` on one split of paired examples.

    Every target token and each target's ``<eos>`` is predicted once, given the whole source and the
    target tokens before it: -log p(y | x) = -sum_t log p(y_t | y_<t, x). Padding is masked, so the
    result does not depend on ``batch_size``. The split is read as in training (``hf_nlm.data.pairs``:
    ``<eos>`` after each side, truncation to the maximum lengths; ``split`` names it in errors).

    Returns :func:`perplexity_report` over the target tokens (``perplexity``, ``word_perplexity`` per target
    word incl. ``<eos>``, ``num_tokens``, ...) plus ``num_examples`` and the truncation counts
    ``num_truncated_sources``, ``num_truncated_targets``, ``source_tokens_cut``, ``target_tokens_cut``.
    """
    pairs = PairFormat(source_column, target_column, max_source_length, max_target_length)
    batching = PairedBatching(tokenizer, pairs)
    examples, stats = batching.encode_split(dataset, split)
    total, count = score_split(batching, model, examples, batch_size, device,
                               desc="evaluate" if show_progress else None)
    if count != stats["num_tokens"]:
        raise RuntimeError(f"evaluated {count} targets but the split has {stats['num_tokens']} target tokens")
    report = perplexity_report(total, count, stats["num_words"], stats["num_unk"])
    counts = ("num_examples", "num_truncated_sources", "num_truncated_targets", "source_tokens_cut",
              "target_tokens_cut")
    return {**report, **{name: stats[name] for name in counts}}


@torch.no_grad()
def generate_targets(
    model,
    tokenizer,
    sources: Sequence[str],
    batch_size: int = 32,
    max_source_length: int | None = None,
    device: torch.device | str | None = None,
    **generate_kwargs,
) -> list[str]:
    """``model.generate`` over ``sources`` in batches of ``batch_size``, decoded to text.

    Each source is encoded as in training (its tokens, then ``<eos>``; at most ``max_source_length``
    tokens, with a warning that counts the sources cut). ``generate_kwargs`` go to ``generate``
    (``num_beams``, ``length_penalty``, ``max_new_tokens``, ``do_sample``, ...); with
    ``num_return_sequences=k`` the result holds k strings per source, one source after the other.

    Decoding drops the decoder start token, stops at the first ``<eos>`` and drops padding; ``<unk>``
    stays visible (it is a word the model predicted, not framing). Surrounding spaces are stripped.
    """
    check_texts(sources, "sources")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    ids, truncated, cut = encode_side(sources, tokenizer, max_source_length)
    if truncated:
        warnings.warn(f"generate_targets: truncated {truncated} of {len(ids)} sources to max_source_length="
                      f"{max_source_length} ({cut} tokens cut)", stacklevel=2)
    device = device or next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out: list[str] = []
    with eval_mode(model):
        for start in range(0, len(ids), batch_size):
            batch = {k: v.to(device) for k, v in pad_sources(ids[start : start + batch_size], pad).items()}
            generated = model.generate(**batch, **generate_kwargs)
            out += [_decode_target(row.tolist(), model, tokenizer) for row in generated]
    return out


def _decode_target(row: list[int], model, tokenizer) -> str:
    """One generated row as text: without the decoder start token, up to the first ``<eos>``
    (:func:`decode_generated` of the rest)."""
    config = model.generation_config
    start = (config.decoder_start_token_id if config.decoder_start_token_id is not None
             else model.config.decoder_start_token_id)
    if row and row[0] == start:
        row = row[1:]
    eos = config.eos_token_id if config.eos_token_id is not None else tokenizer.eos_token_id
    eos = set(eos) if isinstance(eos, list) else {eos}
    end = next((t for t, token in enumerate(row) if token in eos), len(row))
    return decode_generated(tokenizer, torch.tensor(row[:end], dtype=torch.long)).strip()


def evaluate_bleu(
    model,
    dataset,
    tokenizer,
    source_column: str = "source",
    target_column: str = "target",
    batch_size: int = 32,
    max_source_length: int | None = None,
    device: torch.device | str | None = None,
    split: str | None = None,
    return_predictions: bool = False,
    **generate_kwargs,
) -> dict:
    """Corpus BLEU (``hf_nlm.metrics.Bleu``, sacreBLEU) of the targets ``model`` generates from a split's
    sources against the split's targets (one reference each).

    ``generate_kwargs`` go to :func:`generate_targets` (e.g. ``num_beams=5, max_new_tokens=60``).
    Returns the metric's output (``score`` in [0, 100], ``precisions``, ``bp``, ...) and ``num_examples``;
    with ``return_predictions`` also ``predictions``, the generated texts.
    """
    from ..metrics import Bleu  # evaluate is slow to import; only evaluation needs it

    sources, targets = read_pairs(dataset, PairFormat(source_column, target_column), split)
    if generate_kwargs.get("num_return_sequences", 1) != 1:
        raise ValueError("evaluate_bleu scores one generated target per source: "
                         "num_return_sequences must be 1")
    predictions = generate_targets(model, tokenizer, sources, batch_size, max_source_length, device,
                                   **generate_kwargs)
    scores = Bleu().compute(predictions=predictions, references=[[t] for t in targets])
    scores["num_examples"] = len(sources)
    if return_predictions:
        scores["predictions"] = predictions
    return scores

