"""The ARPA back-off format (as SRILM's ``ngram-count`` and KenLM's ``lmplz`` write it): export and import.

Layout::

    \\data\\
    ngram 1=<number of 1-grams>
    ngram 2=<number of 2-grams>

    \\1-grams:
    <log10 p(w)>	<w>	<log10 bow(w)>
    ...

    \\2-grams:
    <log10 p(w2 | w1)>	<w1> <w2>	<log10 bow(w1 w2)>
    ...

    \\end\\

A reader computes ``p(w | h) = p(h w)`` if ``h w`` is listed, else ``bow(h) * p(w | h')`` (``bow = 1``
when ``h`` is not listed or has no backoff field); the highest order has no backoff field.

Sentence boundaries. Our models have one boundary token (``<eos>``, ``lm.bos_id``) that both ends a
sentence (as a target) and says "a sentence starts here" (as context; the stream is padded with it).
The files are written in the standard form that KenLM (``query``, ``build_binary``) and SRILM load
with no flag: the boundary is ``</s>`` where it is predicted and ``<s>`` where it is context, ``<s>``
has the unigram log10 probability -99, and an n-gram ``h <s>`` that is a context of longer n-grams
is written beside ``h </s>`` (probability -99, the backoff weight). Reading maps ``<s>`` and
``</s>`` back to the one boundary id, so export then import is exact. Those tools score each sentence
from ``<s>`` alone, which our ``per_sentence=True`` scoring reproduces
(:meth:`~hf_nlm.ngram.base.NgramLM.stream_log_probs`); our default, the running stream, also reaches
across sentence ends, through n-grams such as ``w <s> v`` that the tools never query.

Words are matched by their strings: :func:`read_arpa` maps a file to a given vocabulary by word and
refuses one that does not match; a file read without a vocabulary keeps its own ids, and
``ArpaLM.evaluate`` maps a tokenizer to them by word.

Exactness: every unigram is written (the uniform floor of Kneser-Ney included), and every context that
has a backoff weight is written as an n-gram of its own, with the probability the model gives it (for a
context that never ended a target, that probability is the backed-off one). Reading the file back
(:class:`~hf_nlm.ngram.arpa_lm.ArpaLM`) therefore gives the model's probability for every context and
word, seen or not, up to the ``digits`` decimals printed of each log10 value.

This module is the file format only (it knows no model class): the models write themselves through
:func:`write_arpa` (``BackoffLM.to_arpa``), and ``ArpaLM`` is built from :func:`read_arpa`.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .counts import context_words, row_ranks

PathLike = str | os.PathLike[str]
_LN10 = math.log(10.0)
_NGRAM_LINE = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)")
BOS, EOS = "<s>", "</s>"  # the standard sentence markers: both stand for our boundary token


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
    fast = _FastWriter.for_words(as_context.tolist(), as_target.tolist(), digits)
    sections = []
    for k in range(1, n + 1):
        # The model's own level-k probability, from the last k-1 words: stored or backed off.
        if k == 1:
            grams, logp = np.arange(V)[:, None], lm.unigram_logp / _LN10
            bow = np.full(V, np.nan)
            if n > 1:
                bow[ctx_words[1][:, 0]] = lm.ctx_logbow[1] / _LN10
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
            logp[rank[: len(listed)]] = lm.gram_logp[k] / _LN10
            unlisted = np.flatnonzero(np.isnan(logp))  # contexts only: the backed-off probability
            logp[unlisted] = lm._log_prob(grams[unlisted, :-1], grams[unlisted, -1]) / _LN10
            bow = np.full(count, np.nan)
            if k < n:
                bow[rank[len(listed) :]] = lm.ctx_logbow[k] / _LN10
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
    blocks = fast.section(grams, logp, bow, rows, start_bow) if fast is not None else None
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


def fixed_point_bytes(x: np.ndarray, digits: int) -> np.ndarray | None:
    """``"%.{digits}f" % v`` of every value as the rows of a (N, W) uint8 array, NUL-padded, or ``None``.

    The text of a row is its bytes without the NULs (the padding sits between the sign and the first
    digit). Vectorised integer arithmetic, and the same text as Python's formatting: ``rint(|x| 10^d)``
    is the correctly rounded value except within the rounding error of the product of a tie, and those
    few values are formatted by Python. ``None`` (format them another way) for ``digits`` outside
    1 .. 15 and for values that are not finite or too large (``|x| 10^d >= 2^52``).
    """
    x = np.asarray(x, dtype=np.float64)
    if not 1 <= digits <= 15 or not np.isfinite(x).all():
        return None
    y = np.abs(x) * 10.0**digits  # one rounding: relative error <= 2^-53
    if x.size and y.max() >= 2.0**52:
        return None
    q = np.rint(y).astype(np.int64)
    near_tie = np.flatnonzero(np.abs(y - np.floor(y) - 0.5) <= y * 2.0**-51 + 2.0**-40)
    if near_tie.size:
        fmt = f"%.{digits}f"
        q[near_tie] = [int((fmt % v).lstrip("-").replace(".", "")) for v in x[near_tie].tolist()]
    whole, frac = np.divmod(q, np.int64(10) ** digits)
    width = len(str(int(whole.max()))) if x.size else 1
    out = np.zeros((x.size, 1 + width + 1 + digits), dtype=np.uint8)
    out[:, 0] = np.where(np.signbit(x), ord("-"), 0)
    for i in range(width):  # the integer part, right-aligned, its leading zeros NUL (but the last digit)
        power = 10 ** (width - 1 - i)
        digit = (whole // power) % 10 + ord("0")
        out[:, 1 + i] = digit if i == width - 1 else np.where(whole >= power, digit, 0)
    out[:, 1 + width] = ord(".")
    at = 2 + width + digits  # the decimals, five at a time from the last, from a table of "00000".."99999"
    while at > 2 + width:
        size = min(5, at - 2 - width)
        frac, group = np.divmod(frac, 10**size)
        out[:, at - size : at] = _five_digits()[group, 5 - size :]
        at -= size
    return out


_FIVE_DIGITS: list[np.ndarray] = []


def _five_digits() -> np.ndarray:
    """(100000, 5) uint8: the digits of 0 .. 99999, zero-padded (``"00000"`` .. ``"99999"``)."""
    if not _FIVE_DIGITS:
        numbers = np.arange(100000)
        _FIVE_DIGITS.append(np.stack([(numbers // 10**p) % 10 for p in (4, 3, 2, 1, 0)], axis=1).astype(np.uint8) + 48)
    return _FIVE_DIGITS[0]


class _FastWriter:
    """ARPA entry lines built as bytes in bulk: every line a fixed-width row of a uint8 array (each
    field in a slot of its own, NUL-padded), then the NULs dropped. Only for vocabularies whose words
    are short and free of NUL characters (see :meth:`for_words`)."""

    MAX_WORD_BYTES = 64  # longer words make every row that wide: the general path is faster then
    CHUNK_BYTES = 1 << 26  # rows are built this many bytes at a time

    def __init__(self, context: np.ndarray, target: np.ndarray, digits: int) -> None:
        self.context, self.target, self.digits = context, target, digits

    @classmethod
    def for_words(cls, as_context: list[str], as_target: list[str], digits: int) -> _FastWriter | None:
        encoded = [[w.encode("utf-8") for w in words] for words in (as_context, as_target)]
        width = max(len(w) for w in encoded[0] + encoded[1])
        if width > cls.MAX_WORD_BYTES or any(b"\0" in w for w in encoded[0] + encoded[1]):
            return None
        mats = [np.array(words, dtype=f"S{width}").view(np.uint8).reshape(len(words), width) for words in encoded]
        return cls(mats[0], mats[1], digits)

    def section(self, grams, logp, bow, start_rows, start_bow) -> list[np.ndarray] | None:
        """The lines of one section (byte arrays, to be written one after the other): every n-gram
        (``grams`` (N, k) ids, log10 p, log10 bow or NaN), then an ``<s>`` line (-99, the backoff weight
        ``start_bow`` or NaN) for each of ``start_rows``; ``None`` if a value needs the general path."""
        prob = fixed_point_bytes(logp, self.digits)
        weight = self._weights(bow)
        start_weight = self._weights(start_bow)
        if prob is None or weight is None or start_weight is None:
            return None
        blocks = self._lines(grams, prob, None, weight)
        if start_rows.size:
            bos = np.zeros((1, self.target.shape[1]), dtype=np.uint8)
            bos[0, : len(BOS)] = np.frombuffer(BOS.encode(), dtype=np.uint8)
            minus99 = np.frombuffer(b"-99", dtype=np.uint8)[None, :]
            blocks += self._lines(grams[start_rows], minus99, bos, start_weight)
        return blocks

    def _weights(self, bow: np.ndarray) -> np.ndarray | None:
        """The backoff field of every line, ``"\\t" + value``, as NUL-padded rows (all NUL: no field)."""
        has_bow = ~np.isnan(bow)
        rows = np.flatnonzero(has_bow)
        if rows.size == 0:
            return np.zeros((bow.size, 0), dtype=np.uint8)
        text = fixed_point_bytes(bow[rows], self.digits)
        if text is None:
            return None
        out = np.zeros((bow.size, 1 + text.shape[1]), dtype=np.uint8)
        out[rows, 0] = 9
        out[rows, 1:] = text
        return out

    def _lines(self, grams, prob, last, weight) -> list[np.ndarray]:
        n, k = grams.shape
        word = self.context.shape[1]
        width = prob.shape[1] + k * (word + 1) + weight.shape[1] + 1
        step = max(1, self.CHUNK_BYTES // width)
        out = []
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            rows = np.empty((hi - lo, width), dtype=np.uint8)
            at = prob.shape[1]
            rows[:, :at] = prob if prob.shape[0] == 1 else prob[lo:hi]
            for j in range(k):
                rows[:, at] = 9 if j == 0 else 32
                if j < k - 1:
                    np.take(self.context, grams[lo:hi, j], axis=0, mode="clip", out=rows[:, at + 1 : at + 1 + word])
                elif last is None:
                    np.take(self.target, grams[lo:hi, j], axis=0, mode="clip", out=rows[:, at + 1 : at + 1 + word])
                else:
                    rows[:, at + 1 : at + 1 + word] = last
                at += 1 + word
            rows[:, at:-1] = weight[lo:hi]
            rows[:, -1] = 10
            flat = rows.reshape(-1)
            out.append(flat[flat != 0])
        return out


def _error(path, line: int, message: str) -> ValueError:
    return ValueError(f"{path}, line {line}: {message}")


def _parse_float(path, line: int, text: str, what: str, at_most_zero: bool) -> float:
    try:
        x = float(text)
    except ValueError:
        raise _error(path, line, f"{what} {text!r} is not a number") from None
    # A log10 probability is <= 0; a backoff weight may exceed 1 (Katz back-off writes such weights).
    if math.isnan(x) or (at_most_zero and x > 0):
        raise _error(path, line, f"{what} {text!r} must be a log10 value{' <= 0' if at_most_zero else ''}")
    return x


def _decode(path: Path, data: bytes) -> str:
    """The file's text; a byte sequence that is not UTF-8 is refused with its line and byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1)
        raise _error(
            path,
            line,
            f"not UTF-8: byte 0x{data[err.start]:02x} at byte offset {err.start} of the file "
            f"(byte {column} of the line) ({err.reason}); ARPA files are read as UTF-8",
        ) from None


