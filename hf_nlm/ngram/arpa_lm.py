"""A back-off LM read from an ARPA file (the format: :mod:`hf_nlm.ngram.arpa`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .arpa import _LN10, PathLike, _read_arpa, write_arpa
from .base import BackoffLM
from .counts import context_ids, unique_rows


def _unique_rows(rows: Sequence[np.ndarray], width: int, vocab_size: int) -> np.ndarray:
    stacked = np.concatenate([np.asarray(r, dtype=np.int64).reshape(-1, width) for r in rows])
    return unique_rows(stacked, vocab_size)


class ArpaLM(BackoffLM):
    """A back-off LM read from an ARPA file, with the query API of every hf_nlm n-gram model.

    Build it with :meth:`from_arpa`. Ids follow ``vocab`` (a tokenizer) if given, else the file (see
    :func:`read_arpa`); ``words`` holds the word string of every id. :meth:`evaluate` maps a
    tokenizer's words to the file's by word (the boundary token to ``<s>`` / ``</s>``) and refuses a
    tokenizer whose vocabulary differs from the file's.
    """

    words: list[str] | None = None

    @classmethod
    def from_arpa(cls, path: PathLike, vocab=None, bos_id: int | None = None) -> ArpaLM:
        """Read ``path``, mapping its words to ``vocab``'s ids by word if given (see :func:`read_arpa`).

        ``bos_id`` (the id padding the first context, which ``<s>`` and ``</s>`` are read as) defaults
        to the tokenizer's bos / eos id, else the id of ``<s>`` / ``</s>`` or ``<eos>`` in the file,
        else 1 for a file of numeric ids."""
        words, V, sections, boundary = _read_arpa(path, vocab, bos_id)
        if bos_id is None:
            if vocab is not None and hasattr(vocab, "eos_token_id"):
                bos_id = vocab.bos_token_id if vocab.bos_token_id is not None else vocab.eos_token_id
            elif boundary is not None:
                bos_id = boundary
            elif words and not all(w.isdigit() for w in words):
                found = [w for w in ("<eos>", "<s>") if w in words]
                if not found:
                    raise ValueError(
                        f"{path}: no <s>, </s> or <eos> word to pad the first context with; pass bos_id="
                    )
                bos_id = words.index(found[0])
            else:
                bos_id = 1
        lm = cls(len(sections), V, bos_id)
        lm.words = words if words and not all(w.isdigit() for w in words) else None
        lm._build(sections)
        return lm

    def _build(self, sections) -> None:
        n, V = self.order, self.vocab_size
        grams = [None] + [ids for ids, _, _ in sections]
        logp = [None] + [lp * _LN10 for _, lp, _ in sections]
        bows = [None] + [b * _LN10 for _, _, b in sections]
        unigram = np.full(V, -np.inf)
        given = ~np.isnan(logp[1])  # <s> alone has no probability: it is never predicted
        unigram[grams[1][given, 0]] = logp[1][given]
        # The contexts a query must be able to reach: those of listed n-grams, those with a backoff
        # weight, and (a trie cannot skip a node) every suffix of those.
        contexts: list[np.ndarray] = [np.zeros((1, 0), dtype=np.int64)] + [None] * (n - 1)
        for j in range(n - 1, 0, -1):
            parts = [grams[j + 1][:, :-1], grams[j][~np.isnan(bows[j])]]
            if j + 1 < n:
                parts.append(contexts[j + 1][:, 1:])
            contexts[j] = _unique_rows(parts, j, V)
        ctx_keys, ctx_logbow = [np.zeros(1, dtype=np.int64)], [np.zeros(1)]
        for j in range(1, n):
            parent = context_ids(contexts[j][:, 1:], ctx_keys, V)[:, j - 1]
            keys = np.unique(parent * V + contexts[j][:, 0])
            ctx_keys.append(keys)
            has_bow = ~np.isnan(bows[j])
            bow_parent = context_ids(grams[j][has_bow][:, 1:], ctx_keys, V)[:, j - 1]
            logbow = np.zeros(keys.size)
            logbow[np.searchsorted(keys, bow_parent * V + grams[j][has_bow][:, 0])] = bows[j][has_bow]
            ctx_logbow.append(logbow)
        gram_keys, gram_logp = [None, None], [None, None]
        for k in range(2, n + 1):
            given = ~np.isnan(logp[k])  # an n-gram ending in <s> alone is a context, not a prediction
            cid = context_ids(grams[k][given, :-1], ctx_keys, V)[:, k - 1]
            keys = cid * V + grams[k][given, -1]
            order = np.argsort(keys)
            gram_keys.append(keys[order])
            gram_logp.append(logp[k][given][order])
        self._set_tables(unigram, ctx_keys, ctx_logbow, gram_keys, gram_logp)

    def _model_ids(self, ids: np.ndarray, tokenizer) -> np.ndarray:
        """The tokenizer's ids mapped BY WORD to the file's ids; the boundary token to ``bos_id``.

        Refuses a tokenizer whose words are not exactly the file's (scores would be meaningless)."""
        if self.words is None:
            return super()._model_ids(ids, tokenizer)
        tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        index = {w: j for j, w in enumerate(self.words) if j != self.bos_id}
        missing = [w for j, w in enumerate(tokens) if j != bos and w not in index]
        known = {w for j, w in enumerate(tokens) if j != bos}
        extra = [w for w in index if w not in known]
        if missing or extra:
            raise ValueError(
                "the tokenizer's vocabulary does not match the ARPA file's: "
                f"{len(missing)} tokenizer word(s) not in the file (e.g. {missing[:5]}), "
                f"{len(extra)} file word(s) not in the tokenizer (e.g. {extra[:5]})"
            )
        mapping = np.array(
            [self.bos_id if j == bos else index[w] for j, w in enumerate(tokens)], dtype=np.int64
        )
        return mapping[ids]

    def to_arpa(self, path: PathLike, vocab=None, digits: int = 10) -> None:
        """Write the model back to ARPA (with the file's own words unless ``vocab`` is given)."""
        write_arpa(self, path, vocab=vocab if vocab is not None else self.words, digits=digits)

    def _config(self) -> dict:
        return {"words": self.words}

    @classmethod
    def _from_saved(cls, config: dict, arrays: dict[str, np.ndarray]) -> ArpaLM:
        lm = cls(config["order"], config["vocab_size"], config["bos_id"])
        lm.words = config.get("words")
        lm._load_tables(arrays)
        return lm
