"""ARPA lines built in bulk (:class:`BulkWriter`), and :func:`fixed_point_bytes`, the
``"%.{digits}f"`` formatting of a whole array at once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .format import BOS


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
        out[:, at - size : at] = np.take(_five_digits(), group, axis=0)[:, 5 - size :]
        at -= size
    return out


_FIVE_DIGITS: list[np.ndarray] = []


def _five_digits() -> np.ndarray:
    """(100000, 5) uint8: the digits of 0 .. 99999, zero-padded (``"00000"`` .. ``"99999"``)."""
    if not _FIVE_DIGITS:
        numbers = np.arange(100000)
        _FIVE_DIGITS.append(np.stack([(numbers // 10**p) % 10 for p in (4, 3, 2, 1, 0)],
                                     axis=1).astype(np.uint8) + 48)
    return _FIVE_DIGITS[0]


class BulkWriter:
    """ARPA entry lines built in bulk, a column at a time: the numbers as NUL-padded byte rows
    (:func:`fixed_point_bytes`) made into strings by dropping the NULs, the words gathered from the
    vocabulary's strings by id (``pyarrow.compute.take``), then every line joined from its columns
    (``binary_join_element_wise``) into one buffer. Arrow's string kernels are C++ loops over offsets
    and bytes: no Python object per line."""

    def __init__(self, as_context: list[str], as_target: list[str], digits: int) -> None:
        # A context word is followed by a space, the target word by the line's next field.
        self.context = pa.array([w + " " for w in as_context], type=pa.large_string())
        self.target = pa.array(as_target, type=pa.large_string())
        self.digits = digits

    CHUNK_ROWS = 1 << 20  # lines are built this many at a time

    def section(self, grams, logp, bow, start_rows, start_bow) -> list | None:
        """The lines of one section (buffers, to be written one after the other): every n-gram
        (``grams`` (N, k) ids, log10 p, log10 bow or NaN), then an ``<s>`` line (-99, the backoff weight
        ``start_bow`` or NaN) for each of ``start_rows``; ``None`` if a value needs the general path."""
        blocks = []
        for lo in range(0, len(grams), self.CHUNK_ROWS):
            hi = lo + self.CHUNK_ROWS
            prob = fixed_point_bytes(logp[lo:hi], self.digits)
            weight = self._weights(bow[lo:hi])
            if prob is None or weight is None:
                return None
            prob = _strings(np.concatenate([prob, np.full((len(prob), 1), 9, dtype=np.uint8)], axis=1))
            blocks.append(self._lines(grams[lo:hi], prob, self.target, weight))
        bos = pa.array([BOS], type=pa.large_string())
        for lo in range(0, len(start_rows), self.CHUNK_ROWS):
            rows = start_rows[lo : lo + self.CHUNK_ROWS]
            weight = self._weights(start_bow[lo : lo + self.CHUNK_ROWS])
            if weight is None:
                return None
            minus99 = pa.repeat(pa.scalar("-99\t", type=pa.large_string()), rows.size)
            context = np.column_stack([grams[rows, :-1], np.zeros(rows.size, dtype=np.int64)])
            blocks.append(self._lines(context, minus99, bos, weight))
        return blocks

    def _weights(self, bow: np.ndarray) -> pa.Array | None:
        """The end of every line with a backoff weight, ``"\\t" + value + "\\n"``; null (a bare newline
        when the line is joined) where ``bow`` is NaN."""
        has_bow = ~np.isnan(bow)
        rows = np.flatnonzero(has_bow)
        if rows.size == 0:
            return pa.nulls(bow.size, type=pa.large_string())
        text = fixed_point_bytes(bow[rows], self.digits)
        if text is None:
            return None
        text = _strings(np.concatenate([np.full((rows.size, 1), 9, dtype=np.uint8), text,
                                        np.full((rows.size, 1), 10, dtype=np.uint8)], axis=1))
        lengths = np.zeros(bow.size, dtype=np.int64)
        lengths[rows] = np.diff(np.frombuffer(text.buffers()[1], dtype=np.int64))
        offsets = np.zeros(bow.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        valid = pa.py_buffer(np.packbits(has_bow, bitorder="little"))
        buffers = [valid, pa.py_buffer(offsets), text.buffers()[2]]
        return pa.Array.from_buffers(pa.large_string(), bow.size, buffers, null_count=bow.size - rows.size)

    def _lines(self, grams, prob, last, weight) -> pa.Buffer:
        """The text of the lines ``prob`` + words + ``weight`` (their columns joined row by row, a null
        weight read as a newline), the last word taken from ``last``."""
        k = grams.shape[1]
        columns = [prob]
        columns += [self.context.take(grams[:, j]) for j in range(k - 1)]
        columns += [last.take(grams[:, -1]), weight]
        options = pc.JoinOptions(null_handling="replace", null_replacement="\n")
        lines = pc.binary_join_element_wise(*columns, pa.scalar("", type=pa.large_string()), options=options)
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)
        return lines.buffers()[2][int(offsets[lines.offset]) : int(offsets[lines.offset + len(lines)])]


def _strings(rows: np.ndarray) -> pa.Array:
    """The rows of a NUL-padded (N, W) uint8 array as N strings (the NULs dropped; without a copy where
    there are none, as when every number has the same sign and integer digits)."""
    if not (rows == 0).any():
        offsets = np.arange(0, rows.size + 1, max(1, rows.shape[1]), dtype=np.int64)
        return pa.LargeStringArray.from_buffers(rows.shape[0], pa.py_buffer(offsets),
                                                pa.py_buffer(np.ascontiguousarray(rows)))
    lengths = np.count_nonzero(rows, axis=1)
    offsets = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = rows[rows != 0]
    return pa.LargeStringArray.from_buffers(rows.shape[0], pa.py_buffer(offsets), pa.py_buffer(data))
