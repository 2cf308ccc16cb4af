"""Writing an ARPA file: :func:`write_arpa`, and the general (Python-formatted) lines."""

from __future__ import annotations

import numpy as np

from ..counts import context_words, row_ranks
from .bulk_writer import BulkWriter
from .format import BOS, EOS, LN10, PathLike


def _vocab_words(vocab, vocab_size: int) -> list[str]:
    """The ARPA string of every id: a tokenizer's tokens, a given list, or the ids themselves."""
    if vocab is None:
        return [str(i) for i in range(vocab_size)]
    if hasattr(vocab, "convert_ids_to_tokens"):
        if len(vocab) != vocab_size:
            raise ValueError(
                f"the tokenizer has {len(vocab)} tokens but the model's vocab_size is {vocab_size}"
            )
        words = vocab.convert_ids_to_tokens(list(range(vocab_size)))
    else:
        words = list(vocab)
    if len(words) != vocab_size:
        raise ValueError(f"got {len(words)} words for a vocabulary of {vocab_size} ids")
    for i, w in enumerate(words):
        if not isinstance(w, str) or not w or len(w.split()) != 1 or w != w.strip():
            raise ValueError(
                f"word {i} ({w!r}) cannot be written to ARPA: words must be non-empty and hold no whitespace"
            )
    if len(set(words)) != len(words):
        raise ValueError("the vocabulary has duplicate words; ARPA files name words by their strings")
    return words


