"""The one result format of every evaluation in the package (neural, n-gram, mixture, neural cache)."""

from __future__ import annotations


def perplexity_report(total_nll: float, num_tokens: int, num_words: int,
                      num_unk: int) -> dict[str, float | int]:
    """The ``perplexity`` metric's output for summed NLL and counts, plus ``loss`` and ``num_unk``:
    the one result format of every evaluation in the package (neural, n-gram, mixture)."""
    from ..metrics import Perplexity  # evaluate is slow to import; only evaluation needs it

    scores = Perplexity().compute(nll=[total_nll], num_tokens=[num_tokens], num_words=[num_words])
    return {"loss": scores["nll_per_token"], **scores, "num_unk": num_unk}
