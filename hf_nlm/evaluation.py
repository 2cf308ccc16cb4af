"""Streaming evaluation of a causal LM over a text split, or of an encoder-decoder model over a split of
(source, target) pairs: summed NLL -> perplexities; generated targets -> BLEU.

How the split is read (blocks, stateful stream columns or paired examples) is decided by the model's
batching (:func:`hf_nlm.data.batching.batching_for`); this module turns the scores into reports.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch

from .data.batching import PairedBatching, batching_for, eval_mode, is_encoder_decoder, split_texts
from .data.pairs import PairFormat, check_texts, encode_side, pad_sources, read_pairs

__all__ = [
    "decode_generated",
    "evaluate_bleu",
    "evaluate_lm",
    "evaluate_seq2seq",
    "generate_targets",
    "is_numeracy_tokenizer",
    "numeral_cost_breakdown",
    "numeracy_report",
    "perplexity_report",
    "split_texts",
    "stream_token_texts",
    "token_log_probs",
]


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

    Recurrent models (``_is_stateful``) read the stream as ``batch_size`` columns side by side, in
    chunks of ``block_size`` with the state carried over (``hf_nlm.data.stream``); each column starts
    from a fresh state (the one after a sentence boundary), so ``batch_size=1`` gives the exact perplexity of the whole stream and larger
    batches an approximation that is faster (Merity et al. evaluate the test set with batch 1).
    """
    if is_encoder_decoder(model):
        raise TypeError("evaluate_lm reads lines of text for a causal LM; an encoder-decoder model is evaluated on "
                        "(source, target) pairs with evaluate_seq2seq")
    batching = batching_for(model, tokenizer, block_size)
    texts = split_texts(dataset, text_column)
    stream, stats = batching.encode(texts)
    if is_numeracy_tokenizer(tokenizer):
        return numeracy_report(batching, model, tokenizer, texts, stream, stats, batch_size, device)
    total, count = batching.score(model, stream, batch_size, device, desc="evaluate" if show_progress else None)
    if count != stats["num_tokens"]:
        raise RuntimeError(f"evaluated {count} targets but the split has {stats['num_tokens']} tokens")
    return perplexity_report(total, count, stats["num_words"], stats["num_unk"])


def is_numeracy_tokenizer(tokenizer) -> bool:
    """Whether ``tokenizer`` tells numerals from words (it has a ``numeral_vocab``)."""
    return getattr(tokenizer, "numeral_vocab", None) is not None


def numeracy_report(batching, model, tokenizer, texts, stream, stats, batch_size: int = 32, device=None) -> dict:
    """:func:`perplexity_report` plus the ``adjusted_perplexity`` metric's figures, from exact
    per-token log-probabilities of ``stream`` (the encoded ``texts``; its ``numeral_mask`` field says
    which targets are numerals)."""
    log_probs, report = _adjusted_perplexity_of_stream(batching, model, tokenizer, texts, stream, batch_size, device)
    total = -float(log_probs.double().sum())
    return {**perplexity_report(total, stream["input_ids"].numel(), stats["num_words"], stats["num_unk"]), **report}


def _adjusted_perplexity_of_stream(batching, model, tokenizer, texts, stream, batch_size: int, device,
                                   with_hidden: bool = False):
    """Every token of ``stream`` scored exactly, and the ``adjusted_perplexity`` metric's report of those
    scores: ``(log_probs, report)``, with ``with_hidden`` ``(log_probs, hidden, report)``."""
    from .data.lm import unknown_token_ids
    from .metrics import adjusted_perplexity_report

    if "numeral_mask" not in stream:
        raise ValueError("a numeracy evaluation needs the numeral_mask token field: use the numeracy tokenizer's "
                         "token_features (tokenizer.token_features)")
    ids = stream["input_ids"]
    scored = batching.log_probs(model, stream, batch_size, device, with_hidden=with_hidden)
    log_probs = scored[0] if with_hidden else scored
    if log_probs.numel() != ids.numel():
        raise RuntimeError(f"scored {log_probs.numel()} tokens but the stream has {ids.numel()}")
    unknown = torch.isin(ids, torch.tensor(unknown_token_ids(tokenizer)))
    if getattr(getattr(model, "lm_head", None), "open_numeral_vocabulary", False):
        # The head scored each numeral as itself (its digits or value), not as <unk_num>: nothing to adjust.
        unknown &= ~stream["numeral_mask"].bool()
    report = adjusted_perplexity_report(
        log_probs.double().cpu().numpy(), stream["numeral_mask"].numpy().astype(int), unknown.numpy().astype(int),
        stream_token_texts(texts, tokenizer),
    )
    return (log_probs, scored[1], report) if with_hidden else (log_probs, report)


