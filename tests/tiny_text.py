"""The small generated text the matrix and the lm-evaluation-harness tests train their tiny runs on."""

from __future__ import annotations

import random

#: A small vocabulary; "the city paid" is the prompt the tests continue.
WORDS = [f"w{i}" for i in range(24)] + ["the", "a", "of", "city", "paid"]


def lm_lines(num: int, seed: int) -> list[str]:
    """``num`` lines of seven words of :data:`WORDS` and one numeral each (the numeracy LM's heads need
    numerals), ending with a full stop, drawn with ``seed``."""
    rng = random.Random(seed)
    lines = []
    for _ in range(num):
        words = rng.choices(WORDS, k=7)
        words.insert(rng.randrange(8), rng.choice([str(rng.randint(1, 3000)), f"{rng.random() * 100:.1f}"]))
        lines.append(" ".join(words) + " .")
    return lines
