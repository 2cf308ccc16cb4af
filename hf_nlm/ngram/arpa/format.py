"""What the ARPA writer and readers share: the sentence markers, the header line, the log base, errors."""

from __future__ import annotations

import math
import os
import re

import numpy as np

PathLike = str | os.PathLike[str]
LN10 = math.log(10.0)
NGRAM_LINE = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)")
BOS, EOS = "<s>", "</s>"  # the standard sentence markers: both stand for our boundary token


def line_error(path, line: int, message: str) -> ValueError:
    """An error naming the file and the line."""
    return ValueError(f"{path}, line {line}: {message}")


def row_hashes(ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every row of an (M, k) id array (a polynomial, wrapping around 2^64): equal rows
    have equal hashes; the callers compare rows with equal hashes exactly."""
    key = ids[:, 0].astype(np.uint64)
    for j in range(1, ids.shape[1]):
        key *= np.uint64(0x9E3779B97F4A7C15)
        key += ids[:, j].astype(np.uint64)
    return key
