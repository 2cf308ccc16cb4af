"""A back-off LM read from an ARPA file (the format: :mod:`hf_nlm.ngram.arpa`)."""

from __future__ import annotations

import ctypes
import sys

import numpy as np

from .arpa import write_arpa
from .arpa.format import LN10, PathLike, row_hashes
from .arpa.reader import read_arpa_with_boundary
from .base import BackoffLM
from .counts import row_ranks


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
        words, V, sections, boundary = read_arpa_with_boundary(path, vocab, bos_id)
        _return_freed_memory()  # the parse's freed blocks: the tables' large arrays would not reuse them
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
        _return_freed_memory()
        return lm

    def _build(self, sections: list) -> None:
        """The query tables of the parsed ``sections`` (emptied as they are used: the tables take their
        place in memory)."""
        n, V = self.order, self.vocab_size
        grams: list = [None] + [ids for ids, _, _ in sections]
        logp: list = [None] + [np.multiply(lp, LN10, out=lp) for _, lp, _ in sections]
        bows: list = [None] + [np.multiply(b, LN10, out=b) for _, _, b in sections]
        sections.clear()
        has_bow = [None] + [~np.isnan(b) for b in bows[1:]]
        unigram = np.full(V, -np.inf)
        given = ~np.isnan(logp[1])  # <s> alone has no probability: it is never predicted
        unigram[grams[1][given, 0]] = logp[1][given]
        # Top down, the contexts a query must be able to reach: those of listed n-grams, those with a
        # backoff weight, and (a trie cannot skip a node) every suffix of those; numbering them also tells
        # where each (j+1)-gram's context (prefix), each backoff j-gram and each longer context's suffix is.
        # Of every level's n-grams and contexts only one word is needed further down: the rest is dropped.
        contexts: list = [np.zeros((1, 0), dtype=grams[1].dtype)] + [None] * (n - 1)
        prefix_at, bow_at, suffix_at = [None] * (n + 1), [None] * n, [None] * n
        for j in range(n - 1, 0, -1):
            asked = [grams[j + 1][:, :-1]] + ([contexts[j + 1][:, 1:]] if j + 1 < n else [])
            asked = np.concatenate(asked) if len(asked) > 1 else asked[0].copy()
            size = len(grams[j + 1])
            grams[j + 1] = grams[j + 1][:, -1].copy()
            if j + 1 < n:
                contexts[j + 1] = contexts[j + 1][:, 0].copy()
            contexts[j], bow_at[j], at = _number_contexts(grams[j][has_bow[j]], asked, V)
            prefix_at[j + 1] = at[:size]
            if j + 1 < n:
                suffix_at[j + 1] = at[size:]
            del asked, at
        grams[1] = None
        if n > 1:
            contexts[1] = contexts[1][:, 0].copy()
        # Bottom up, the trie id of every context (module docstring of counts.py): the rank of
        # id(its suffix) * V + its oldest word among its level's keys.
        ctx_keys, ctx_logbow = [np.zeros(1, dtype=np.int64)], [np.zeros(1)]
        trie_id = [np.zeros(1, dtype=np.int64)]
        for j in range(1, n):
            parent = trie_id[j - 1][suffix_at[j]] if j > 1 else np.zeros(len(contexts[j]), dtype=np.int64)
            keys = parent * V + contexts[j]
            contexts[j] = suffix_at[j] = parent = None
            order = _order(keys)  # the keys are distinct: the contexts are
            ctx_keys.append(keys[order])
            del keys
            trie_id.append(np.empty(order.size, dtype=np.int64))
            trie_id[j][order] = np.arange(order.size)
            del order
            logbow = np.zeros(trie_id[j].size)
            logbow[trie_id[j][bow_at[j]]] = bows[j][has_bow[j]]
            bows[j] = bow_at[j] = None
            ctx_logbow.append(logbow)
        gram_keys, gram_logp = [None, None], [None, None]
        for k in range(2, n + 1):
            given = ~np.isnan(logp[k])  # an n-gram ending in <s> alone is a context, not a prediction
            keys = trie_id[k - 1][prefix_at[k][given]] * V + grams[k][given]
            trie_id[k - 1] = prefix_at[k] = grams[k] = None
            order = _order(keys)
            gram_keys.append(keys[order])
            del keys
            gram_logp.append(logp[k][given][order])
            logp[k] = None
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


