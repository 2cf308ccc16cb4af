"""Numeracy evaluation (Spithourakis & Riedel 2018): perplexity and adjusted perplexity over all tokens,
words only and numerals only, and where a numeral's cost comes from (the class and the branch of the
hierarchical softmax, sec. 3.2)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..data.batching import batching_for, split_texts
from ..data.lm import line_slices
from ..heads.numeral import DigitBranch, ValueBranch
from ..memory import available_memory
from .report import perplexity_report
from .scoring import split_log_probs

#: Numerals scored at once against every candidate (the vocabulary's numerals, their digit strings, the
#: mixture's intervals): the default of ``numeral_chunk_size`` and of ``--numeral-chunk-size``.
DEFAULT_NUMERAL_CHUNK_SIZE = 256
NUMERAL_CHUNK_FLAG = "--numeral-chunk-size"


def numeral_row_bytes(head) -> int:
    """About how many bytes scoring *one* numeral against every candidate of ``head`` creates: the
    |V|-wide distribution (a few float32 / float64 copies), and for an open branch its own tables, the
    d-RNN's trie over the vocabulary's digit strings (every prefix's LSTM state and next-symbol
    distribution, then every string's symbols) and the mixture's (numerals x components) interval masses
    (Spithourakis & Riedel 2018, sec. 3.3-3.5). Scoring a chunk of numerals costs this times the chunk."""
    total = 32 * int(getattr(head, "vocab_size", 0) or 0)
    for branch in {id(b): b for b in (getattr(head, "branch", None), getattr(head, "digit_branch", None),
                                      getattr(head, "value_branch", None)) if b is not None}.values():
        if isinstance(branch, DigitBranch):
            prefixes = len({s[:k] for s in branch.strings for k in range(len(s) + 1)})
            depth = max((len(s) for s in branch.strings), default=0) + 1
            total += prefixes * (13 * 8 + 24 * branch.rnn.digit_hidden_size) + len(branch.strings) * depth * 8
        elif isinstance(branch, ValueBranch):
            total += 24 * 8 * len(branch.rows) * branch.density.terms_per_numeral
    return total


def check_numeral_chunk_size(numeral_chunk_size, num_numerals: int, head, device=None) -> int:
    """The number of numerals to score at once (``numeral_chunk_size``, at most ``num_numerals``), refused
    with a ``ValueError`` that names ``--numeral-chunk-size`` and a size that fits, before anything is
    allocated, when it is below 1 or when its estimated tensors (chunk x :func:`numeral_row_bytes`) exceed
    the free memory (:func:`hf_nlm.memory.available_memory`; not checked where that cannot be read)."""
    if (isinstance(numeral_chunk_size, bool) or not isinstance(numeral_chunk_size, int)
            or numeral_chunk_size < 1):
        raise ValueError(f"{NUMERAL_CHUNK_FLAG} (numeral_chunk_size) is the number of numerals scored at "
                         f"once, an integer >= 1, got {numeral_chunk_size!r}; the default is "
                         f"{DEFAULT_NUMERAL_CHUNK_SIZE}")
    rows = max(1, min(numeral_chunk_size, num_numerals))
    device = torch.device(device) if device is not None else next(head.parameters()).device
    free = available_memory(gpu=device.type == "cuda")
    if free is None:
        return rows
    available, where = free
    per_row = numeral_row_bytes(head)
    if rows * per_row <= available:
        return rows
    # half the free memory: the model, the stream and the results live there too
    fits = available // (2 * per_row)
    if fits < 1:
        raise ValueError(f"scoring one numeral against this model's candidates needs about "
                         f"{_gigabytes(per_row)}, more than the {_gigabytes(available)} of {where}: "
                         f"no {NUMERAL_CHUNK_FLAG} fits")
    raise ValueError(f"{NUMERAL_CHUNK_FLAG} {numeral_chunk_size} scores {rows:,} numerals at once, about "
                     f"{_gigabytes(rows * per_row)} of tensors, more than the {_gigabytes(available)} "
                     f"of {where}; use {NUMERAL_CHUNK_FLAG} {min(fits, DEFAULT_NUMERAL_CHUNK_SIZE)} "
                     f"(at most {fits} fits)")


def _gigabytes(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e7 else f"{n / 1e6:.1f} MB"


def numeral_chunks(num_numerals: int, chunk_size: int):
    """``slice``s of ``chunk_size`` consecutive numerals covering ``num_numerals``: what each head scores
    at once, so that memory follows the chunk and not the split."""
    for start in range(0, num_numerals, chunk_size):
        yield slice(start, min(start + chunk_size, num_numerals))


def is_numeracy_tokenizer(tokenizer) -> bool:
    """Whether ``tokenizer`` tells numerals from words (it has a ``numeral_vocab``)."""
    return getattr(tokenizer, "numeral_vocab", None) is not None


def numeracy_report(batching, model, tokenizer, texts, stream, stats, batch_size: int = 32,
                    device=None) -> dict:
    """:func:`perplexity_report` plus the ``adjusted_perplexity`` metric's figures, from exact
    per-token log-probabilities of ``stream`` (the encoded ``texts``; its ``numeral_mask`` field says
    which targets are numerals)."""
    log_probs, report = _adjusted_perplexity_of_stream(batching, model, tokenizer, texts, stream, batch_size,
                                                       device)
    total = -float(log_probs.double().sum())
    return {**perplexity_report(total, stream["input_ids"].numel(), stats["num_words"], stats["num_unk"]),
            **report}


def _adjusted_perplexity_of_stream(batching, model, tokenizer, texts, stream, batch_size: int, device,
                                   with_hidden: bool = False, hidden_mask: torch.Tensor | None = None):
    """Every token of ``stream`` scored exactly, and the ``adjusted_perplexity`` metric's report of those
    scores: ``(log_probs, report)``, with ``with_hidden`` ``(log_probs, hidden, report)`` (the hidden states
    of the targets ``hidden_mask`` keeps, all without it).

    Each target is scored by ``head.nll`` batch by batch (its own digits or value for an open head), never
    against the whole numeral vocabulary, so memory follows the batch."""
    from ..data.lm import unknown_token_ids
    from ..metrics import adjusted_perplexity_report

    if "numeral_mask" not in stream:
        raise ValueError("a numeracy evaluation needs the numeral_mask token field: use the numeracy "
                         "tokenizer's token_features (tokenizer.token_features)")
    ids = stream["input_ids"]
    scored = split_log_probs(batching, model, stream, batch_size, device, with_hidden=with_hidden,
                             hidden_mask=hidden_mask)
    log_probs = scored[0] if with_hidden else scored
    if log_probs.numel() != ids.numel():
        raise RuntimeError(f"scored {log_probs.numel()} tokens but the stream has {ids.numel()}")
    unknown = torch.isin(ids, torch.tensor(unknown_token_ids(tokenizer)))
    if getattr(getattr(model, "lm_head", None), "open_numeral_vocabulary", False):
        # The head scored each numeral as itself (its digits or value), not as <unk_num>: nothing to adjust.
        unknown &= ~stream["numeral_mask"].bool()
    report = adjusted_perplexity_report(
        log_probs.double().cpu().numpy(), stream["numeral_mask"].numpy().astype(int),
        unknown.numpy().astype(int), stream_token_texts(texts, tokenizer),
    )
    return (log_probs, scored[1], report) if with_hidden else (log_probs, report)


def stream_token_texts(texts, tokenizer) -> list[str]:
    """The text of every token of the stream ``tokenize_stream`` builds from ``texts`` (each line's tokens,
    then ``<eos>``), as the tokenizer's normalizer sees it: the strings whose distinct values are the
    OOV types of the adjusted perplexity.

    The lines go to the tokenizer a slice at a time (:func:`~hf_nlm.data.lm.line_slices`), and a token
    text that repeats is one shared string: the list costs a pointer per token, not a string per token."""
    normalizer = tokenizer.backend_tokenizer.normalizer
    normalized: dict[str, str] = {}  # each distinct piece once, normalised once
    out: list[str] = []
    for part in line_slices(list(texts)):
        encoded = tokenizer(part, add_special_tokens=False, return_offsets_mapping=True)
        for text, spans in zip(part, encoded["offset_mapping"], strict=True):
            for a, b in spans:
                piece = text[a:b]
                if piece not in normalized:
                    normalized[piece] = normalizer.normalize_str(piece) if normalizer is not None else piece
                out.append(normalized[piece])
            out.append(tokenizer.eos_token)
    return out


class NumeralScores(NamedTuple):
    """What :func:`score_numerals` computes for the numerals of a split."""

    texts: list[str]  #: the split's texts
    stream: dict[str, torch.Tensor]  #: their token stream (each text's tokens, then ``<eos>``)
    mask: torch.Tensor  #: bool per target: is it a numeral
    log_probs: torch.Tensor  #: log p(target | full left context) of every target, stream order
    numeral_class: torch.Tensor  #: float64 log p(numeral | h) of every numeral target, stream order
    report: dict  #: the ``adjusted_perplexity`` metric's report of the stream
    extra: torch.Tensor | None  #: float64 (numerals, k): what ``per_chunk`` returned, stream order


def score_numerals(model, tokenizer, texts, block_size: int = 256, device=None,
                   numeral_chunk_size: int = DEFAULT_NUMERAL_CHUNK_SIZE, per_chunk=None,
                   task: str = "scoring numerals", nothing: str = "nothing to score") -> NumeralScores:
    """Every target of ``texts`` scored exactly from its full left context, and for every numeral target
    the log-probability that a numeral comes at all, log p(numeral | h) = logsumexp over the tokenizer's
    numerals N (``<unk_num>`` included) of log p(n | h): the class branch of Spithourakis & Riedel's
    h-softmax (sec. 3.2), or the mass a one-softmax model puts on numerals.

    The vocabulary-wide distribution ``head.log_probs`` is computed ``numeral_chunk_size`` numerals at a
    time (a chunk that cannot fit is refused first, :func:`check_numeral_chunk_size`). ``per_chunk``, if
    given, reads more from each chunk's distribution without a second table:
    ``per_chunk(hidden, log_probs, target_ids, target_log_probs)`` gets the chunk's hidden states, that
    distribution, the chunk's numeral target ids and their exact log-probabilities, and returns k figures
    per numeral, (rows, k), gathered into ``extra`` in stream order. ``task`` and ``nothing`` word the
    ``ValueError`` for a tokenizer without numerals and for a text without numerals."""
    if not is_numeracy_tokenizer(tokenizer):
        raise ValueError(f"{task} needs a numeracy tokenizer (hf_nlm.tokenization.train_numeracy_tokenizer)")
    batching = batching_for(model, tokenizer, block_size)
    texts = list(split_texts(texts))  # a datasets split's column: a list, which the tokenizer takes
    stream, _ = batching.encode(texts)
    mask = stream["numeral_mask"].bool()
    if not bool(mask.any()):
        raise ValueError(f"the text holds no numeral: {nothing}")
    chunk = check_numeral_chunk_size(numeral_chunk_size, int(mask.sum()), model.lm_head, device)
    log_probs, hidden, report = _adjusted_perplexity_of_stream(
        batching, model, tokenizer, texts, stream, batching.exact_batch_size(32), device, with_hidden=True,
        hidden_mask=mask)
    numeral_ids = torch.tensor(sorted(tokenizer.numeral_vocab.values()), device=hidden.device)
    # allocated once: no heap fragments per chunk
    numeral_class = torch.zeros(hidden.shape[0], dtype=torch.float64)
    extra = None
    if per_chunk is not None:
        target_ids, target_log_probs = stream["input_ids"][mask], log_probs[mask.to(log_probs.device)]
    with torch.no_grad():
        for rows in numeral_chunks(hidden.shape[0], chunk):
            vocabulary = model.lm_head.log_probs(hidden[rows])
            numeral_class[rows] = vocabulary[:, numeral_ids].double().logsumexp(-1).cpu()
            if per_chunk is not None:
                figures = per_chunk(hidden[rows], vocabulary, target_ids[rows],
                                    target_log_probs[rows]).double().cpu()
                if extra is None:  # its width is the caller's: allocated at the first chunk, once
                    extra = torch.zeros(hidden.shape[0], figures.shape[-1], dtype=torch.float64)
                extra[rows] = figures
    return NumeralScores(texts, stream, mask, log_probs, numeral_class, report, extra)


def numeral_cost_breakdown(model, tokenizer, texts, block_size: int = 256, device=None,
                           numeral_chunk_size: int = DEFAULT_NUMERAL_CHUNK_SIZE) -> dict[str, float | int]:
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

    p(numeral | h) sums the head's whole distribution, which for an open head means scoring every numeral
    of the vocabulary (the d-RNN spells each one, the mixture integrates each interval): this is done
    ``numeral_chunk_size`` numerals at a time, so memory follows the chunk, not the split (the figures do
    not depend on it; a chunk that cannot fit is refused first, :func:`check_numeral_chunk_size`).
    """
    scored = score_numerals(model, tokenizer, texts, block_size, device, numeral_chunk_size,
                            task="a numeral cost breakdown", nothing="nothing to break down")
    stream, mask, report = scored.stream, scored.mask, scored.report
    class_nll = -scored.numeral_class
    branch = -scored.log_probs[mask.to(scored.log_probs.device)].double().cpu() - class_nll
    outside = stream["input_ids"][mask] == tokenizer.unk_num_token_id

    def mean(x: torch.Tensor) -> float | None:
        return float(x.mean()) if x.numel() else None

    return {
        "numeral_class_nll": mean(class_nll), "numeral_branch_nll": mean(branch),
        "numeral_branch_nll_adjusted": math.log(report["adjusted_perplexity_numerals"]) - mean(class_nll),
        "numeral_branch_nll_known": mean(branch[~outside]),
        "numeral_branch_nll_unknown": mean(branch[outside]),
        "num_numerals": int(mask.sum()), "num_unknown_numerals": int(outside.sum()),
        "num_oov_numeral_types": report["num_oov_numeral_types"],
    }

