"""Extra per-token fields computed from each token's original text (a numeral's value, its digits, ...).

They belong to tokenisation: only there is the text of every token still at hand (an id cannot give it back).
The LM batching of :mod:`hf_nlm.data` carries them beside ``input_ids``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy.typing as npt


@dataclass(frozen=True)
class TokenFeatures:
    """Extra per-token fields computed from the original text of each token.

    An id cannot give them back (``<unk>`` loses the text, a subword loses the word), so they are
    computed during tokenisation from the character span of every token: ``compute(text, spans)``
    gets one line and the ``(start, end)`` offsets of its tokens (a fast tokenizer's
    ``offset_mapping``) and returns ``{name: array of shape (len(spans), ...)}``, one row per token,
    in the dtype the batches should carry (e.g. ``np.float32``). ``fill`` names every field and gives
    the value of the positions without text: each ``<eos>``, the leading boundary token and padding.

    Any object with the same ``__call__(text, spans)`` and ``fill`` works; a tokenizer offers its own
    as a ``token_features`` attribute, which :func:`tokenize_stream` uses when given none.
    """

    compute: Callable[[str, list[tuple[int, int]]], Mapping[str, npt.ArrayLike]]
    fill: Mapping[str, float | int]

    def __call__(self, text: str, spans: list[tuple[int, int]]) -> Mapping[str, npt.ArrayLike]:
        return self.compute(text, spans)


__all__ = ["TokenFeatures"]
