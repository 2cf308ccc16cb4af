"""Interpolated modified Kneser-Ney smoothing.

Chen & Goodman, "An Empirical Study of Smoothing Techniques for Language Modeling", TR-10-98
(Harvard, 1998), sec. 3.5: interpolated Kneser-Ney with three discounts per order. For a context h
of length k-1 and a word w, with h' the context without its oldest word:

    p_k(w | h) = max(c(h w) - D_k(c(h w)), 0) / sum_v c(h v)  +  gamma_k(h) * p_{k-1}(w | h')
    gamma_k(h) = (D_k1 N1(h .) + D_k2 N2(h .) + D_k3+ N3+(h .)) / sum_v c(h v)

where N_r(h .) is the number of words that follow h exactly r times (r >= 3 for N3+). The count c is
the raw count at the highest order n and the continuation count N1+(. h w) (the number of distinct
words seen before h w) at every lower order: a word that appears after many different contexts is a
likely guess for an unseen context, one that appears often but always after the same word is not.
The recursion ends at the uniform distribution, p_0(w) = 1 / |V|, so every word (``<unk>`` and words
never seen in training included) gets a nonzero probability.

Discounts, one triple per order from that order's count-of-counts n_r (number of k-grams with count,
resp. continuation count, exactly r), the paper's estimates:

    Y = n1 / (n1 + 2 n2),  D1 = 1 - 2 Y n2 / n1,  D2 = 2 - 3 Y n3 / n2,  D3+ = 3 - 4 Y n4 / n3.

On tiny corpora a count-of-count can be 0, which leaves a formula undefined or outside (0, r];
that discount then falls back to KenLM's ``--discount_fallback`` values (0.5, 1, 1.5).

Sentence boundaries, two conventions. Default: the training data is one running stream (sentences
ending in ``<eos>``, which also starts the next one's context), as the neural models see it.
``per_sentence=True``: KenLM ``lmplz``'s estimation, every sentence counted alone between ``<s>`` and
``</s>`` (no n-gram spans a sentence end) and the lower-order n-grams that start with ``<s>`` keep raw
counts c instead of N1+ (nothing precedes ``<s>``); with per-sentence scoring it gives ``lmplz`` +
``query``'s perplexity (PTB KN5 test: 141.186206 here, 141.186207 there).

The result is a backoff model in the ARPA sense: a stored n-gram has probability p_k(w | h), an
unstored one gamma_k(h) p_{k-1}(w | h'), so the model is kept as :class:`~hf_nlm.ngram.base.BackoffLM`
tables and exports to ARPA exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..tokenization.fingerprint import tokenizer_fingerprint
from .base import BackoffLM
from .counts import NgramCounts, as_id_array, count_ngrams, text_ids

#: KenLM's --discount_fallback: used where the count-of-counts leave the estimates undefined.
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


def modified_kn_discounts(count_of_counts: Sequence[int]) -> tuple[float, float, float]:
    """(D1, D2, D3+) from the count-of-counts (n1, n2, n3, n4): Chen & Goodman (1998), sec. 3.5.

    A discount whose formula divides by zero or lands outside (0, r] is replaced by the matching
    :data:`FALLBACK_DISCOUNTS` value (it would otherwise make the model deficient or negative).
    """
    n1, n2, n3, n4 = (float(x) for x in count_of_counts)
    y = n1 / (n1 + 2 * n2) if n1 + 2 * n2 > 0 else None
    out = []
    for r, (n_r, n_next) in enumerate([(n1, n2), (n2, n3), (n3, n4)], start=1):
        d = r - (r + 1) * y * n_next / n_r if y is not None and n_r > 0 else None
        out.append(d if d is not None and 0 < d <= r else FALLBACK_DISCOUNTS[r - 1])
    return out[0], out[1], out[2]


def _discount_of(counts: np.ndarray, d: Sequence[float]) -> np.ndarray:
    """D(c) for every count: D1 for c = 1, D2 for c = 2, D3+ for c >= 3."""
    return np.asarray(d, dtype=np.float64)[np.minimum(counts, 3) - 1]


class KneserNeyLM(BackoffLM):
    """Interpolated modified Kneser-Ney n-gram LM (Chen & Goodman 1998, sec. 3.5) over token ids.

    Args:
        order: n >= 1 (3 = trigram).
        vocab_size: |V|; ids are ``[0, vocab_size)`` and every one gets probability > 0.
        bos_id: the id that pads the context before the first token (``<eos>`` = 1 in hf_nlm).
        discounts: optional ``order`` triples (D1, D2, D3+), for orders 1 .. n; default: Chen & Goodman's
            estimates from the count-of-counts of each order.
        per_sentence: estimate as KenLM's ``lmplz`` does: every sentence of the training stream (each
            ending in ``bos_id``) is counted alone, padded ``<s> ... </s>`` (``bos_id`` is both), so no
            n-gram spans a sentence end, and the lower-order n-grams that start with ``<s>`` keep their
            raw counts (nothing precedes ``<s>``) instead of continuation counts. Score such a model
            with ``per_sentence=True`` (``evaluate``, ``score_stream``), KenLM's ``query`` convention;
            :meth:`to_arpa` then writes what ``lmplz`` writes, up to ``lmplz``'s float32 rounding.
            Default (``False``): the running stream, our convention (contexts reach across sentence
            ends; every n-gram, ``<eos>``-initial ones included, gets continuation counts).

    Example::

        lm = KneserNeyLM.from_ids(train_ids, order=5, vocab_size=len(tokenizer))
        lm.evaluate(dataset["test"], tokenizer)["perplexity"]
    """

    def __init__(
        self,
        order: int,
        vocab_size: int,
        bos_id: int = 1,
        discounts: Sequence[Sequence[float]] | None = None,
        per_sentence: bool = False,
    ) -> None:
        super().__init__(order, vocab_size, bos_id)
        self.per_sentence = bool(per_sentence)
        if discounts is not None:
            discounts = [tuple(float(x) for x in d) for d in discounts]
            if len(discounts) != self.order or any(len(d) != 3 for d in discounts):
                raise ValueError(
                    f"discounts must be {self.order} triples (D1, D2, D3+), one per order, got {discounts}"
                )
            for k, d in enumerate(discounts, start=1):
                if not all(0 <= x <= r for r, x in enumerate(d, start=1)):
                    raise ValueError(
                        f"discounts of order {k} must satisfy 0 <= D1 <= 1, 0 <= D2 <= 2, 0 <= D3+ <= 3, "
                        f"got {d}"
                    )
        self.fixed_discounts = discounts
        self.discounts: list[tuple[float, float, float]] = []  # per order 1..n, filled by fit
        self.count_of_counts: list[list[int]] = []  # (n1, n2, n3, n4) per order 1..n

    @classmethod
    def from_ids(
        cls, ids: npt.ArrayLike, order: int, vocab_size: int, bos_id: int = 1, **kwargs
    ) -> KneserNeyLM:
        """Build and fit on the training stream ``ids`` (each line's ids followed by ``<eos>``)."""
        return cls(order, vocab_size, bos_id, **kwargs).fit(ids)

    @classmethod
    def from_texts(cls, texts: Sequence[str], tokenizer, order: int, **kwargs) -> KneserNeyLM:
        """Tokenize ``texts`` into one stream (``hf_nlm.data.lm.tokenize_corpus``) and fit on it."""
        ids = text_ids(texts, tokenizer)
        bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        lm = cls(order, len(tokenizer), bos, **kwargs).fit(ids)
        lm.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer)
        return lm

    def fit(self, ids: npt.ArrayLike) -> KneserNeyLM:
        """Count the stream ``ids`` (padded in front with ``order - 1`` bos ids; per sentence if the model
        was made with ``per_sentence=True``) and compute the tables."""
        ids = as_id_array(ids, self.vocab_size, "the training data").reshape(-1)
        if ids.size == 0:
            raise ValueError("cannot fit an n-gram model on empty training data")
        counts = count_ngrams(ids, self.order, self.vocab_size, self.bos_id, per_sentence=self.per_sentence)
        self._fit_counts(counts)
        return self

    def _fit_counts(self, counts: NgramCounts) -> None:
        n, V = self.order, self.vocab_size
        # Raw counts at the highest order, continuation counts N1+(. g) below it.
        level_counts = [None] + [counts.continuation_counts(k) for k in range(1, n)] + [counts.gram_counts[n]]
        self.count_of_counts = [
            [int(np.sum(level_counts[k] == r)) for r in (1, 2, 3, 4)] for k in range(1, n + 1)
        ]
        if self.fixed_discounts is not None:
            self.discounts = list(self.fixed_discounts)
        else:
            self.discounts = [modified_kn_discounts(coc) for coc in self.count_of_counts]

        # Order 1: the empty context, interpolated with the uniform distribution 1/|V|.
        c = level_counts[1]
        d = _discount_of(c, self.discounts[0])
        total = c.sum()
        gamma0 = d.sum() / total
        p1 = np.full(V, gamma0 / V)
        p1[counts.gram_keys[1]] += (c - d) / total
        ctx_logbow, gram_logp = [None], [None, None]
        lower = p1
        for k in range(2, n + 1):
            keys, c = counts.gram_keys[k], level_counts[k]
            ctx = keys // V  # id of each k-gram's (k-1)-word context
            d = _discount_of(c, self.discounts[k - 1])
            num_ctx = counts.ctx_keys[k - 1].size
            total = np.bincount(ctx, weights=c, minlength=num_ctx)  # > 0: every context has a k-gram
            gamma = np.bincount(ctx, weights=d, minlength=num_ctx) / total
            lower_p = lower[keys % V] if k == 2 else lower[counts.gram_suffix(k)]
            p = (c - d) / total[ctx] + gamma[ctx] * lower_p
            with np.errstate(divide="ignore"):  # gamma = 0 only with user discounts of 0
                ctx_logbow.append(np.log(gamma))
            gram_logp.append(np.log(p))
            lower = p
        self._set_tables(np.log(p1), counts.ctx_keys, ctx_logbow, counts.gram_keys, gram_logp)

    def _config(self) -> dict:
        return {
            "discounts": [list(d) for d in self.discounts],
            "fixed_discounts": self.fixed_discounts is not None,
            "count_of_counts": self.count_of_counts,
            "per_sentence": self.per_sentence,
        }

    @classmethod
    def _from_saved(cls, config: dict, arrays: dict[str, np.ndarray]) -> KneserNeyLM:
        fixed = config["discounts"] if config.get("fixed_discounts") else None
        lm = cls(
            config["order"],
            config["vocab_size"],
            config["bos_id"],
            discounts=fixed,
            per_sentence=config.get("per_sentence", False),
        )
        lm.discounts = [tuple(d) for d in config["discounts"]]
        lm.count_of_counts = config["count_of_counts"]
        lm._load_tables(arrays)
        return lm
