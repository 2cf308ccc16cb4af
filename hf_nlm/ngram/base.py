"""What every count-based LM here shares: the query API, stream scoring, evaluation, save / load.

Contexts are always given OLDEST FIRST: row i of ``contexts`` is ``(w_{t-n+1}, ..., w_{t-1})`` for the
target ``w_t``, the same order as the input ids of an n-gram neural model. Log-probabilities are
natural logs (nats), as the neural models' losses are.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..saved_files import read_json
from ..tokenization.fingerprint import tokenizer_fingerprint
from .arpa import write_arpa
from .counts import as_id_array, context_ids, expand_ranges, lookup

CONFIG_NAME = "ngram.json"
ARRAYS_NAME = "ngram.npz"
FORMAT_VERSION = 1
#: What to do about a damaged n-gram folder: counting again is quick (seconds for a 5-gram of Brown).
_RESAVE = "fit the model again and save it (NgramLM.save), or copy the folder again"
_CLASSES: dict[str, type[NgramLM]] = {}

PathLike = str | os.PathLike[str]


def level_arrays(
    order: int, contexts: dict[str, list[np.ndarray]], grams: dict[str, list[np.ndarray]]
) -> dict[str, np.ndarray]:
    """Per-order tables as the flat arrays :meth:`NgramLM.save` writes, level by level: ``<name>_<j>``
    for each context table (``table[j]``, j = 1 .. order - 1), then ``<name>_<j + 1>`` for each n-gram
    table (``table[j + 1]``)."""
    arrays = {}
    for j in range(1, order):
        arrays.update({f"{name}_{j}": table[j] for name, table in contexts.items()})
        arrays.update({f"{name}_{j + 1}": table[j + 1] for name, table in grams.items()})
    return arrays


class NgramLM:
    """Base class: an order-n LM over ids ``[0, vocab_size)``; subclasses supply the probabilities.

    ``tokenizer_fingerprint``: the vocabulary fingerprint (:func:`hf_nlm.tokenization.tokenizer_fingerprint`)
    of the tokenizer ``from_texts`` fitted with, saved with the model; :meth:`evaluate` refuses another
    tokenizer."""

    tokenizer_fingerprint: str | None = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        _CLASSES[cls.__name__] = cls  # so NgramLM.load can rebuild whichever class was saved

    def __init__(self, order: int, vocab_size: int, bos_id: int = 1) -> None:
        if not isinstance(order, (int, np.integer)) or order < 1:
            raise ValueError(f"order must be an integer >= 1 (1 = unigram), got {order!r}")
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        if not 0 <= bos_id < vocab_size:
            raise ValueError(f"bos_id {bos_id} is outside the vocabulary [0, {vocab_size})")
        self.order = int(order)
        self.vocab_size = int(vocab_size)
        self.bos_id = int(bos_id)

    # -- the part subclasses implement -------------------------------------------------------

    def _log_prob(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _log_probs(self, contexts: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _config(self) -> dict:
        return {}

    def _arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    @classmethod
    def _from_saved(cls, config: dict, arrays: dict[str, np.ndarray]) -> NgramLM:
        raise NotImplementedError

    @property
    def is_fitted(self) -> bool:
        raise NotImplementedError

    # -- queries -----------------------------------------------------------------------------

    def _check_contexts(self, contexts: npt.ArrayLike, name: str = "contexts") -> np.ndarray:
        if not self.is_fitted:
            raise RuntimeError(f"this {type(self).__name__} has not been fitted: call fit(ids) first")
        ctx = as_id_array(contexts, self.vocab_size, name)
        if ctx.ndim == 1 and self.order - 1 == 1:
            ctx = ctx[:, None]
        if ctx.ndim != 2 or ctx.shape[1] != self.order - 1:
            raise ValueError(
                f"{name} must have shape (N, {self.order - 1}) (order - 1 ids per row, oldest first), "
                f"got {ctx.shape}"
            )
        return ctx

    def log_prob(self, contexts: npt.ArrayLike, targets: npt.ArrayLike) -> np.ndarray:
        """Natural-log probabilities ``log p(targets[i] | contexts[i])``, vectorised.

        Args:
            contexts: (N, order - 1) ids, OLDEST FIRST (``w_{t-n+1} .. w_{t-1}``).
            targets: (N,) ids.

        Returns:
            (N,) float64.
        """
        ctx = self._check_contexts(contexts)
        tgt = as_id_array(targets, self.vocab_size, "targets").reshape(-1)
        if tgt.size != ctx.shape[0]:
            raise ValueError(f"got {ctx.shape[0]} contexts but {tgt.size} targets")
        return self._log_prob(ctx, tgt)

    def log_probs(self, contexts: npt.ArrayLike) -> np.ndarray:
        """Full next-token distributions: (N, vocab_size) natural-log probabilities, each row sums to 1.

        Args:
            contexts: (N, order - 1) ids, OLDEST FIRST. Memory is N * vocab_size floats: batch large N.
        """
        return self._log_probs(self._check_contexts(contexts))

    def stream_log_probs(
        self, ids: npt.ArrayLike, batch_size: int = 1 << 20, per_sentence: bool = False
    ) -> np.ndarray:
        """log p(w_t | w_{t-n+1} .. w_{t-1}) of every token of a stream, in order (see :meth:`score_stream`).

        ``per_sentence=True``: KenLM's / SRILM's convention instead of the running stream: a token's
        context stops at the last boundary token (``bos_id``) before it, read as ``<s>``, so every
        sentence is scored on its own, from ``<s>`` to its end predicted as ``</s>``.
        """
        if not self.is_fitted:
            raise RuntimeError(f"this {type(self).__name__} has not been fitted: call fit(ids) first")
        ids = as_id_array(ids, self.vocab_size, "the scored stream").reshape(-1)
        n = self.order
        stream = np.concatenate([np.full(n - 1, self.bos_id, dtype=np.int64), ids])
        windows = np.lib.stride_tricks.sliding_window_view(stream, n)  # row t = (w_{t-n+1} .. w_t)
        if not per_sentence or n <= 2:  # a bigram's context is one word: the same in both conventions
            return np.concatenate(
                [
                    self._log_prob(w[:, :-1], w[:, -1])
                    for w in np.array_split(windows, max(1, -(-ids.size // batch_size)))
                ]
            )
        # Context length of token t: the words since the boundary before it, that boundary included.
        positions = np.arange(ids.size)
        boundary = np.maximum.accumulate(np.where(ids == self.bos_id, positions, -1))
        previous = np.concatenate([[-1], boundary[:-1]])
        length = np.minimum(positions - previous, n - 1)
        out = np.empty(ids.size)
        for m in range(1, n):
            rows = np.flatnonzero(length == m)
            for part in np.array_split(rows, max(1, -(-rows.size // batch_size))):
                w = windows[part]
                out[part] = self._log_prob(w[:, n - 1 - m : n - 1], w[:, -1])
        return out

    def score_stream(
        self, ids: npt.ArrayLike, batch_size: int = 1 << 20, per_sentence: bool = False
    ) -> tuple[float, int]:
        """Summed NLL (nats) of every token of a stream and the number of tokens scored.

        The conventions of ``hf_nlm.evaluation.evaluate_lm``: the stream is preceded by ``order - 1``
        ``bos_id`` tokens (sentence start), and every token of ``ids`` is a target exactly once, so
        ``num_tokens == len(ids)`` and the result is comparable with a neural model's.
        ``per_sentence=True``: contexts stop at sentence boundaries (see :meth:`stream_log_probs`).
        """
        log_probs = self.stream_log_probs(ids, batch_size, per_sentence)
        return -float(log_probs.sum()), int(log_probs.size)

    def evaluate(
        self, dataset, tokenizer, text_column: str = "text", per_sentence: bool = False
    ) -> dict[str, float | int]:
        """Perplexity on one split of raw text, with the keys and conventions of ``evaluate_lm``.

        Args:
            dataset: a ``datasets.Dataset`` split with a ``text_column``, or a list of strings.
            tokenizer: the tokenizer the model's ids come from (its bos / eos must be ``bos_id``).
            per_sentence: score every sentence from ``<s>`` alone, as KenLM's ``query`` and SRILM's
                ``ngram -ppl`` do, instead of the running stream (see :meth:`stream_log_probs`).

        Returns:
            ``perplexity``, ``word_perplexity``, ``nll_per_token``, ``bits_per_token``, ``total_nll``,
            ``num_tokens``, ``num_words``, ``nll_per_word``, plus ``loss`` and ``num_unk``.
        """
        from ..data.batching import split_texts
        from ..data.lm import tokenize_corpus
        from ..evaluation import perplexity_report

        texts = split_texts(dataset, text_column)
        ids, num_words = tokenize_corpus(texts, tokenizer)
        ids = ids.numpy()
        total, count = self.score_stream(self._model_ids(ids, tokenizer), per_sentence=per_sentence)
        unk = tokenizer.unk_token_id
        return perplexity_report(total, count, num_words, int((ids == unk).sum()) if unk is not None else 0)

    def check_tokenizer(self, tokenizer) -> None:
        """Raise ``ValueError`` if ``tokenizer`` is not the one the model was fitted with: another vocabulary
        fingerprint (``from_texts`` records it), or more tokens than the model's ``vocab_size``."""
        size = len(tokenizer)
        if self.tokenizer_fingerprint is not None:
            found = tokenizer_fingerprint(tokenizer)
            if found != self.tokenizer_fingerprint:
                raise ValueError(
                    f"the tokenizer ({size} tokens, fingerprint {found[:12]}) is not the one this "
                    f"{type(self).__name__} was fitted with ({self.vocab_size} tokens, fingerprint "
                    f"{self.tokenizer_fingerprint[:12]})"
                )
        elif size > self.vocab_size:
            raise ValueError(
                f"the tokenizer has {size} tokens but this {type(self).__name__} knows {self.vocab_size} "
                "ids: it was fitted with another tokenizer"
            )

    def _model_ids(self, ids: np.ndarray, tokenizer) -> np.ndarray:
        """The tokenizer's ids as this model's ids (the same ids here; checked to be the fitted tokenizer's
        and to share the boundary)."""
        self.check_tokenizer(tokenizer)
        bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if bos != self.bos_id:
            raise ValueError(
                f"the tokenizer's bos/eos id is {bos} but this model pads contexts with {self.bos_id}"
            )
        return ids

    # -- save / load -------------------------------------------------------------------------

    def save(self, path: PathLike) -> None:
        """Write the model to the folder ``path``: ``ngram.json`` (metadata) and ``ngram.npz`` (arrays, no
        pickle)."""
        if not self.is_fitted:
            raise RuntimeError(f"this {type(self).__name__} has not been fitted: nothing to save")
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        config = {
            "class": type(self).__name__,
            "format_version": FORMAT_VERSION,
            "order": self.order,
            "vocab_size": self.vocab_size,
            "bos_id": self.bos_id,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            **self._config(),
        }
        (folder / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        np.savez(folder / ARRAYS_NAME, **self._arrays())

    @classmethod
    def load(cls, path: PathLike) -> NgramLM:
        """Read a model written by :meth:`save` (any n-gram class; ``KneserNeyLM.load`` checks the class).

        A missing file is a ``FileNotFoundError``; a damaged one a ``ValueError`` naming it: ``ngram.json``
        truncated, not a JSON object or holding NaN (:func:`hf_nlm.saved_files.read_json`), ``ngram.npz``
        truncated or not an ``.npz`` archive, a table or setting missing, or a table holding NaN or +inf
        (every stored log-probability is at most 0; -inf is a probability of 0)."""
        folder = Path(path)
        config_file, arrays_file = folder / CONFIG_NAME, folder / ARRAYS_NAME
        if not config_file.is_file():
            raise FileNotFoundError(f"{config_file} does not exist: not a folder written by NgramLM.save")
        config = read_json(config_file, restore=_RESAVE)
        name = config.get("class")
        if name not in _CLASSES:
            raise ValueError(f"{config_file}: unknown n-gram model class {name!r}")
        if config.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"{config_file}: format_version {config.get('format_version')} is not {FORMAT_VERSION}"
            )
        target = _CLASSES[name]
        if not issubclass(target, cls):
            raise TypeError(f"{folder} holds a {name}, not a {cls.__name__}")
        if not arrays_file.is_file():
            raise FileNotFoundError(f"{arrays_file} does not exist: NgramLM.save writes it beside "
                                    f"{CONFIG_NAME}, which holds the settings only; {_RESAVE}")
        try:
            with np.load(arrays_file, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            raise ValueError(f"{arrays_file} is not a readable .npz archive ({err}): the file is truncated "
                             f"or corrupted; {_RESAVE}") from None
        for key, values in arrays.items():
            if values.dtype.kind == "f" and (np.isnan(values).any() or np.isposinf(values).any()):
                raise ValueError(f"{arrays_file}: table {key} holds NaN or +inf, which no count or "
                                 f"log-probability is: the file is damaged; {_RESAVE}")
        try:
            lm = target._from_saved(config, arrays)
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise ValueError(f"{config_file} and {arrays_file} do not describe a {name} (a setting or "
                             f"table is missing or wrong: {type(err).__name__}: {err}); {_RESAVE}") from None
        lm.tokenizer_fingerprint = config.get("tokenizer_fingerprint")
        return lm


class BackoffLM(NgramLM):
    """A backoff n-gram LM in the ARPA form: stored n-gram probabilities and context backoff weights.

    ``p(w | h) = P(h, w)`` if the n-gram ``(h, w)`` is stored, else ``bow(h) * p(w | h')`` with ``h'``
    the context without its oldest word (``bow = 1`` for a context that is not stored). Every
    unigram probability is stored (``unigram_logp``, dense over the vocabulary). Interpolated
    Kneser-Ney is exactly of this form (Chen & Goodman 1998, end of sec. 3), so KN models and models
    read from ARPA files share this class's queries.

    Tables (natural logs), for j = 1 .. order - 1 (index 0 unused):
        ``ctx_keys[j]``, ``ctx_logbow[j]``: stored length-j contexts and their log backoff weights.
        ``gram_keys[j + 1]``, ``gram_logp[j + 1]``: stored (j+1)-grams and their log probabilities.
    """

    def __init__(self, order: int, vocab_size: int, bos_id: int = 1) -> None:
        super().__init__(order, vocab_size, bos_id)
        self.unigram_logp: np.ndarray | None = None
        self.ctx_keys: list[np.ndarray] = []
        self.ctx_logbow: list[np.ndarray] = []
        self.gram_keys: list[np.ndarray] = []
        self.gram_logp: list[np.ndarray] = []

    @property
    def is_fitted(self) -> bool:
        return self.unigram_logp is not None

    def _set_tables(self, unigram_logp, ctx_keys, ctx_logbow, gram_keys, gram_logp) -> None:
        empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        self.unigram_logp = np.asarray(unigram_logp, dtype=np.float64)
        self.ctx_keys = [np.zeros(1, dtype=np.int64), *[np.asarray(a, dtype=np.int64) for a in ctx_keys[1:]]]
        self.ctx_logbow = [np.zeros(1), *[np.asarray(a, dtype=np.float64) for a in ctx_logbow[1:]]]
        self.gram_keys = [empty_i, empty_i, *[np.asarray(a, dtype=np.int64) for a in gram_keys[2:]]]
        self.gram_logp = [empty_f, empty_f, *[np.asarray(a, dtype=np.float64) for a in gram_logp[2:]]]

    def _log_prob(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Backoff query with the last ``m = contexts.shape[1]`` words (m <= order - 1): levels 1 .. m+1."""
        V = self.vocab_size
        ids = context_ids(contexts, self.ctx_keys, V)
        logp = self.unigram_logp[targets]
        for j in range(1, contexts.shape[1] + 1):
            known = ids[:, j] >= 0
            if not known.any():
                break
            cid = np.where(known, ids[:, j], 0)
            gidx, found = lookup(self.gram_keys[j + 1], cid * V + targets)
            found &= known
            # Seen n-gram: its stored probability; seen context only: back off with the context's weight.
            backoff = logp + np.where(known, self.ctx_logbow[j][cid], 0.0)
            logp = np.where(found, self.gram_logp[j + 1][gidx], backoff)
        return logp

    def _log_probs(self, contexts: np.ndarray) -> np.ndarray:
        V = self.vocab_size
        ids = context_ids(contexts, self.ctx_keys, V)
        out = np.tile(self.unigram_logp, (contexts.shape[0], 1))
        for j in range(1, contexts.shape[1] + 1):
            rows = np.flatnonzero(ids[:, j] >= 0)
            if rows.size == 0:
                break
            cid = ids[rows, j]
            out[rows] += self.ctx_logbow[j][cid][:, None]
            # The stored n-grams of context c are the contiguous key range [c * V, (c + 1) * V).
            keys = self.gram_keys[j + 1]
            which, pos = expand_ranges(np.searchsorted(keys, cid * V), np.searchsorted(keys, (cid + 1) * V))
            out[rows[which], keys[pos] % V] = self.gram_logp[j + 1][pos]
        return out

    def to_arpa(self, path: PathLike, vocab=None, digits: int = 10) -> None:
        """Write the model as an ARPA file (see :func:`hf_nlm.ngram.arpa.writer.write_arpa`)."""
        write_arpa(self, path, vocab=vocab, digits=digits)

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "unigram_logp": self.unigram_logp,
            **level_arrays(
                self.order,
                {"ctx_keys": self.ctx_keys, "ctx_logbow": self.ctx_logbow},
                {"gram_keys": self.gram_keys, "gram_logp": self.gram_logp},
            ),
        }

    def _load_tables(self, arrays: dict[str, np.ndarray]) -> None:
        n = self.order
        pad = [np.zeros(0)]
        self._set_tables(
            arrays["unigram_logp"],
            pad + [arrays[f"ctx_keys_{j}"] for j in range(1, n)],
            pad + [arrays[f"ctx_logbow_{j}"] for j in range(1, n)],
            pad * 2 + [arrays[f"gram_keys_{k}"] for k in range(2, n + 1)],
            pad * 2 + [arrays[f"gram_logp_{k}"] for k in range(2, n + 1)],
        )