def stream_token_texts(texts, tokenizer) -> list[str]:
    """The text of every token of the stream ``tokenize_stream`` builds from ``texts`` (each line's tokens,
    then ``<eos>``), as the tokenizer's normalizer sees it: the strings whose distinct values are the
    OOV types of the adjusted perplexity."""
    encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True)
    normalizer = tokenizer.backend_tokenizer.normalizer
    out: list[str] = []
    for text, spans in zip(texts, encoded["offset_mapping"], strict=True):
        pieces = [text[a:b] for a, b in spans]
        out += [normalizer.normalize_str(p) for p in pieces] if normalizer is not None else pieces
        out.append(tokenizer.eos_token)
    return out


def numeral_cost_breakdown(model, tokenizer, texts, block_size: int = 256, device=None) -> dict[str, float | int]:
    """Where a numeracy LM's numeral perplexity comes from: for every numeral target of ``texts``, its
    cost -log p(s | h) (nats) split into the cost of saying that a numeral comes and the cost of
    saying which one,

        -log p(s | h) = -log p(numeral | h) - log p(s | numeral, h),  p(numeral | h) = sum_{n in N} p(n | h),

    N the tokenizer's numerals (``<unk_num>`` included). For the hierarchical heads p(numeral | h) is
    the class branch of Spithourakis & Riedel's h-softmax (sec. 3.2); for a one-softmax model it is
    the mass that softmax puts on numerals, so every strategy is split the same way.

    Returns means over the numeral targets: ``numeral_class_nll``; ``numeral_branch_nll`` (the rest);
    ``numeral_branch_nll_adjusted``, the rest with each ``<unk_num>`` target charged as the adjusted
    perplexity charges it (log of the number of distinct OOV numeral types; nothing for an
    open-vocabulary head, which scores such a numeral as itself); ``numeral_branch_nll_known`` /
    ``numeral_branch_nll_unknown``, the unadjusted rest over the numerals in the vocabulary / outside
    it; and the counts. So ``exp(numeral_class_nll + numeral_branch_nll_adjusted)`` is
    :func:`evaluate_lm`'s ``adjusted_perplexity_numerals`` and ``exp(numeral_class_nll +
    numeral_branch_nll)`` its ``perplexity_numerals``. Each numeral is scored from its full left context.
    """
    if not is_numeracy_tokenizer(tokenizer):
        raise ValueError("a numeral cost breakdown needs a numeracy tokenizer (hf_nlm.tokenization.train_numeracy_tokenizer)")
    batching = batching_for(model, tokenizer, block_size)
    texts = split_texts(texts)
    stream, _ = batching.encode(texts)
    mask = stream["numeral_mask"].bool()
    if not bool(mask.any()):
        raise ValueError("the text holds no numeral: nothing to break down")
    log_probs, hidden, report = _adjusted_perplexity_of_stream(
        batching, model, tokenizer, texts, stream, batching.exact_batch_size(32), device, with_hidden=True)
    numeral_ids = torch.tensor(sorted(tokenizer.numeral_vocab.values()), device=hidden.device)
    with torch.no_grad():
        numeral_class = model.lm_head.log_probs(hidden[mask.to(hidden.device)])[:, numeral_ids].logsumexp(-1)
    class_nll = -numeral_class.double().cpu()
    branch = -log_probs[mask.to(log_probs.device)].double().cpu() - class_nll
    outside = stream["input_ids"][mask] == tokenizer.unk_num_token_id

    def mean(x: torch.Tensor) -> float | None:
        return float(x.mean()) if x.numel() else None

    return {
        "numeral_class_nll": mean(class_nll), "numeral_branch_nll": mean(branch),
        "numeral_branch_nll_adjusted": math.log(report["adjusted_perplexity_numerals"]) - mean(class_nll),
        "numeral_branch_nll_known": mean(branch[~outside]), "numeral_branch_nll_unknown": mean(branch[outside]),
        "num_numerals": int(mask.sum()), "num_unknown_numerals": int(outside.sum()),
        "num_oov_numeral_types": report["num_oov_numeral_types"],
    }