def _boundary_id(vocab, word_id: dict[str, int], bos_id: int | None) -> int | None:
    """The id that ``<s>`` / ``</s>`` stand for: ``bos_id``, else the tokenizer's bos / eos, else ``<eos>``."""
    if bos_id is not None:
        return bos_id
    if hasattr(vocab, "eos_token_id"):
        return vocab.bos_token_id if vocab.bos_token_id is not None else vocab.eos_token_id
    return word_id.get("<eos>")


def read_arpa(
    path: PathLike, vocab=None, bos_id: int | None = None
) -> tuple[list[str], int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Parse an ARPA file. Returns ``(words, vocab_size, sections)``.

    ``sections[k - 1] = (ids (M, k) int64 oldest first, log10 p (M,), log10 bow (M,))``; a missing
    backoff weight is NaN, and so is the probability of an n-gram ending in ``<s>`` that has no
    ``</s>`` twin (a context only: ``<s>`` is never predicted).

    Words are mapped to ids BY WORD: by ``vocab`` (a tokenizer or a list of strings) if given, and
    then every word of the file must be in ``vocab`` and every word of ``vocab`` in the file; else,
    if every unigram is a decimal number, by that number (files written without a vocabulary); else
    by their position in the ``\\1-grams:`` section. The standard sentence markers ``<s>`` (context)
    and ``</s>`` (target) are both read as our one boundary token, unless ``vocab`` has words of
    their own for them: with ``vocab``, the id ``bos_id`` (default: the tokenizer's bos / eos id, or
    the position of ``<eos>`` in a list); for numeric words, ``bos_id`` or the one id the file skips;
    else one shared id, named ``</s>`` in ``words``. An ``<s>`` entry and a ``</s>`` entry with the
    same words are then one n-gram: its probability from ``</s>``, its backoff weight from ``<s>``.

    Raises:
        ValueError: a malformed file, or a vocabulary that does not match the file's; the message
            names the file (and the line where there is one).
    """
    return _read_arpa(path, vocab, bos_id)[:3]


def _read_arpa(path: PathLike, vocab=None, bos_id: int | None = None):
    """:func:`read_arpa`, plus the boundary id (``None`` when the file has no ``<s>`` / ``</s>``)."""
    path = Path(path)
    data = path.read_bytes()
    text = _decode(path, data)
    raw = _read_bulk(data, text)
    if raw is None:  # anything irregular: read line by line, which also finds and names what is wrong
        raw = _read_lines(path, text)
    return _map_words(path, raw, vocab, bos_id)


def _read_lines(path: Path, text: str) -> list[tuple[list[str], np.ndarray, np.ndarray, Sequence[int]]]:
    """The sections of the file, read line by line (see :func:`_read_bulk` for what it returns)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline does not start a line of its own
    num_lines = len(lines)
    i = 0
    while i < num_lines and lines[i].strip() != "\\data\\":  # text before \data\ is allowed (comments)
        i += 1
    if i == num_lines:
        raise _error(
            path, max(num_lines, 1), "reached the end of the file without finding the \\data\\ header"
        )
    i += 1
    declared: list[tuple[int, int]] = []  # (count, line of its 'ngram k=count')
    while i < num_lines:
        s = lines[i].strip()
        if s.startswith("\\"):
            break
        if s:
            m = _NGRAM_LINE.fullmatch(s)
            if not m:
                raise _error(
                    path, i + 1, f"expected 'ngram <order>=<count>' in the \\data\\ header, got {s!r}"
                )
            if int(m.group(1)) != len(declared) + 1:
                raise _error(
                    path, i + 1, f"expected 'ngram {len(declared) + 1}=...' (orders in sequence), got {s!r}"
                )
            declared.append((int(m.group(2)), i + 1))
        i += 1
    if not declared:
        raise _error(
            path,
            i + 1 if i < num_lines else num_lines,
            "the \\data\\ header lists no 'ngram <order>=<count>' lines",
        )
    order = len(declared)

    raw: list[tuple[list[list[str]], list[float], list[float], list[int]]] = []
    for k in range(1, order + 1):
        while i < num_lines and not lines[i].strip():
            i += 1
        if i == num_lines:
            raise _error(path, num_lines, f"reached the end of the file, expected the \\{k}-grams: section")
        if lines[i].strip() != f"\\{k}-grams:":
            raise _error(path, i + 1, f"expected the \\{k}-grams: section, got '{lines[i].strip()}'")
        i += 1
        expected, header_line = declared[k - 1]
        fast = _regular_section(lines, i, k, order, expected)
        if fast is not None:  # the common case, parsed in bulk; anything irregular is read line by line
            raw.append((*fast, range(i + 1, i + 1 + expected)))
            i += expected
            continue
        grams, logp, bow, where = [], [], [], []
        while i < num_lines and not lines[i].lstrip().startswith("\\"):
            fields = lines[i].split()
            i += 1
            if not fields:
                continue
            if len(fields) not in ((k + 1, k + 2) if k < order else (k + 1,)):
                want = f"{k + 1} or {k + 2}" if k < order else f"{k + 1}"
                raise _error(
                    path,
                    i,
                    f"a {k}-gram entry needs {want} fields (log10 prob, {k} words"
                    f"{', log10 backoff' if k < order else ''}), got {len(fields)}: {lines[i - 1].strip()!r}",
                )
            if len(grams) == expected:
                raise _error(
                    path,
                    i,
                    f"more than the {expected} {k}-grams the \\data\\ header (line {header_line}) declares",
                )
            logp.append(_parse_float(path, i, fields[0], "log10 probability", True))
            bow.append(
                _parse_float(path, i, fields[k + 1], "log10 backoff weight", False)
                if len(fields) == k + 2
                else math.nan
            )
            grams.append(fields[1 : k + 1])
            where.append(i)
        if len(grams) != expected:
            raise _error(
                path,
                min(i + 1, num_lines),
                f"the \\{k}-grams: section ends after {len(grams)} entries, "
                f"but the \\data\\ header (line {header_line}) declares {expected}",
            )
        raw.append((list(itertools.chain.from_iterable(grams)), logp, bow, where))
    while i < num_lines and not lines[i].strip():
        i += 1
    if i == num_lines:
        raise _error(path, num_lines, "reached the end of the file without the closing \\end\\")
    if lines[i].strip() != "\\end\\":
        raise _error(
            path, i + 1, f"expected \\end\\ after the \\{order}-grams: section, got '{lines[i].strip()}'"
        )
    return raw


def _map_words(path: Path, raw, vocab, bos_id: int | None):
    """The parsed sections as id arrays (words mapped to ids, ``<s>`` / ``</s>`` pairs merged)."""
    word_id, words, vocab_size, boundary = _word_ids(path, raw[0][0], vocab, bos_id)
    sections = []
    for k, (flat, logp, bow, where) in enumerate(raw, start=1):
        ids = flat.ids(word_id) if isinstance(flat, _BulkWords) else None
        if ids is None:
            try:
                ids = np.fromiter(map(word_id.__getitem__, flat), dtype=np.int64, count=len(flat))
            except KeyError:  # find and name the first unknown word
                ids = np.fromiter(map(word_id.get, flat, itertools.repeat(-1)), dtype=np.int64, count=len(flat))
        if (ids < 0).any():
            unknown = int(np.argmax(ids < 0))
            source = "the vocabulary given" if vocab is not None else "the \\1-grams: section"
            raise _error(path, where[unknown // k], f"word {flat[unknown]!r} is not in {source}")
        ids = ids.reshape(-1, k)
        logp, bow = np.asarray(logp, dtype=np.float64), np.asarray(bow, dtype=np.float64)
        # With <s> and </s> read as one id, "h <s>" (a context) and "h </s>" (a target) are one n-gram.
        start = None
        if boundary is not None:
            start = np.zeros(len(ids), dtype=bool)
            ends = np.flatnonzero(ids[:, -1] == boundary)
            if isinstance(flat, _BulkWords):
                start[ends] = flat.equal(ends * k + k - 1, BOS)
            else:
                start[ends] = [flat[r * k + k - 1] == BOS for r in ends.tolist()]
        ids, logp, bow = _merge_duplicates(path, k, ids, logp, bow, start, flat, where)
        sections.append((ids, logp, bow))
    return words, vocab_size, sections, boundary


# Characters str.split() splits on besides " ", "\t" and "\n": the bulk reader leaves files with any of
# them to the line reader (which splits lines with str.split()).
_ODD_SPACE_BYTES = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")
_ODD_SPACE = re.compile("[\r\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_DATA_LINE = re.compile(rb"^[ \t]*\\data\\[ \t]*$", re.MULTILINE)
_POW10 = 10.0 ** np.arange(16)  # exact doubles
_POW10_INT = 10 ** np.arange(16, dtype=np.int64)


def _read_bulk(data: bytes, text: str) -> list[tuple[list[str], np.ndarray, np.ndarray, Sequence[int]]] | None:
    """The sections of a regular file, parsed in bulk from its bytes, or ``None``.

    Returns, for k = 1 .. order, ``(words, log10 p, log10 bow, lines)``: the k words of every entry
    (flat), its probability, its backoff weight (NaN where there is none) and its line number. Regular:
    the entries of every section are ``p<TAB>w1 .. wk`` or ``p<TAB>w1 .. wk<TAB>bow`` lines (single
    spaces between words), exactly as many as the ``\\data\\`` header declares. Anything else (and any
    malformed value) gives ``None``: the caller then reads the file line by line, which gives the same
    sections for every file this reader accepts, and names the line of whatever is wrong.

    Bulk: numpy over the file's bytes (line ends, tabs and spaces found once, numbers parsed column by
    column), and one ``str.split`` for the words of a section; no Python object per line.
    """
    if any(c in data for c in _ODD_SPACE_BYTES) or (not data.isascii() and _ODD_SPACE.search(text)):
        return None
    header = _DATA_LINE.search(data)
    if header is None:
        return None
    buf = np.frombuffer(data, dtype=np.uint8)
    # One pass over the bytes for the separators (the only bytes <= 32 left: tab, newline, space).
    separators = np.flatnonzero(buf <= 32)
    kind = buf[separators]
    newlines, tabs, spaces = (separators[kind == c] for c in (10, 9, 32))
    # Every 8 bytes from every byte offset as a little-endian integer (a strided view; the words' keys).
    padded = np.concatenate([buf, np.zeros(16, dtype=np.uint8)])
    octets = np.ndarray((padded.size - 7,), dtype="<u8", buffer=padded, strides=(1,))

    def line(pos: int) -> tuple[str, int]:  # the line from byte pos on, stripped, and where the next starts
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        return data[pos:end].decode("utf-8").strip(), end + 1

    def next_line(pos: int) -> tuple[str | None, int]:  # the next non-blank line (None: end of file)
        while pos < len(data):
            s, after = line(pos)
            if s:
                return s, after
            pos = after
        return None, pos

    declared: list[int] = []
    s, pos = next_line(header.end() + 1)
    while s is not None and not s.startswith("\\"):
        m = _NGRAM_LINE.fullmatch(s)
        if m is None or int(m.group(1)) != len(declared) + 1:
            return None
        declared.append(int(m.group(2)))
        s, pos = next_line(pos)
    order = len(declared)
    sections = []
    for k in range(1, order + 1):
        if s != f"\\{k}-grams:":
            return None
        section = _bulk_section(data, buf, octets, newlines, tabs, spaces, pos, declared[k - 1], k, order)
        if section is None:
            return None
        sections.append(section[0])
        s, pos = next_line(section[1])
    return sections if order and s == "\\end\\" else None


def _bulk_section(data, buf, octets, newlines, tabs, spaces, pos: int, count: int, k: int, order: int):
    """The ``count`` entries of the k-grams section starting at byte ``pos`` (see :func:`_read_bulk`), and
    the byte after them; ``None`` if they are not regular."""
    first = int(np.searchsorted(newlines, pos))  # index of the newline that ends the first entry
    if count == 0 or first + count > newlines.size:
        return None
    ends = newlines[first : first + count]
    starts = np.concatenate([[pos], ends[:-1] + 1])
    after = int(ends[-1]) + 1
    follow_end = data.find(b"\n", after)
    follow = data[after : follow_end if follow_end >= 0 else len(data)].strip()
    if follow and not follow.startswith(b"\\"):
        return None  # more entries than declared
    tab = tabs[np.searchsorted(tabs, pos) : np.searchsorted(tabs, after)]
    tab_line = np.searchsorted(ends, tab)  # the entry each tab is on
    per_line = np.bincount(tab_line, minlength=count)
    with_bow = per_line == 2
    if not ((per_line == 1) | (with_bow & (k < order))).all():
        return None
    first_tab = np.cumsum(per_line) - per_line
    word_start = tab[first_tab] + 1
    word_end = np.where(with_bow, tab[np.minimum(first_tab + 1, tab.size - 1)], ends)
    space = spaces[np.searchsorted(spaces, pos) : np.searchsorted(spaces, after)]
    space_line = np.searchsorted(ends, space)
    # k - 1 single spaces per entry, all inside the words field and none at its edges: k non-empty words.
    if (
        not (word_end > word_start).all()
        or not (np.bincount(space_line, minlength=count) == k - 1).all()
        or not ((space > word_start[space_line]) & (space < word_end[space_line] - 1)).all()
        or (np.diff(space) == 1).any()
    ):
        return None
    logp = _parse_numbers(data, buf, starts, word_start - 1)
    bow = np.full(count, np.nan)
    if logp is None or np.isnan(logp).any() or (logp > 0).any():
        return None
    if with_bow.any():
        values = _parse_numbers(data, buf, word_end[with_bow] + 1, ends[with_bow])
        if values is None or np.isnan(values).any():
            return None
        bow[with_bow] = values
    if k == 1:
        words = _join_fields(buf, word_start, word_end).split(" ")
        if len(words) != count:
            return None
    else:  # k words per entry: from the words field's start or a space, to a space or the field's end
        space = space.reshape(count, k - 1)
        words = _BulkWords(
            octets,
            buf,
            np.concatenate([word_start[:, None], space + 1], axis=1).reshape(-1),
            np.concatenate([space, word_end[:, None]], axis=1).reshape(-1),
        )
    return (words, logp, bow, range(first + 1, first + 1 + count)), after


_LOW_BYTES = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_HASH = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64)


class _BulkWords:
    """The words of a section as byte ranges of the file (``starts[i]:ends[i]``), for :func:`_map_words`:
    a sequence of strings (decoded one at a time, for messages), and :meth:`ids`, which maps them all to
    ids in numpy: a word of at most 16 bytes is two 8-byte integers and a length, matched exactly
    against the vocabulary's (a hash finds the candidate, the bytes are then compared)."""

    def __init__(self, octets: np.ndarray, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self.octets, self.buf, self.starts, self.ends = octets, buf, starts, ends

    def __len__(self) -> int:
        return self.starts.size

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.buf[self.starts[i] : self.ends[i]].tobytes().decode("utf-8")

    def _keys(self, rows=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first 8 bytes, next 8 bytes, length) of every word (of ``rows``), bytes past its end zeroed."""
        starts = self.starts if rows is None else self.starts[rows]
        lengths = (self.ends if rows is None else self.ends[rows]) - starts
        low = self.octets[starts] & _LOW_BYTES[np.minimum(lengths, 8)]
        high = self.octets[starts + 8] & _LOW_BYTES[np.clip(lengths - 8, 0, 8)]
        return low, high, lengths

    @staticmethod
    def _hash(low, high, lengths) -> np.ndarray:
        with np.errstate(over="ignore"):
            return low * _HASH[0] ^ high * _HASH[1] ^ lengths.astype(np.uint64) * _HASH[2]

    def ids(self, word_id: dict[str, int]) -> np.ndarray | None:
        """The id of every word (-1: not in ``word_id``); ``None`` if the vocabulary cannot be matched
        this way (two of its words with one hash)."""
        short = [(w.encode("utf-8"), j) for w, j in word_id.items()]
        short = [(b, j) for b, j in short if len(b) <= 16]
        ids = np.full(len(self), -1, dtype=np.int64)
        low, high, lengths = self._keys()
        if short:
            v_bytes = np.frombuffer(b"".join(b.ljust(16, b"\0") for b, _ in short), dtype="<u8").reshape(-1, 2)
            v_len = np.array([len(b) for b, _ in short], dtype=np.int64)
            v_id = np.array([j for _, j in short], dtype=np.int64)
            v_hash = self._hash(v_bytes[:, 0], v_bytes[:, 1], v_len)
            order = np.argsort(v_hash)
            v_hash, v_bytes, v_len, v_id = v_hash[order], v_bytes[order], v_len[order], v_id[order]
            if (v_hash[1:] == v_hash[:-1]).any():
                return None
            # A table of 2^bits slots (a few per word) holds one candidate per slot; the words that
            # share a slot with another are found by binary search instead.
            bits = max(12, int(v_hash.size).bit_length() + 4)
            table = np.full(1 << bits, -1, dtype=np.int64)
            table[(v_hash >> np.uint64(64 - bits)).astype(np.int64)] = np.arange(v_hash.size)
            q_hash = self._hash(low, high, lengths)

            def match(at, rows):  # candidates at -> their ids where the bytes are the word's, else -1
                ok = at >= 0
                at = np.where(ok, at, 0)
                ok &= (v_bytes[at, 0] == low[rows]) & (v_bytes[at, 1] == high[rows]) & (v_len[at] == lengths[rows])
                return np.where(ok, v_id[at], -1)

            ids = match(table[(q_hash >> np.uint64(64 - bits)).astype(np.int64)], slice(None))
            rest = np.flatnonzero((ids < 0) & (lengths <= 16))
            if rest.size:
                ids[rest] = match(np.minimum(np.searchsorted(v_hash, q_hash[rest]), v_hash.size - 1), rest)
        for i in np.flatnonzero((self.ends - self.starts) > 16).tolist():  # long words: by string
            ids[i] = word_id.get(self[i], -1)
        return ids

    def equal(self, rows: np.ndarray, word: str) -> np.ndarray:
        """Whether the words at ``rows`` are ``word``."""
        b = word.encode("utf-8")
        if len(b) > 16:
            return np.array([self[i] == word for i in rows.tolist()], dtype=bool)
        low, high, lengths = self._keys(rows)
        want = np.frombuffer(b.ljust(16, b"\0"), dtype="<u8")
        return (low == want[0]) & (high == want[1]) & (lengths == len(b))


def _parse_numbers(data: bytes, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
    """``float(data[starts[i]:ends[i]])`` for every i; ``None`` if one is not a number.

    Plain decimals (``-?digits[.digits]``, at most 15 digits: ``-1.2345678901``, ``-99``) are parsed in
    numpy, all fields of one length at a time as a (fields, length) byte matrix: the digits as an
    integer m and the number f of decimals, then m / 10^f, which is correctly rounded as ``float`` is
    (m and 10^f are exact doubles, one division). Anything else (an exponent, ``inf``, more digits)
    goes through ``float`` itself."""
    lengths = ends - starts
    values = np.empty(starts.size)
    plain = np.zeros(starts.size, dtype=bool)
    widths = np.bincount(np.clip(lengths, 0, 18))  # fields of 1 .. 17 bytes may be plain decimals
    for width in np.flatnonzero(widths[:18]).tolist():
        if width == 0:
            continue
        rows = np.flatnonzero(lengths == width)
        chars = np.lib.stride_tricks.sliding_window_view(buf, width)[starts[rows]]
        digit_value = chars - np.uint8(ord("0"))  # wraps below "0": a digit is < 10
        is_digit = digit_value < 10
        is_dot = chars == ord(".")
        negative = chars[:, 0] == ord("-")
        other = ~(is_digit | is_dot)
        other[:, 0] &= ~negative
        # One pass over the rows: the number of dots (bits 0-4) and of other characters (bits 5-9).
        tally = np.add.reduce(is_dot + (other.view(np.uint8) << 5), axis=1, dtype=np.uint16)
        dots = tally & 31
        ok = (tally >> 5 == 0) & (dots <= 1) & (width - dots - negative >= 1) & (width - dots - negative <= 15)
        digit_value[~is_digit] = 0  # the sign and the dot read as a 0 digit, taken out below
        mantissa = np.zeros(rows.size, dtype=np.int64)
        for p in range(width):
            mantissa *= 10
            mantissa += digit_value[:, p]
        decimals = np.where(dots == 1, width - 1 - is_dot.argmax(axis=1), 0)
        scale = _POW10_INT[decimals]
        # With the dot read as a 0: m' = int part * 10^(f+1) + decimals part.
        mantissa = np.where(dots == 1, mantissa // (scale * 10) * scale + mantissa % (scale * 10), mantissa)
        number = mantissa / _POW10[decimals]
        values[rows] = np.where(negative, -number, number)
        plain[rows] = ok
    for i in np.flatnonzero(~plain).tolist():
        try:
            values[i] = float(data[starts[i] : ends[i]])
        except ValueError:
            return None
    return values


def _join_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> str:
    """The byte ranges ``[starts[i], ends[i])`` (in order, each followed by a separator byte, with bytes
    between one separator and the next range) as one string, joined by single spaces."""
    lo = int(starts[0])
    span = buf[lo : int(ends[-1]) + 1]
    kept = ends - starts + 1  # each range's separator is kept, and becomes the joining space
    runs = np.empty(2 * starts.size, dtype=np.int64)
    runs[0::2] = starts - np.concatenate([[lo], ends[:-1] + 1])
    runs[1::2] = kept
    out = span[np.repeat(np.tile([False, True], starts.size), runs)]
    out[np.cumsum(kept) - 1] = ord(" ")
    return out[:-1].tobytes().decode("utf-8")


def _regular_section(lines: list[str], i: int, k: int, order: int, expected: int):
    """``(words, log10 p, log10 bow)`` of the ``expected`` lines from ``lines[i]`` on (``words``: k per
    entry, flat), parsed in bulk if they are exactly the section's entries written as ``p<TAB>w1 .. wk``
    or ``p<TAB>w1 .. wk<TAB>bow``; else ``None`` (the caller then reads the section line by line, which
    also finds and names a bad line). Bulk: a few calls over the whole block, no Python object per line
    beyond its strings."""
    block = lines[i : i + expected]
    if len(block) < expected or expected == 0:
        return None
    if i + expected < len(lines):
        after = lines[i + expected].strip()
        if after and not after.startswith("\\"):
            return None
    text = "\t".join(block)
    if "\r" in text or "  " in text or " \t" in text or "\t " in text or block[-1].endswith(" "):
        return None
    tabs = np.fromiter(map(str.count, block, itertools.repeat("\t")), dtype=np.int64, count=expected)
    with_bow = tabs == 2
    if not ((tabs == 1) | (with_bow & (k < order))).all():
        return None
    fields = text.split("\t")
    first = np.concatenate([[0], np.cumsum(tabs + 1)[:-1]])
    try:
        logp = np.array(_pick(fields, first), dtype=np.float64)
        bow = np.full(expected, np.nan)
        if with_bow.any():
            bow[with_bow] = np.array(_pick(fields, first[with_bow] + 2), dtype=np.float64)
    except ValueError:
        return None
    if np.isnan(logp).any() or (logp > 0).any() or np.isnan(bow[with_bow]).any():
        return None
    words = " ".join(_pick(fields, first + 1)).split(" ")
    if len(words) != k * expected or "" in words:
        return None
    return words, logp, bow


def _pick(items: list, positions: np.ndarray) -> list:
    """``[items[j] for j in positions]``, in C."""
    if positions.size == 1:
        return [items[int(positions[0])]]
    return list(operator.itemgetter(*positions.tolist())(items)) if positions.size else []


def _word_ids(path: Path, unigrams: list[str], vocab, bos_id: int | None):
    """``(word -> id, words, vocab_size, boundary id or None)`` for a file whose 1-grams are ``unigrams``."""
    standard = BOS in unigrams or EOS in unigrams
    if vocab is not None:
        tokens = (
            vocab.convert_ids_to_tokens(list(range(len(vocab))))
            if hasattr(vocab, "convert_ids_to_tokens")
            else list(vocab)
        )
        word_id = {w: j for j, w in enumerate(tokens)}
        boundary = None
        if standard and not (BOS in word_id and EOS in word_id):
            boundary = _boundary_id(vocab, word_id, bos_id)
            if boundary is None:
                raise ValueError(
                    f"{path}: the file writes sentence boundaries as <s> / </s>; the vocabulary has no "
                    "<eos> to read them as: pass bos_id="
                )
            word_id.setdefault(BOS, boundary)
            word_id.setdefault(EOS, boundary)
        listed = set(unigrams)
        missing = [w for j, w in enumerate(tokens) if j != boundary and w not in listed]
        if missing:
            raise ValueError(
                f"{path}: {len(missing)} word(s) of the vocabulary given are not in the file's \\1-grams: "
                f"section (e.g. {missing[:5]}): the file was not made with this vocabulary"
            )
        return word_id, list(tokens), len(tokens), boundary
    plain = [w for w in unigrams if w not in (BOS, EOS)]
    if plain and all(w.isdigit() for w in plain):
        word_id = {w: int(w) for w in plain}
        boundary = None
        if standard:
            boundary = bos_id
            if boundary is None:
                skipped = sorted(set(range(len(word_id) + 1)) - set(word_id.values()))
                if len(skipped) != 1:
                    raise ValueError(f"{path}: cannot tell which id <s> / </s> stand for: pass bos_id=")
                boundary = skipped[0]
            word_id[BOS] = word_id[EOS] = boundary
        vocab_size = max(word_id.values()) + 1  # the boundary id included
        return word_id, [str(j) for j in range(vocab_size)], vocab_size, boundary
    word_id: dict[str, int] = {}
    words: list[str] = []
    for w in unigrams:
        if w in word_id:
            continue
        if w in (BOS, EOS) and (BOS in word_id or EOS in word_id):
            word_id[w] = word_id[BOS if w == EOS else EOS]
            continue
        word_id[w] = len(words)
        words.append(EOS if w == BOS else w)
    boundary = word_id.get(EOS, word_id.get(BOS)) if standard else None
    return word_id, words, len(words), boundary


def _merge_duplicates(path, k, ids, logp, bow, start, flat, where):
    """Refuse repeated n-grams, except an ``<s>`` / ``</s>`` pair (``start``: the rows ending in ``<s>``)."""
    if len(ids) == 0:
        return ids, logp, bow
    inverse, num = row_ranks(ids, int(ids.max()) + 1)
    counts = np.bincount(inverse, minlength=num)
    lone_start = start & (counts[inverse] == 1) if start is not None else None
    if counts.max() == 1:
        if start is not None:
            logp = np.where(lone_start, np.nan, logp)  # a lone <s> n-gram is a context, never predicted
        return ids, logp, bow
    order = np.argsort(inverse, kind="stable")
    ranked = inverse[order]
    first = order[np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])]  # first row of every rank
    rows = np.arange(len(ids))
    repeated = counts[inverse] > 1
    if start is not None:
        # A pair of one <s> row and one </s> row is allowed; every other repeat is an error.
        pair = repeated & (counts[inverse] == 2)
        starts_in_group = np.bincount(inverse, weights=start, minlength=num)
        pair &= starts_in_group[inverse] == 1
        bad = np.flatnonzero(repeated & ~pair & (rows != first[inverse]))
    else:
        pair = np.zeros(len(ids), dtype=bool)
        bad = np.flatnonzero(repeated & (rows != first[inverse]))
    if bad.size:
        r = bad[0]
        raise _error(
            path,
            where[r],
            f"duplicate {k}-gram {' '.join(flat[r * k : r * k + k])!r} (first on line {where[first[inverse[r]]]})",
        )
    if start is None:
        return ids, logp, bow
    # The </s> row of a pair keeps its probability and takes the <s> row's backoff weight (if any).
    start_bow = np.full(num, np.nan)
    sel = pair & start
    start_bow[inverse[sel]] = bow[sel]
    target = pair & ~start
    bow = bow.copy()
    own = bow[target]
    bow[target] = np.where(np.isnan(start_bow[inverse[target]]), own, start_bow[inverse[target]])
    logp = np.where(lone_start, np.nan, logp)  # a lone <s> n-gram is a context, never predicted
    keep = ~(pair & start)
    return ids[keep], logp[keep], bow[keep]
