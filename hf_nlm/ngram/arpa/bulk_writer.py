"""ARPA lines built as bytes in numpy (:class:`BulkWriter`), and :func:`fixed_point_bytes`, the
``"%.{digits}f"`` formatting of a whole array at once."""

from __future__ import annotations

import numpy as np

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
        out[:, at - size : at] = _five_digits()[group, 5 - size :]
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
    """ARPA entry lines built as bytes in bulk: every line a fixed-width row of a uint8 array (each
    field in a slot of its own, NUL-padded), then the NULs dropped. Only for vocabularies whose words
    are short and free of NUL characters (see :meth:`for_words`)."""

    MAX_WORD_BYTES = 64  # longer words make every row that wide: the general path is faster then
    CHUNK_BYTES = 1 << 26  # rows are built this many bytes at a time

    def __init__(self, context: np.ndarray, target: np.ndarray, digits: int) -> None:
        self.context, self.target, self.digits = context, target, digits

    @classmethod
    def for_words(cls, as_context: list[str], as_target: list[str], digits: int) -> BulkWriter | None:
        encoded = [[w.encode("utf-8") for w in words] for words in (as_context, as_target)]
        width = max(len(w) for w in encoded[0] + encoded[1])
        if width > cls.MAX_WORD_BYTES or any(b"\0" in w for w in encoded[0] + encoded[1]):
            return None
        mats = [np.array(words, dtype=f"S{width}").view(np.uint8).reshape(len(words), width)
                for words in encoded]
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
                    np.take(self.context, grams[lo:hi, j], axis=0, mode="clip",
                            out=rows[:, at + 1 : at + 1 + word])
                elif last is None:
                    np.take(self.target, grams[lo:hi, j], axis=0, mode="clip",
                            out=rows[:, at + 1 : at + 1 + word])
                else:
                    rows[:, at + 1 : at + 1 + word] = last
                at += 1 + word
            rows[:, at:-1] = weight[lo:hi]
            rows[:, -1] = 10
            flat = rows.reshape(-1)
            out.append(flat[flat != 0])
        return out
