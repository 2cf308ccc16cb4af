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

Our conventions, kept as they are rather than translated to ``<s>`` / ``</s>``: word strings are the
tokenizer's tokens (or the ids as decimal strings when no vocabulary is given), and the sentence
boundary is the ordinary token ``<eos>``, which both ends a sentence (as a target) and stands for
"a sentence starts here" (as context; the stream is padded with it). So the file gives exactly our
model's probabilities, but a tool that adds ``<s>`` itself (KenLM's ``query``) must be fed text that
already holds our ``<eos>`` tokens to reproduce them.

Exactness: every unigram is written (the uniform floor of Kneser-Ney included), and every context that
has a backoff weight is written as an n-gram of its own, with the probability the model gives it (for a
context that never ended a target, that probability is the backed-off one). Reading the file back
(:class:`~hf_nlm.ngram.arpa_lm.ArpaLM`) therefore gives the model's probability for every context and
word, seen or not, up to the ``digits`` decimals printed of each log10 value.

This module is the file format only (it knows no model class): the models write themselves through
:func:`write_arpa` (``BackoffLM.to_arpa``), and ``ArpaLM`` is built from :func:`read_arpa`.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np

from .counts import context_ids, context_words

PathLike = str | os.PathLike[str]
_LN10 = math.log(10.0)
_NGRAM_LINE = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)")


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
    """Write a back-off LM (e.g. :class:`~hf_nlm.ngram.KneserNeyLM`) as an ARPA file.

    Args:
        lm: a fitted :class:`~hf_nlm.ngram.base.BackoffLM`.
        path: the file to write.
        vocab: a tokenizer, or a list of ``vocab_size`` word strings; default: the ids as strings.
        digits: decimals printed of every log10 probability / backoff weight.
    """
    if not lm.is_fitted:
        raise RuntimeError(f"this {type(lm).__name__} has not been fitted: nothing to export")
    n, V = lm.order, lm.vocab_size
    words = np.array(_vocab_words(vocab, V), dtype=object)
    ctx_words = context_words(lm.ctx_keys, V)
    sections = []
    for k in range(1, n + 1):
        if k == 1:
            grams = np.arange(V)[:, None]
        else:
            keys = lm.gram_keys[k]
            listed = np.concatenate([ctx_words[k - 1][keys // V], (keys % V)[:, None]], axis=1)
            # A context with a backoff weight must be an entry, even if it never ended a target.
            extra = ctx_words[k] if k < n else np.zeros((0, k), dtype=np.int64)
            grams = np.unique(np.concatenate([listed, extra]), axis=0)
        # The model's own level-k probability, from the last k-1 words: stored or backed off.
        logp = lm._log_prob(grams[:, :-1], grams[:, -1]) / _LN10
        if k < n:
            ids = context_ids(grams, lm.ctx_keys, V)[:, k]
            bow = np.where(ids >= 0, lm.ctx_logbow[k][np.maximum(ids, 0)] / _LN10, np.nan)
        else:
            bow = np.full(len(grams), np.nan)
        sections.append((grams, logp, bow))

    fmt = f"%.{digits}f"
    with open(path, "w", encoding="utf-8") as f:
        f.write("\\data\\\n")
        for k, (grams, _, _) in enumerate(sections, start=1):
            f.write(f"ngram {k}={len(grams)}\n")
        for k, (grams, logp, bow) in enumerate(sections, start=1):
            f.write(f"\n\\{k}-grams:\n")
            text = [" ".join(row) for row in words[grams]]
            lp = [fmt % x for x in logp]
            lines = [
                f"{p}\t{t}\n" if math.isnan(b) else f"{p}\t{t}\t{fmt % b}\n"
                for p, t, b in zip(lp, text, bow.tolist(), strict=True)
            ]
            f.writelines(lines)
        f.write("\n\\end\\\n")


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


def read_arpa(
    path: PathLike, vocab=None
) -> tuple[list[str], int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Parse an ARPA file. Returns ``(words, vocab_size, sections)``.

    ``sections[k - 1] = (ids (M, k) int64 oldest first, log10 p (M,), log10 bow (M,), NaN where absent)``.
    Words are mapped to ids by ``vocab`` (a tokenizer or a list of strings) if given; else, if every
    unigram is a decimal number, by that number (files written without a vocabulary); else by their
    position in the ``\\1-grams:`` section.

    Raises:
        ValueError: a malformed file; the message names the file and the line.
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8").split("\n")
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

    word_id: dict[str, int] | None = None
    if vocab is not None:
        tokens = (
            vocab.convert_ids_to_tokens(list(range(len(vocab))))
            if hasattr(vocab, "convert_ids_to_tokens")
            else list(vocab)
        )
        word_id = {w: j for j, w in enumerate(tokens)}
    words: list[str] = []
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
        if k == 1 and word_id is None:
            words = [g[0] for g in grams]
            if all(w.isdigit() for w in words):
                word_id = {w: int(w) for w in words}
            else:
                word_id = {w: j for j, w in enumerate(words)}
        raw.append((grams, logp, bow, where))
    while i < num_lines and not lines[i].strip():
        i += 1
    if i == num_lines:
        raise _error(path, num_lines, "reached the end of the file without the closing \\end\\")
    if lines[i].strip() != "\\end\\":
        raise _error(
            path, i + 1, f"expected \\end\\ after the \\{order}-grams: section, got '{lines[i].strip()}'"
        )

    if vocab is not None:
        vocab_size = len(word_id)
        words = list(word_id)
    else:
        vocab_size = max(word_id.values()) + 1
    sections = []
    for k, (grams, logp, bow, where) in enumerate(raw, start=1):
        flat = [w for g in grams for w in g]
        unknown = next((j for j, w in enumerate(flat) if w not in word_id), None)
        if unknown is not None:
            source = "the vocabulary given" if vocab is not None else "the \\1-grams: section"
            raise _error(path, where[unknown // k], f"word {flat[unknown]!r} is not in {source}")
        ids = np.fromiter(map(word_id.__getitem__, flat), dtype=np.int64, count=len(flat)).reshape(-1, k)
        _, first, inverse = np.unique(ids, axis=0, return_index=True, return_inverse=True)
        dup = np.flatnonzero(first[inverse.reshape(-1)] != np.arange(len(ids)))
        if dup.size:
            r = dup[0]
            raise _error(
                path,
                where[r],
                f"duplicate {k}-gram {' '.join(grams[r])!r} (first on line {where[first[inverse.reshape(-1)[r]]]})",
            )
        sections.append((ids, np.array(logp), np.array(bow)))
    return words, vocab_size, sections