def write_arpa(lm, path: PathLike, vocab=None, digits: int = 10) -> None:
    """Write a back-off LM (e.g. :class:`~hf_nlm.ngram.KneserNeyLM`) as a standard ARPA file.

    The boundary token (``lm.bos_id``, our ``<eos>``) is written as ``</s>`` where it is predicted
    (the last word of an n-gram) and as ``<s>`` where it is context; ``<s>`` gets the unigram
    log10 probability -99 (never predicted), and an n-gram ``h <s>`` that is a context of longer
    n-grams is written beside ``h </s>`` with probability -99 and the backoff weight.

    Args:
        lm: a fitted :class:`~hf_nlm.ngram.base.BackoffLM`.
        path: the file to write.
        vocab: a tokenizer, or a list of ``vocab_size`` word strings; default: the ids as strings.
        digits: decimals printed of every log10 probability / backoff weight.
    """
    if not lm.is_fitted:
        raise RuntimeError(f"this {type(lm).__name__} has not been fitted: nothing to export")
    n, V, bos = lm.order, lm.vocab_size, lm.bos_id
    words = _vocab_words(vocab, V)
    clash = [(i, w) for i, w in enumerate(words) if w in (BOS, EOS) and i != bos]
    if clash:
        raise ValueError(
            f"word {clash[0][0]} is {clash[0][1]!r}, but the file writes the boundary token (id {bos}) "
            "as <s> / </s>: rename it"
        )
    as_context = np.array(words, dtype=object)
    as_context[bos] = BOS
    as_target = as_context.copy()
    as_target[bos] = EOS
    ctx_words = context_words(lm.ctx_keys, V)
    fmt = f"%.{digits}f"
    fast = BulkWriter(as_context.tolist(), as_target.tolist(), digits)
    sections = []
    for k in range(1, n + 1):
        # The model's own level-k probability, from the last k-1 words: stored or backed off.
        if k == 1:
            grams, logp = np.arange(V)[:, None], lm.unigram_logp / LN10
            bow = np.full(V, np.nan)
            if n > 1:
                bow[ctx_words[1][:, 0]] = lm.ctx_logbow[1] / LN10
        else:
            keys = lm.gram_keys[k]
            listed = np.concatenate([ctx_words[k - 1][keys // V], (keys % V)[:, None]], axis=1)
            # A context with a backoff weight must be an entry, even if it never ended a target.
            extra = ctx_words[k] if k < n else np.zeros((0, k), dtype=np.int64)
            stacked = np.concatenate([listed, extra])
            rank, count = row_ranks(stacked, V)
            first = np.empty(count, dtype=np.int64)  # a row of stacked for every distinct row
            first[rank] = np.arange(rank.size)
            grams = np.take(stacked, first, axis=0)
            logp = np.full(count, np.nan)
            logp[rank[: len(listed)]] = lm.gram_logp[k] / LN10
            unlisted = np.flatnonzero(np.isnan(logp))  # contexts only: the backed-off probability
            logp[unlisted] = lm._log_prob(grams[unlisted, :-1], grams[unlisted, -1]) / LN10
            bow = np.full(count, np.nan)
            if k < n:
                bow[rank[len(listed) :]] = lm.ctx_logbow[k] / LN10
        ends = grams[:, -1] == bos
        # "h </s>": the probability only; "h <s>": the backoff weight (<s> alone: always listed).
        rows = np.flatnonzero(ends & (~np.isnan(bow) | (k == 1)))
        entry_bow = np.where(ends, np.nan, bow)
        blocks = _section_lines(grams, logp, entry_bow, rows, bow[rows], as_context, as_target, fast, fmt)
        sections.append((len(grams) + rows.size, blocks))

    with open(path, "wb") as f:
        f.write(b"\\data\\\n")
        for k, (count, _) in enumerate(sections, start=1):
            f.write(f"ngram {k}={count}\n".encode())
        for k, (_, blocks) in enumerate(sections, start=1):
            f.write(f"\n\\{k}-grams:\n".encode())
            f.writelines(blocks)
        f.write(b"\n\\end\\\n")


def _section_lines(grams, logp, bow, rows, start_bow, as_context, as_target, fast, fmt) -> list:
    """The text of one section (bytes-like blocks): every n-gram (``grams``, log10 p, log10 bow or NaN)
    and an ``<s>`` entry (-99, ``start_bow``) for each of ``rows``; in bulk where it can be."""
    blocks = fast.section(grams, logp, bow, rows, start_bow)
    if blocks is None:  # the general (slower) path: Python's own formatting, line by line
        k = grams.shape[1]
        columns = [as_context[grams[:, j]] for j in range(k - 1)]
        head = [" ".join(t) for t in zip(*[c.tolist() for c in columns], strict=True)] if k > 1 else None
        blocks = _entry_lines(head, as_target[grams[:, -1]].tolist(), logp, bow, fmt)
        start_head = [head[r] for r in rows.tolist()] if k > 1 else None
        blocks += _entry_lines(start_head, [BOS] * rows.size, None, start_bow, fmt)
        blocks = [b.encode("utf-8") for b in blocks]
    return blocks


def _entry_lines(head, last, logp, bow, fmt: str, chunk: int = 1 << 20) -> list[str]:
    """ARPA lines ``log10 p<TAB>words[<TAB>log10 bow]``; ``logp=None``: -99 (``<s>``, never predicted).

    Formatted a block at a time: one ``%`` over a template made of the lines' own templates."""
    text = last if head is None else [f"{h} {w}" for h, w in zip(head, last, strict=True)]
    prob = "-99" if logp is None else fmt
    templates = np.array([f"{prob}\t%s\n", f"{prob}\t%s\t{fmt}\n"], dtype=object)
    columns = [text, bow] if logp is None else [logp, text, bow]
    has_bow = ~np.isnan(bow)
    out = []
    for lo in range(0, len(text), chunk):
        hi = min(lo + chunk, len(text))
        args = np.empty((hi - lo, len(columns)), dtype=object)
        for j, column in enumerate(columns):
            args[:, j] = column[lo:hi]
        keep = np.ones(args.shape, dtype=bool)
        keep[:, -1] = has_bow[lo:hi]
        out.append("".join(templates[has_bow[lo:hi].astype(np.int64)].tolist()) % tuple(args[keep].tolist()))
    return out
