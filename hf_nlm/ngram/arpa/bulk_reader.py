"""The ARPA bulk reader: a regular file parsed a block of lines at a time into arrays, or ``None`` (the line
reader then reads it).

The parser: numpy finds the layout (the tabs, spaces and newlines of a block, checked against the one
layout a regular entry can have) and makes the block an Arrow string array of its fields without copying
it; Apache Arrow's C++ kernels (``pyarrow``, which the ``datasets`` library already brings) then parse the
numbers (``cast`` to float64: the correctly rounded value, as ``float`` gives) and number the words
(``index_in``: a hash table of the 1-grams' words). No Python object per line and no copy of the whole
file: a block of :data:`BLOCK_BYTES` is read, parsed into int32 word numbers and float64 values, and
dropped. (Arrow, not a compiled extension of our own: it already does the two per-field jobs, parsing
numbers and hashing strings, in C++.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .format import NGRAM_LINE, line_error

BLOCK_BYTES = 1 << 22  # read and parsed at a time (a block grows to hold a longer line)
# Arrow's memory is the C library's, as numpy's is: freed at once, not kept in a pool of Arrow's own.
_POOL = pa.system_memory_pool()
# Characters str.split() splits on besides " ", "\t" and "\n": the bulk reader leaves files with any of
# them to the line reader (which splits lines with str.split()). The ASCII ones are found as separators.
_ODD_SPACE = re.compile("[\r\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")


class BulkSection:
    """The entries of one section: ``words`` (M, k) int32, each word's position in the reader's word
    list (``BulkFile.words``), oldest first; log10 p (M,); log10 bow (M,), NaN where there is none;
    ``first_line``, the line number of the first entry (the entries are consecutive lines)."""

    def __init__(self, words: np.ndarray, logp: np.ndarray, bow: np.ndarray, first_line: int) -> None:
        self.words, self.logp, self.bow, self.first_line = words, logp, bow, first_line

    @property
    def lines(self) -> range:
        return range(self.first_line, self.first_line + len(self.logp))


class BulkFile:
    """A regular ARPA file parsed by :func:`read_bulk`: ``sections[k - 1]`` for k = 1 .. order, their
    words named by ``words`` (the file's words, each once, in the order of the vocabulary ``word_id``
    that the 1-grams were mapped with), and ``mapped``, what that mapping returned."""

    def __init__(self, sections: list[BulkSection], words: list[str], mapped) -> None:
        self.sections, self.words, self.mapped = sections, words, mapped


class _Lines:
    """The file read forward: whole lines (for the header), or blocks of whole lines (for entries)."""

    def __init__(self, f) -> None:
        self.f, self.line = f, 0  # line: how many lines have been read

    def next_line(self) -> str | None:
        """The next non-blank line, stripped (``None``: the end of the file); ``UnicodeDecodeError`` if
        it is not UTF-8."""
        for raw in iter(self.f.readline, b""):
            self.line += 1
            s = raw.decode("utf-8").strip()
            if s:
                return s
        return None

    def block(self, most: int) -> tuple[bytearray, int] | None:
        """Up to ``most`` whole lines (at least one): their bytes, each ending in a newline, and how many;
        ``None`` at the end of the file."""
        start, size = self.f.tell(), BLOCK_BYTES
        while True:
            data = bytearray(self.f.read(size))
            if not data:
                return None
            at_end = len(data) < size
            ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
            if ends.size or at_end:
                break
            self.f.seek(start)  # not one whole line: read a larger block
            size *= 2
        if at_end and data[-1] != 10 and ends.size < most:
            data.append(10)  # the last line of the file, without its newline
            ends = np.append(ends, len(data) - 1)
        count = min(most, ends.size)
        end = int(ends[count - 1]) + 1
        self.f.seek(start + end)
        del data[end:]
        self.line += count
        return data, count


def read_bulk(path: Path, map_unigrams: Callable[[list[str]], tuple], source: str) -> BulkFile | None:
    """A regular file parsed in bulk, or ``None``.

    Regular: after the ``\\data\\`` header, the entries of every section are ``p<TAB>w1 .. wk`` or
    ``p<TAB>w1 .. wk<TAB>bow`` lines (single spaces between words; a backoff weight only below the
    highest order), exactly as many as the header declares, with numbers that ``float`` reads (not NaN,
    and p <= 0), in UTF-8 with no whitespace but those three characters. Anything else gives ``None``:
    the caller then reads the file line by line, which gives the same sections for every file this
    reader accepts, and names the line of whatever is wrong.

    ``map_unigrams(words)`` maps the words of the 1-grams section (in file order) and returns a tuple
    whose first item is the ``word -> id`` dict to map every word by; a word of a longer n-gram that is
    not in it is a ``ValueError`` naming the line and ``source`` (the vocabulary's description).
    """
    with open(path, "rb") as f:
        try:
            return _read(f, path, map_unigrams, source)
        except UnicodeDecodeError:
            return None


def _read(f, path: Path, map_unigrams, source: str) -> BulkFile | None:
    lines = _Lines(f)
    s = lines.next_line()
    while s is not None and s != "\\data\\":
        s = lines.next_line()
    declared: list[int] = []
    s = lines.next_line()
    while s is not None and not s.startswith("\\"):
        m = NGRAM_LINE.fullmatch(s)
        if m is None or int(m.group(1)) != len(declared) + 1:
            return None
        declared.append(int(m.group(2)))
        s = lines.next_line()
    order = len(declared)
    sections: list[BulkSection] = []
    vocab: pa.Array | None = None  # the words that map to ids (`words`), in Arrow for index_in
    words: list[str] = []
    mapped = None
    for k in range(1, order + 1):
        if s != f"\\{k}-grams:" or declared[k - 1] == 0:
            return None
        first_line, size = lines.line + 1, declared[k - 1]
        # The section's arrays at their declared size, filled a block at a time: no second copy of them.
        grams, logp, bow = np.empty((size, k), dtype=np.int32), np.empty(size), np.empty(size)
        unigrams, done = [], 0  # the 1-grams' words, numbered once all are read
        while done < size:
            line, block = lines.line + 1, lines.block(size - done)
            part = None if block is None else _parse_block(block[0], block[1], k, order)
            if part is None:
                return None
            rows = slice(done, done + block[1])
            if k > 1:
                grams[rows] = _number_words(part[0], vocab, k, path, line, source).reshape(-1, k)
            else:
                unigrams.append(part[0])
            logp[rows], bow[rows] = part[1], part[2]
            done += block[1]
        if k == 1:
            tokens = pa.chunked_array(unigrams)
            mapped = map_unigrams(tokens.to_pylist())
            words = list(mapped[0])
            vocab = pa.array(words, type=pa.string())
            grams[:, 0] = _number_words(tokens, vocab, 1, path, first_line, source)
        sections.append(BulkSection(grams, logp, bow, first_line))
        s = lines.next_line()
        if s is not None and not s.startswith("\\"):
            return None  # more entries than declared
    return BulkFile(sections, words, mapped) if order and s == "\\end\\" else None


def _number_words(tokens, vocab: pa.Array, k: int, path: Path, first_line: int, source: str) -> np.ndarray:
    """The position of every word of ``tokens`` (k per entry, the first entry on ``first_line``) in
    ``vocab``; an unknown word is a ``ValueError`` naming its line."""
    index = pc.index_in(tokens, value_set=vocab, memory_pool=_POOL)
    if index.null_count:
        row = int(np.argmax(pc.is_null(index).to_numpy(zero_copy_only=False)))
        raise line_error(path, first_line + row // k, f"word {tokens[row].as_py()!r} is not in {source}")
    index = index.to_numpy().astype(np.int32, copy=False)
    return index


def _parse_block(data: bytearray, count: int, k: int, order: int):
    """``count`` k-gram entries (``data``, each line ending in a newline): (their words, a flat string
    array, k per entry; log10 p; log10 bow, NaN where there is none), or ``None`` if one is irregular."""
    buf = np.frombuffer(data, dtype=np.uint8)
    if not buf.size:
        return None
    if (buf >= 128).any() and _ODD_SPACE.search(bytes(data).decode("utf-8")):
        return None  # (decode raises UnicodeDecodeError for bytes that are not UTF-8)
    separators = np.flatnonzero(buf <= 32)
    kind = buf[separators]
    ends = np.flatnonzero(kind == 10)  # the separator that ends each line
    fields = np.diff(ends, prepend=-1)  # separators per line = fields per line
    with_bow = fields == k + 2
    if ends.size != count or not ((fields == k + 1) | (with_bow & (k < order))).all():
        return None
    # The one layout of a regular line: p TAB w1 SPACE .. SPACE wk [TAB bow] NEWLINE, no field empty.
    first = ends - fields + 1
    want = np.full(separators.size, 32, dtype=np.uint8)
    want[first] = 9
    want[ends[with_bow] - 1] = 9
    want[ends] = 10
    if not np.array_equal(kind, want) or (np.diff(separators, prepend=-1) < 2).any():
        return None
    # The block as Arrow strings without a copy: its fields and, between them, its separators (field
    # i is string 2i: it ends at separator i).
    offsets = np.empty(2 * separators.size + 1, dtype=np.int32 if buf.size < 2**31 else np.int64)
    offsets[0] = 0
    offsets[1::2] = separators
    offsets[2::2] = separators + 1
    string = pa.string() if offsets.dtype == np.int32 else pa.large_string()
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    pieces = pa.Array.from_buffers(string, offsets.size - 1, buffers)

    def tokens(i):  # field i
        return pc.take(pieces, i, memory_pool=_POOL)

    first *= 2
    logp = _numbers(tokens(first))
    bow = np.full(count, np.nan)
    values = _numbers(tokens(2 * ends[with_bow])) if with_bow.any() else bow[:0]
    if logp is None or values is None or np.isnan(logp).any() or (logp > 0).any() or np.isnan(values).any():
        return None
    bow[with_bow] = values
    return tokens((first[:, None] + np.arange(2, 2 * k + 1, 2)).reshape(-1)), logp, bow


def _numbers(fields: pa.Array) -> np.ndarray | None:
    """``float(field)`` of every field; ``None`` if one is not a number. Arrow's parser gives the same
    correctly rounded values; the few spellings it refuses that ``float`` reads (``1_0``) go through
    ``float``."""
    try:
        return pc.cast(fields, pa.float64(), memory_pool=_POOL).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:
        try:
            return np.array([float(x) for x in fields.to_pylist()], dtype=np.float64)
        except ValueError:
            return None