def perplexity_report(total_nll: float, num_tokens: int, num_words: int, num_unk: int) -> dict[str, float | int]:
    """The ``perplexity`` metric's output for summed NLL and counts, plus ``loss`` and ``num_unk``:
    the one result format of every evaluation in the package (neural, n-gram, mixture)."""
    from .metrics import Perplexity  # evaluate is slow to import; only evaluation needs it

    scores = Perplexity().compute(nll=[total_nll], num_tokens=[num_tokens], num_words=[num_words])
    return {"loss": scores["nll_per_token"], **scores, "num_unk": num_unk}


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
    log_probs = batching.log_probs(model, stream, batch_size, device)
    if log_probs.numel() != ids.numel():
        raise RuntimeError(f"scored {log_probs.numel()} tokens but the stream has {ids.numel()}")
    return ids, log_probs, stats["num_words"]


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
    total, count = batching.score(model, examples, batch_size, device, desc="evaluate" if show_progress else None)
    if count != stats["num_tokens"]:
        raise RuntimeError(f"evaluated {count} targets but the split has {stats['num_tokens']} target tokens")
    report = perplexity_report(total, count, stats["num_words"], stats["num_unk"])
    counts = ("num_examples", "num_truncated_sources", "num_truncated_targets", "source_tokens_cut", "target_tokens_cut")
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
    start = config.decoder_start_token_id if config.decoder_start_token_id is not None else model.config.decoder_start_token_id
    if row and row[0] == start:
        row = row[1:]
    eos = config.eos_token_id if config.eos_token_id is not None else tokenizer.eos_token_id
    eos = set(eos) if isinstance(eos, list) else {eos}
    end = next((t for t, token in enumerate(row) if token in eos), len(row))
    return decode_generated(tokenizer, torch.tensor(row[:end], dtype=torch.long)).strip()


def decode_generated(tokenizer, ids, numerals: dict[int, str] | None = None) -> str:
    """The text of generated ``ids``: special tokens dropped, except ``<unk>``, which stays visible so that
    an unknown word is not silently missing from the text; ``numerals`` (position in ``ids`` -> text)
    replace the ``<unk_num>`` tokens an open-vocabulary numeral decoder wrote out
    (:func:`hf_nlm.models.numeracy_lm.modeling_numeracy_lm.write_unknown_numerals`, or ``generate(..., return_dict_in_generate=True).numerals``)."""
    drop = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    if not numerals:
        return tokenizer.decode([i for i in ids.tolist() if i not in drop], skip_special_tokens=False)
    ids = ids.tolist()
    tokens = [numerals.get(t, token) for t, (i, token) in enumerate(zip(ids, tokenizer.convert_ids_to_tokens(ids),
                                                                        strict=True)) if i not in drop]
    return tokenizer.convert_tokens_to_string(tokens)




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
    from .metrics import Bleu  # evaluate is slow to import; only evaluation needs it

    sources, targets = read_pairs(dataset, PairFormat(source_column, target_column), split)
    if generate_kwargs.get("num_return_sequences", 1) != 1:
        raise ValueError("evaluate_bleu scores one generated target per source: num_return_sequences must be 1")
    predictions = generate_targets(model, tokenizer, sources, batch_size, max_source_length, device, **generate_kwargs)
    scores = Bleu().compute(predictions=predictions, references=[[t] for t in targets])
    scores["num_examples"] = len(sources)
    if return_predictions:
        scores["predictions"] = predictions
    return scores
