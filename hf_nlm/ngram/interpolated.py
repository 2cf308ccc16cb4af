"""Deleted interpolation (Jelinek-Mercer smoothing): the "interpolated trigram" of Bengio et al. (2003).

Jelinek & Mercer, "Interpolated estimation of Markov source parameters from sparse data" (1980);
Chen & Goodman, TR-10-98, sec. 2.3. For an order-n model (n = 3: the trigram) the next-word
distribution is a mixture of maximum-likelihood estimates of every order and the uniform distribution:

    p(w | h) = l_n p_ML(w | h_{n-1}) + ... + l_2 p_ML(w | h_1) + l_1 p_ML(w) + l_0 / |V|,
    p_ML(w | h_j) = c(h_j w) / c(h_j),

h_j being the last j words of the context. The weights l are fitted by EM on held-out data
(:meth:`InterpolatedLM.fit_weights`, "deleted" data: not the counts' own), and as Jelinek & Mercer do
they are tied within buckets of contexts: a context is put in a bucket by the length a of its longest
context seen in training (p_ML is undefined for an unseen one, so that bucket only mixes the
components 0 .. a+1, which keeps every distribution normalised) and by the count c(h_a) of that
context in powers of two (a frequent context earns a larger weight on its own estimate).
``num_count_bins=1`` gives one global weight vector per a.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..tokenization.fingerprint import tokenizer_fingerprint
from .base import NgramLM, level_arrays
from .counts import as_id_array, context_ids, count_ngrams, expand_ranges, lookup

# The least weight EM may leave a bucket's component. Held-out data that never needed the uniform
# component would otherwise drive it to 0, and a test word seen by no other component (one the
# training split lacks) would get probability 0.
WEIGHT_FLOOR = 1e-6


class InterpolatedLM(NgramLM):
    """Jelinek-Mercer interpolated n-gram LM (default: trigram) with EM-fitted, bucketed weights.

    Args:
        order: n >= 1.
        vocab_size: |V|.
        bos_id: the id that pads the context before the first token (``<eos>`` = 1 in hf_nlm).
        num_count_bins: weight buckets per context length, by log2 of the context's training count.

    Before :meth:`fit_weights` every bucket weighs its available components equally.
    """

    def __init__(self, order: int, vocab_size: int, bos_id: int = 1, num_count_bins: int = 8) -> None:
        super().__init__(order, vocab_size, bos_id)
        if num_count_bins < 1:
            raise ValueError(f"num_count_bins must be >= 1, got {num_count_bins}")
        self.num_count_bins = int(num_count_bins)
        self.num_tokens = 0
        self.unigram_counts: np.ndarray | None = None
        self.ctx_keys: list[np.ndarray] = []
        self.ctx_counts: list[np.ndarray] = []
        self.gram_keys: list[np.ndarray] = []
        self.gram_counts: list[np.ndarray] = []
        # Bucket b = a * num_count_bins + bin uses components 0 .. a + 1 (uniform, unigram, ...).
        num_buckets = self.order * self.num_count_bins
        a = np.arange(num_buckets) // self.num_count_bins
        self.available = np.arange(self.order + 1)[None, :] <= (a + 1)[:, None]
        self.weights = self.available / self.available.sum(1, keepdims=True)

    @property
    def is_fitted(self) -> bool:
        return self.unigram_counts is not None

    @classmethod
    def from_ids(
        cls,
        ids: npt.ArrayLike,
        order: int,
        vocab_size: int,
        bos_id: int = 1,
        valid_ids: npt.ArrayLike | None = None,
        **kwargs,
    ) -> InterpolatedLM:
        """Build and fit counts on ``ids``; fit the weights on ``valid_ids`` if given."""
        lm = cls(order, vocab_size, bos_id, **kwargs).fit(ids)
        return lm.fit_weights(valid_ids) if valid_ids is not None else lm

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        tokenizer,
        order: int = 3,
        valid_texts: Sequence[str] | None = None,
        **kwargs,
    ) -> InterpolatedLM:
        """Tokenize ``texts`` (and ``valid_texts``) into streams as ``hf_nlm.data.lm`` does, then fit."""
        from ..data.lm import tokenize_corpus

        ids, _ = tokenize_corpus(texts, tokenizer)
        bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        valid = tokenize_corpus(valid_texts, tokenizer)[0].numpy() if valid_texts is not None else None
        lm = cls.from_ids(ids.numpy(), order, len(tokenizer), bos, valid_ids=valid, **kwargs)
        lm.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer)
        return lm

    def fit(self, ids: npt.ArrayLike) -> InterpolatedLM:
        """Count every order of the training stream ``ids`` (padded with ``order - 1`` bos ids)."""
        ids = as_id_array(ids, self.vocab_size, "the training data").reshape(-1)
        if ids.size == 0:
            raise ValueError("cannot fit an n-gram model on empty training data")
        counts = count_ngrams(ids, self.order, self.vocab_size, self.bos_id)
        V = self.vocab_size
        self.num_tokens = counts.num_tokens
        self.unigram_counts = np.bincount(counts.gram_keys[1], weights=counts.gram_counts[1], minlength=V)
        self.ctx_keys = counts.ctx_keys
        self.gram_keys = counts.gram_keys
        self.gram_counts = counts.gram_counts
        # c(h) = how often h is the context of a target = the summed counts of its n-grams.
        self.ctx_counts = [np.array([counts.num_tokens])] + [
            np.bincount(
                counts.gram_keys[j + 1] // V,
                weights=counts.gram_counts[j + 1],
                minlength=counts.ctx_keys[j].size,
            )
            for j in range(1, self.order)
        ]
        return self

    def _components(self, contexts: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per target: the component probabilities (N, order + 1), 0 where unavailable, and the bucket."""
        V, N = self.vocab_size, targets.size
        ids = context_ids(contexts, self.ctx_keys, V)
        P = np.zeros((N, self.order + 1))
        P[:, 0] = 1.0 / V
        P[:, 1] = self.unigram_counts[targets] / self.num_tokens
        longest = np.zeros(N, dtype=np.int64)  # a: length of the longest context seen in training
        count = np.full(N, float(self.num_tokens))  # c(h_a)
        for j in range(1, contexts.shape[1] + 1):
            known = ids[:, j] >= 0
            if not known.any():
                break
            cid = np.where(known, ids[:, j], 0)
            c_h = self.ctx_counts[j][cid]
            gidx, found = lookup(self.gram_keys[j + 1], cid * V + targets)
            P[:, j + 1] = np.where(found & known, self.gram_counts[j + 1][gidx] / c_h, 0.0)
            longest = np.where(known, j, longest)
            count = np.where(known, c_h, count)
        return P, self._bucket(longest, count)

    def _bucket(self, longest: np.ndarray, count: np.ndarray) -> np.ndarray:
        bins = np.minimum(np.floor(np.log2(np.maximum(count, 1))).astype(np.int64), self.num_count_bins - 1)
        return longest * self.num_count_bins + np.where(longest > 0, bins, 0)

    def _log_prob(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        P, bucket = self._components(contexts, targets)
        return np.log(np.sum(self.weights[bucket] * P, axis=1))

    def _log_probs(self, contexts: np.ndarray) -> np.ndarray:
        V, N = self.vocab_size, contexts.shape[0]
        _, bucket = self._components(contexts, np.zeros(N, dtype=np.int64))  # the bucket depends on h only
        lam = self.weights[bucket]
        out = lam[:, :1] / V + lam[:, 1:2] * (self.unigram_counts / self.num_tokens)[None, :]
        ids = context_ids(contexts, self.ctx_keys, V)
        for j in range(1, contexts.shape[1] + 1):
            rows = np.flatnonzero(ids[:, j] >= 0)
            if rows.size == 0:
                break
            cid = ids[rows, j]
            keys = self.gram_keys[j + 1]
            which, pos = expand_ranges(np.searchsorted(keys, cid * V), np.searchsorted(keys, (cid + 1) * V))
            r = rows[which]
            out[r, keys[pos] % V] += (
                lam[r, j + 1] * self.gram_counts[j + 1][pos] / self.ctx_counts[j][cid[which]]
            )
        return np.log(out)

    def fit_weights(self, valid_ids: npt.ArrayLike, max_iter: int = 200, tol: float = 1e-7) -> InterpolatedLM:
        """Fit the bucketed weights by EM on the held-out stream ``valid_ids`` (Jelinek & Mercer 1980).

        E-step: each held-out token's posterior over the components, ``l_k P_k / sum_k' l_k' P_k'``;
        M-step: a bucket's new weights are its tokens' mean posteriors. The held-out likelihood never
        decreases; iterations stop when it improves by less than ``tol`` (relative). Buckets without
        held-out tokens keep their weights. No weight falls below ``WEIGHT_FLOOR`` (then renormalised),
        so every word keeps a non-zero probability.
        """
        if not self.is_fitted:
            raise RuntimeError("call fit(ids) on the training data before fit_weights(valid_ids)")
        ids = as_id_array(valid_ids, self.vocab_size, "the validation data").reshape(-1)
        if ids.size == 0:
            raise ValueError("cannot fit interpolation weights on empty validation data")
        n = self.order
        stream = np.concatenate([np.full(n - 1, self.bos_id, dtype=np.int64), ids])
        windows = np.lib.stride_tricks.sliding_window_view(stream, n)
        P, bucket = self._components(windows[:, :-1], windows[:, -1])
        num_buckets, K = self.weights.shape
        per_bucket = np.bincount(bucket, minlength=num_buckets)[:, None]
        lam = self.weights.copy()
        prev = -np.inf
        self.em_iterations = 0
        for _ in range(max_iter):
            mix = lam[bucket] * P
            p = mix.sum(1)
            loglik = float(np.log(p).sum())
            if loglik - prev <= tol * abs(loglik):
                break
            prev = loglik
            self.em_iterations += 1
            resp = mix / p[:, None]
            summed = np.stack(
                [np.bincount(bucket, weights=resp[:, k], minlength=num_buckets) for k in range(K)], 1
            )
            lam = np.where(per_bucket > 0, summed / np.maximum(per_bucket, 1), lam)
            lam = np.where(self.available, np.maximum(lam, WEIGHT_FLOOR), 0.0)
            lam /= lam.sum(1, keepdims=True)
        self.weights = lam
        self.valid_log_likelihood = prev
        return self

    def _config(self) -> dict:
        return {"num_count_bins": self.num_count_bins, "num_tokens": self.num_tokens}

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "unigram_counts": self.unigram_counts,
            "weights": self.weights,
            **level_arrays(
                self.order,
                {"ctx_keys": self.ctx_keys, "ctx_counts": self.ctx_counts},
                {"gram_keys": self.gram_keys, "gram_counts": self.gram_counts},
            ),
        }

    @classmethod
    def _from_saved(cls, config: dict, arrays: dict[str, np.ndarray]) -> InterpolatedLM:
        n = config["order"]
        lm = cls(n, config["vocab_size"], config["bos_id"], num_count_bins=config["num_count_bins"])
        lm.num_tokens = config["num_tokens"]
        lm.unigram_counts = arrays["unigram_counts"]
        lm.weights = arrays["weights"]
        lm.ctx_keys = [np.zeros(1, dtype=np.int64)] + [arrays[f"ctx_keys_{j}"] for j in range(1, n)]
        lm.ctx_counts = [np.array([lm.num_tokens])] + [arrays[f"ctx_counts_{j}"] for j in range(1, n)]
        empty = [np.zeros(0, dtype=np.int64)] * 2
        lm.gram_keys = empty + [arrays[f"gram_keys_{k}"] for k in range(2, n + 1)]
        lm.gram_counts = empty + [arrays[f"gram_counts_{k}"] for k in range(2, n + 1)]
        return lm
