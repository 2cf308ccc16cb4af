"""The ARPA bulk reader: a regular file parsed in numpy over its bytes, or ``None`` (the line reader then
reads it)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from .format import NGRAM_LINE

# Characters str.split() splits on besides " ", "\t" and "\n": the bulk reader leaves files with any of
# them to the line reader (which splits lines with str.split()).
_ODD_SPACE_BYTES = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")
_ODD_SPACE = re.compile("[\r\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_DATA_LINE = re.compile(rb"^[ \t]*\\data\\[ \t]*$", re.MULTILINE)
_POW10 = 10.0 ** np.arange(16)  # exact doubles
_POW10_INT = 10 ** np.arange(16, dtype=np.int64)


def read_bulk(data: bytes, text: str) -> list[tuple[list[str], np.ndarray, np.ndarray, Sequence[int]]] | None:
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
        m = NGRAM_LINE.fullmatch(s)
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
    """The ``count`` entries of the k-grams section starting at byte ``pos`` (see :func:`read_bulk`), and
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
        words = BulkWords(
            octets,
            buf,
            np.concatenate([word_start[:, None], space + 1], axis=1).reshape(-1),
            np.concatenate([space, word_end[:, None]], axis=1).reshape(-1),
        )
    return (words, logp, bow, range(first + 1, first + 1 + count)), after


_LOW_BYTES = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_HASH = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64)


class BulkWords:
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
            v_bytes = np.frombuffer(b"".join(b.ljust(16, b"\0") for b, _ in short),
                                    dtype="<u8").reshape(-1, 2)
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
                ok &= ((v_bytes[at, 0] == low[rows]) & (v_bytes[at, 1] == high[rows])
                       & (v_len[at] == lengths[rows]))
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
        ok = ((tally >> 5 == 0) & (dots <= 1) & (width - dots - negative >= 1)
              & (width - dots - negative <= 15))
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