def _number_contexts(known: np.ndarray, asked: np.ndarray, vocab_size: int):
    """Dense ids of the distinct rows of ``known`` (the contexts with a backoff weight, distinct: the
    reader refuses repeats) and ``asked`` (the contexts the longer levels need). Returns the rows of every
    id, the id of each known row and the id of each asked row.

    The contexts of a file in the usual form (KenLM's, ours) all have backoff weights: the asked rows are
    found among the known ones by a sorted table of hashes, compared exactly; the few others, and every
    row where two known rows share a hash, are numbered by a lexicographic ranking."""
    at = _find_rows(known, asked)
    if at is None:
        stacked = np.concatenate([known, asked])
        rank, count = row_ranks(stacked, vocab_size)
        rows = np.empty((count, known.shape[1]), dtype=stacked.dtype)
        rows[rank] = stacked
        return rows, rank[: len(known)], rank[len(known) :]
    missing = np.flatnonzero(at < 0)
    if not missing.size:
        return known, np.arange(len(known)), at
    rank, count = row_ranks(asked[missing], vocab_size)
    extra = np.empty((count, known.shape[1]), dtype=known.dtype)
    extra[rank] = asked[missing]
    at[missing] = len(known) + rank
    return np.concatenate([known, extra]), np.arange(len(known)), at


def _find_rows(rows: np.ndarray, queries: np.ndarray) -> np.ndarray | None:
    """The index in ``rows`` of every row of ``queries`` (-1: not there), by the rows' and the queries'
    hashes, both sorted (a binary search of sorted queries stays in cache), each candidate then compared
    exactly; ``None`` if two of ``rows`` share a hash."""
    if len(rows) == 0:
        return np.full(len(queries), -1, dtype=np.int64)
    hashes = row_hashes(rows)
    order = np.argsort(hashes)
    hashes = hashes[order]
    if (hashes[1:] == hashes[:-1]).any():
        return None
    wanted = row_hashes(queries)
    asked = np.argsort(wanted)
    wanted = wanted[asked]
    at = np.minimum(np.searchsorted(hashes, wanted), len(rows) - 1)
    found = hashes[at] == wanted
    del hashes, wanted
    candidate = np.empty(len(queries), dtype=np.int64)
    candidate[asked] = order[at]
    found[asked] = found.copy()
    del order, at, asked
    # Compared a slice at a time: the candidates' rows, gathered, would be as large as the queries.
    for start in range(0, len(queries), _COMPARE_ROWS):
        part = slice(start, start + _COMPARE_ROWS)
        found[part] &= (rows[candidate[part]] == queries[part]).all(axis=1)
    return np.where(found, candidate, -1)


_COMPARE_ROWS = 1 << 16


def _order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort`` of distinct non-negative int64 keys: one ``np.sort`` of the keys with their positions in
    the low bits where they fit (SIMD-accelerated, unlike ``argsort``)."""
    shift = max(1, (keys.size - 1).bit_length())
    if keys.size == 0 or int(keys.max()) >= 1 << (62 - shift):
        return np.argsort(keys)
    packed = keys << shift
    packed |= np.arange(keys.size)
    packed.sort()
    packed &= (1 << shift) - 1
    return packed


def _return_freed_memory() -> None:
    """Hand the memory the parse and the table build freed back to the system (glibc's ``malloc_trim``).

    glibc keeps freed heap pages for the process's next allocations; after a load's temporaries (several
    times the tables' size) the process would go on holding them. Elsewhere (another C library, another
    system) nothing is done."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass
