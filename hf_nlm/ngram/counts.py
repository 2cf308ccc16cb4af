"""Vectorised n-gram counting over token-id streams, with integer keys instead of tuples.

Conventions (the same as ``hf_nlm.data.lm`` and ``hf_nlm.evaluation.evaluate_lm``): a split is one
stream of ids, every token of it is a target exactly once, and the context before the first token is
made of ``bos_id`` tokens (``<eos>``, read as "a sentence starts here"). An order-n model therefore
pads the stream with ``n - 1`` bos tokens in front and counts one n-gram per target.

Keys. A context of length j before target position t is stored MOST RECENT WORD FIRST, as a path in a
trie: ``(w_{t-1})``, then ``(w_{t-1}, w_{t-2})``, ... Each length-j context gets an integer id (its
rank among the distinct length-j contexts) and the key of a length-j context is

    key_j = id_{j-1}(w_{t-1} .. w_{t-j+1}) * V + w_{t-j}

so dropping the oldest word (the backoff step of every smoothing method) is ``key // V`` and every
key fits an int64 (ids < number of tokens, so keys < tokens * V). An n-gram is stored as
``id_{n-1}(context) * V + w``. Everything is built with ``np.unique`` on int64 arrays: no Python loop
over n-grams.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt


def as_id_array(ids: npt.ArrayLike, vocab_size: int, what: str = "data") -> np.ndarray:
    """``ids`` (list, numpy array or torch tensor) as a flat int64 array, checked to lie in [0, vocab_size).

    Raises:
        ValueError: an id outside the vocabulary; the message names its position in ``what``.
    """
    if hasattr(ids, "detach"):  # a torch tensor, without importing torch here
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"token ids in {what} must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    bad = np.flatnonzero((arr < 0) | (arr >= vocab_size))
    if bad.size:
        pos = np.unravel_index(bad[0], arr.shape)
        where = pos[0] if len(pos) == 1 else tuple(int(p) for p in pos)
        raise ValueError(
            f"token id {int(arr.flat[bad[0]])} at position {where} of {what} is outside the vocabulary "
            f"[0, {vocab_size}) ({bad.size} such ids in all)"
        )
    return arr


def text_ids(texts: Sequence[str], tokenizer) -> np.ndarray:
    """``hf_nlm.data.lm.tokenize_corpus(texts, tokenizer)[0]`` as a numpy array: every line's ids, then
    ``<eos>``.

    A word-level tokenizer (``tokenizers``' ``WordLevel`` model after a ``WhitespaceSplit``, no
    normalizer or ``Lowercase``, as ``train_word_level_tokenizer`` makes) on ASCII text is applied
    here with ``str.split`` and a dictionary: the same ids, several times faster than the tokenizer's
    own call, which makes a Python list per line. Anything else goes through ``tokenize_corpus``.
    """
    if type(texts).__module__.startswith("datasets."):  # a datasets Column: one Arrow read, not one per row
        texts = texts[:]
    texts = list(texts)
    ids = _word_level_ids(texts, tokenizer) if texts else None
    if ids is None:
        from ..data.lm import tokenize_corpus

        return tokenize_corpus(texts, tokenizer)[0].numpy()
    return ids


# Besides the ASCII whitespace, str.split() splits on these (the Rust tokenizers do not).
_PY_ONLY_SPACES = re.compile("[\x1c-\x1f]")


def _word_level_ids(texts: list[str], tokenizer) -> np.ndarray | None:
    """:func:`text_ids` of a plain word-level tokenizer on ASCII text, or ``None`` (not such a case)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    eos = getattr(tokenizer, "eos_token_id", None)
    if backend is None or eos is None or not all(isinstance(t, str) for t in texts):
        return None
    try:
        spec = json.loads(backend.to_str())
    except Exception:  # noqa: BLE001 - a tokenizer that cannot describe itself: take the general path
        return None
    model, normalizer = spec.get("model") or {}, spec.get("normalizer")
    if (
        model.get("type") != "WordLevel"
        or spec.get("pre_tokenizer") != {"type": "WhitespaceSplit"}
        or normalizer not in (None, {"type": "Lowercase"})
        or spec.get("truncation") is not None
        or not isinstance(model.get("vocab"), dict)
    ):
        return None
    vocab: dict[str, int] = model["vocab"]
    unk = vocab.get(model.get("unk_token"))
    joined = "\n".join(texts)
    if unk is None or not joined.isascii() or _PY_ONLY_SPACES.search(joined):
        return None
    # One split of the whole text, the line ends marked by a word no ASCII text can hold.
    text = " \xff ".join(texts) if normalizer is None else " \xff ".join(texts).lower()
    words = text.split()
    words.append("\xff")
    # Added tokens are cut out of the raw text before the words are split: here only whole words may
    # hold them (and then they are the same word of the vocabulary).
    for added in spec.get("added_tokens") or []:
        content = added.get("content")
        if not content or not isinstance(content, str) or content not in joined:
            continue
        if (
            content.split() != [content]
            or vocab.get(content) != added.get("id")
            or (normalizer is not None and added.get("normalized"))
        ):
            return None
        if joined.count(content) != (words if normalizer is None else joined.split()).count(content):
            return None
    table = dict(vocab)
    table["\xff"] = eos
    return np.fromiter(map(table.get, words, itertools.repeat(unk)), dtype=np.int64, count=len(words))


def lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``keys`` in the sorted unique array ``sorted_keys``, and a mask of which were found.

    Positions of keys that are not found are 0 (a valid index, so callers can gather and mask).
    """
    if sorted_keys.size == 0:
        return np.zeros(keys.shape, dtype=np.int64), np.zeros(keys.shape, dtype=bool)
    idx = np.searchsorted(sorted_keys, keys)
    idx = np.minimum(idx, sorted_keys.size - 1)
    found = sorted_keys[idx] == keys
    return np.where(found, idx, 0), found


def unique_inverse(keys: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for int64 keys in ``[0, bound)``, about twice as fast.

    When ``bound`` leaves room in an int64 for the position of every key, the positions ride in the
    low bits of the keys through one ``np.sort`` (SIMD-accelerated, unlike ``argsort``); else it is
    ``np.unique``.
    """
    n = keys.size
    shift = max(1, (n - 1).bit_length())
    if n == 0 or bound > 1 << (62 - shift):
        uniq, inverse = np.unique(keys, return_inverse=True)
        return uniq, inverse.reshape(-1)
    packed = (keys << shift) | np.arange(n, dtype=np.int64)
    packed.sort()
    ordered = packed >> shift
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(n, dtype=np.int64)
    inverse[packed & ((1 << shift) - 1)] = np.cumsum(first) - 1
    return ordered[first], inverse


def row_ranks(rows: np.ndarray, vocab_size: int) -> tuple[np.ndarray, int]:
    """The dense lexicographic rank of every row of an (M, k) id array, and the number of distinct rows.

    ``np.unique(rows, axis=0, return_inverse=True)`` with int64 sorts instead of a sort of k-wide records
    (several times faster): the rank of the first j columns times V^g plus the next g columns in base V,
    re-ranked, with g as large as lets :func:`unique_inverse` sort the keys packed with their positions
    (a 4-word row over a 10k vocabulary: two such sorts, faster and smaller than one ``np.unique``).
    """
    rank, count = np.zeros(rows.shape[0], dtype=np.int64), 1
    width, j = rows.shape[1], 0
    base = max(int(vocab_size), 2)
    fast = 1 << (62 - max(1, (rows.shape[0] - 1).bit_length()))  # keys unique_inverse sorts packed
    while j < width:
        key, span = rank, count
        while j < width and (span * base < fast or span == count):  # (one column at least per round)
            key = key * base + rows[:, j]
            span *= base
            j += 1
        if span >= 1 << 62:  # count * V alone overflows (cannot happen: count <= rows, V < 2^31)
            raise OverflowError(f"cannot rank {count} rows over a vocabulary of {vocab_size}")
        uniq, rank = unique_inverse(key, span)
        count = uniq.size
    return rank, count


