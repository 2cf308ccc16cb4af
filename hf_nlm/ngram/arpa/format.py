"""What the ARPA writer and readers share: the sentence markers, the header line, the log base, errors."""

from __future__ import annotations

import math
import os
import re

PathLike = str | os.PathLike[str]
LN10 = math.log(10.0)
NGRAM_LINE = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)")
BOS, EOS = "<s>", "</s>"  # the standard sentence markers: both stand for our boundary token


def line_error(path, line: int, message: str) -> ValueError:
    """An error naming the file and the line."""
    return ValueError(f"{path}, line {line}: {message}")
