"""The ARPA line reader: any file the format allows, line by line; what is wrong is named by its line."""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .format import NGRAM_LINE, line_error


def read_lines(path: Path, text: str) -> list[tuple[list[str], np.ndarray, np.ndarray, Sequence[int]]]:
    """The sections of the file, read line by line (see :func:`.bulk_reader.read_bulk` for what it
    returns)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline does not start a line of its own
    num_lines = len(lines)
    i = 0
    while i < num_lines and lines[i].strip() != "\\data\\":  # text before \data\ is allowed (comments)
        i += 1
    if i == num_lines:
        raise line_error(
            path, max(num_lines, 1), "reached the end of the file without finding the \\data\\ header"
        )
    i += 1
    declared: list[tuple[int, int]] = []  # (count, line of its 'ngram k=count')
    while i < num_lines:
        s = lines[i].strip()
        if s.startswith("\\"):
            break
        if s:
            m = NGRAM_LINE.fullmatch(s)
            if not m:
                raise line_error(
                    path, i + 1, f"expected 'ngram <order>=<count>' in the \\data\\ header, got {s!r}"
                )
            if int(m.group(1)) != len(declared) + 1:
                raise line_error(
                    path, i + 1, f"expected 'ngram {len(declared) + 1}=...' (orders in sequence), got {s!r}"
                )
            declared.append((int(m.group(2)), i + 1))
        i += 1
    if not declared:
        raise line_error(
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
            raise line_error(path, num_lines,
                             f"reached the end of the file, expected the \\{k}-grams: section")
        if lines[i].strip() != f"\\{k}-grams:":
            raise line_error(path, i + 1, f"expected the \\{k}-grams: section, got '{lines[i].strip()}'")
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
                raise line_error(
                    path,
                    i,
                    f"a {k}-gram entry needs {want} fields (log10 prob, {k} words"
                    f"{', log10 backoff' if k < order else ''}), got {len(fields)}: {lines[i - 1].strip()!r}",
                )
            if len(grams) == expected:
                raise line_error(
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
            raise line_error(
                path,
                min(i + 1, num_lines),
                f"the \\{k}-grams: section ends after {len(grams)} entries, "
                f"but the \\data\\ header (line {header_line}) declares {expected}",
            )
        raw.append((list(itertools.chain.from_iterable(grams)), logp, bow, where))
    while i < num_lines and not lines[i].strip():
        i += 1
    if i == num_lines:
        raise line_error(path, num_lines, "reached the end of the file without the closing \\end\\")
    if lines[i].strip() != "\\end\\":
        raise line_error(
            path, i + 1, f"expected \\end\\ after the \\{order}-grams: section, got '{lines[i].strip()}'"
        )
    return raw


def _parse_float(path, line: int, text: str, what: str, at_most_zero: bool) -> float:
    try:
        x = float(text)
    except ValueError:
        raise line_error(path, line, f"{what} {text!r} is not a number") from None
    # A log10 probability is <= 0; a backoff weight may exceed 1 (Katz back-off writes such weights).
    if math.isnan(x) or (at_most_zero and x > 0):
        raise line_error(path, line,
                         f"{what} {text!r} must be a log10 value{' <= 0' if at_most_zero else ''}")
    return x


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