def unique_rows(rows: np.ndarray, vocab_size: int) -> np.ndarray:
    """``np.unique(rows, axis=0)`` for an (M, k) array of ids in [0, vocab_size), by :func:`row_ranks`."""
    rank, count = row_ranks(rows, vocab_size)
    out = np.empty((count, rows.shape[1]), dtype=np.int64)
    out[rank] = rows
    return out


def context_ids(contexts: np.ndarray, ctx_keys: list[np.ndarray], vocab_size: int) -> np.ndarray:
    """Trie ids of every suffix of each context: ``out[i, j]`` = id of the last j words of row i, or -1.

    Args:
        contexts: (N, m) ids, OLDEST FIRST (``w_{t-m} .. w_{t-1}``).
        ctx_keys: ``ctx_keys[j]`` = sorted keys of the known length-j contexts (``ctx_keys[0] = [0]``).

    Returns:
        (N, m + 1) int64; column 0 is 0 (the empty context); once a suffix is unknown, every longer
        one is unknown too (-1), since a trie path cannot skip a node.
    """
    n, m = contexts.shape
    out = np.full((n, m + 1), -1, dtype=np.int64)
    out[:, 0] = 0
    cid = np.zeros(n, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    for j in range(1, min(m, len(ctx_keys) - 1) + 1):
        idx, found = lookup(ctx_keys[j], cid * vocab_size + contexts[:, m - j])
        alive &= found
        cid = np.where(alive, idx, 0)
        out[:, j] = np.where(alive, cid, -1)
        if not alive.any():
            break
    return out


def context_words(ctx_keys: list[np.ndarray], vocab_size: int) -> list[np.ndarray]:
    """The words of every stored context, oldest first: ``out[j]`` has shape (len(ctx_keys[j]), j)."""
    out = [np.zeros((1, 0), dtype=np.int64)]
    for j in range(1, len(ctx_keys)):
        parent, oldest = np.divmod(ctx_keys[j], vocab_size)
        out.append(np.concatenate([oldest[:, None], out[j - 1][parent]], axis=1))
    return out


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges ``[lo_i, hi_i)``: (row index i, position) for every position of every range, vectorised."""
    lens = hi - lo
    rows = np.repeat(np.arange(lo.size), lens)
    starts = np.repeat(lo - (np.cumsum(lens) - lens), lens)
    return rows, starts + np.arange(int(lens.sum()))


@dataclass
class NgramCounts:
    """Counts of every order 1..n over one padded stream (see the module docstring for the keys).

    Attributes:
        order: n.
        vocab_size: V.
        num_tokens: number of targets (= length of the unpadded stream).
        ctx_keys: ``ctx_keys[j]`` (j = 0..n-1): sorted keys of the distinct length-j contexts.
        gram_keys: ``gram_keys[k]`` (k = 1..n; index 0 unused): sorted keys of the distinct k-grams.
        gram_counts: ``gram_counts[k]``: how often each k-gram occurs before a target (raw counts c).
        bos_id: the boundary id.
        per_sentence: counted one sentence at a time (see :func:`count_ngrams`).
    """

    order: int
    vocab_size: int
    num_tokens: int
    ctx_keys: list[np.ndarray]
    gram_keys: list[np.ndarray]
    gram_counts: list[np.ndarray]
    bos_id: int = 1
    per_sentence: bool = False
    _suffixes: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def gram_suffix(self, k: int) -> np.ndarray:
        """:meth:`suffix_index` of every stored k-gram (``gram_keys[k]``), computed once."""
        if k not in self._suffixes:
            self._suffixes[k] = self.suffix_index(k, self.gram_keys[k])
        return self._suffixes[k]

    def suffix_index(self, k: int, keys: np.ndarray) -> np.ndarray:
        """Index in ``gram_keys[k - 1]`` of the (k-1)-gram suffix (oldest word dropped) of each k-gram key."""
        ctx, w = np.divmod(keys, self.vocab_size)
        suffix = (self.ctx_keys[k - 1][ctx] // self.vocab_size) * self.vocab_size + w
        idx, found = lookup(self.gram_keys[k - 1], suffix)
        assert found.all(), "every k-gram's suffix is a (k-1)-gram of the same stream"
        return idx

    def continuation_counts(self, k: int) -> np.ndarray:
        """N1+(. g) for every k-gram g (k < n): how many distinct words precede g (Chen & Goodman sec. 3.5).

        Every k-gram of the padded stream has a word before it (the bos padding is n - 1 long), so the
        distinct (k+1)-grams map onto all k-grams and the counts come out in ``gram_keys[k]`` order.
        Counted per sentence, a k-gram that starts with ``<s>`` (k >= 2) has no word before it: it keeps
        its raw count, as in KenLM's ``lmplz`` (nothing can precede ``<s>``).
        """
        counts = np.bincount(self.gram_suffix(k + 1), minlength=self.gram_keys[k].size).astype(np.int64)
        if self.per_sentence and k >= 2:
            oldest = self.ctx_keys[k - 1][self.gram_keys[k] // self.vocab_size] % self.vocab_size
            counts = np.where(oldest == self.bos_id, self.gram_counts[k], counts)
        return counts


def sentence_reach(ids: np.ndarray, bos_id: int, order: int) -> np.ndarray:
    """For every token of a stream, how many words of context it has when every sentence stands alone:
    the words since the boundary (``bos_id``) before it, that boundary (read as ``<s>``) included, at
    most ``order - 1``. The first sentence starts after a virtual boundary."""
    positions = np.arange(ids.size)
    boundary = np.maximum.accumulate(np.where(ids == bos_id, positions, -1)) if ids.size else positions
    previous = np.concatenate([[-1], boundary[:-1]])
    return np.minimum(positions - previous, order - 1)


def count_ngrams(
    ids: np.ndarray, order: int, vocab_size: int, bos_id: int, per_sentence: bool = False
) -> NgramCounts:
    """Count every k-gram (k = 1..order) ending at a target of ``ids`` padded with ``order - 1`` bos ids.

    Args:
        ids: the training stream (already checked by :func:`as_id_array`), non-empty.
        order: n >= 1.
        vocab_size: V; keys are built in base V.
        bos_id: the id the context before the first token is made of (``<eos>``).
        per_sentence: count every sentence alone, as KenLM's ``lmplz`` does: a token's n-grams stop
            at the boundary before it (read as ``<s>``), so no n-gram spans a sentence end and a
            token near a sentence start has only the n-grams back to its ``<s>`` (``<s> w1 w2`` for
            ``w2``, at most order n). Default: the running stream, whose contexts reach across
            sentence ends.
    """
    n, V = order, vocab_size
    stream = np.concatenate([np.full(n - 1, bos_id, dtype=np.int64), ids])
    targets = stream[n - 1 :]
    reach = sentence_reach(ids, bos_id, n) if per_sentence else None
    rows = np.arange(targets.size)  # per sentence: the targets whose context reaches this level
    ctx_keys = [np.zeros(1, dtype=np.int64)]
    cid = np.zeros(targets.size, dtype=np.int64)  # id of the length-j context of every target
    gram_keys: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    gram_counts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    for k in range(1, n + 1):
        keys, counts = np.unique(cid * V + (targets if reach is None else targets[rows]), return_counts=True)
        gram_keys.append(keys)
        gram_counts.append(counts.astype(np.int64))
        if k < n:
            # Grow every target's context by one older word: w_{t-k} sits k places before the target.
            if reach is None:
                older = stream[n - 1 - k : stream.size - k]
            else:
                keep = reach[rows] >= k
                rows, cid = rows[keep], cid[keep]
                older = stream[n - 1 - k + rows]
            uniq, cid = unique_inverse(cid * V + older, ctx_keys[-1].size * V)
            ctx_keys.append(uniq)
    return NgramCounts(n, V, int(targets.size), ctx_keys, gram_keys, gram_counts, bos_id, per_sentence)
