"""Word-tree builders that need no data beyond the vocabulary: balanced, random, Huffman.

* ``balanced_tree``: the words (in a given order) split in half recursively; depth ceil(log2 |V|).
* ``random_tree``: a balanced tree over a random permutation of the words: the starting tree of
  Mnih & Hinton (2008, sec. 4), from which the data-built trees are learnt.
* ``huffman_tree``: Huffman's (1952) code over word frequencies, as in word2vec (Mikolov et al.
  2013): frequent words get short codes, which minimises the expected code length
  sum_w p(w) |code(w)|, i.e. the expected number of node evaluations per training token.

All builders number the internal nodes breadth-first (root 0, then depth 1, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .word_tree import WordTree, bfs_renumber


def balanced_tree(vocab_size: int, order: Sequence[int] | np.ndarray | None = None) -> WordTree:
    """A balanced binary tree whose leaves, left to right, are ``order`` (default 0..|V|-1).

    Each node splits its words into a first half of ceil(n/2) and a second half of floor(n/2).
    """
    if vocab_size < 2:
        raise ValueError(f"a word tree needs at least 2 words, got vocab_size={vocab_size}")
    words = np.arange(vocab_size, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    if words.shape != (vocab_size,) or not np.array_equal(np.sort(words), np.arange(vocab_size)):
        raise ValueError(f"order must be a permutation of 0..{vocab_size - 1}")
    children = np.zeros((vocab_size - 1, 2), dtype=np.int64)
    # One level at a time, all its ranges [start, end) at once: breadth-first numbering for free.
    start, end = np.array([0]), np.array([vocab_size])
    next_id = 1
    while start.size:
        ids = np.arange(next_id - start.size, next_id)
        mid = start + (end - start + 1) // 2
        kids_start = np.stack([start, mid], axis=1)  # (F, 2)
        kids_end = np.stack([mid, end], axis=1)
        size = kids_end - kids_start
        is_leaf = size == 1
        internal = ~is_leaf
        n_new = int(internal.sum())
        child = np.empty_like(kids_start)
        child[is_leaf] = -words[kids_start[is_leaf]] - 1
        child[internal] = np.arange(next_id, next_id + n_new)
        children[ids] = child
        start, end = kids_start[internal], kids_end[internal]  # row-major: (node, bit) order = BFS
        next_id += n_new
    return WordTree(children, vocab_size)


def random_tree(vocab_size: int, seed: int = 0) -> WordTree:
    """A balanced tree with the words assigned to its leaves at random (Mnih & Hinton 2008, sec. 4)."""
    rng = np.random.default_rng(seed)
    return balanced_tree(vocab_size, order=rng.permutation(vocab_size))


def huffman_tree(counts: Sequence[float] | np.ndarray) -> WordTree:
    """Huffman's tree over word frequencies ``counts`` (one non-negative count per word).

    The two-queue construction of word2vec: leaves sorted by count in one queue, merged nodes
    (created in non-decreasing weight) in the other; repeatedly merge the two lightest. O(|V| log |V|)
    for the sort, then linear.
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size < 2:
        raise ValueError(f"counts must be a 1-D array with at least 2 words, got shape {c.shape}")
    if not np.isfinite(c).all() or (c < 0).any():
        bad = int(np.flatnonzero(~np.isfinite(c) | (c < 0))[0])
        raise ValueError(f"counts must be finite and >= 0; word {bad} has count {c[bad]}")
    V = c.size
    leaves = np.argsort(c, kind="stable")  # lightest first
    leaf_w = c[leaves].tolist()
    leaves = leaves.tolist()
    merged_w: list[float] = []
    kids: list[tuple[int, int]] = []  # temporary ids: merge k -> node k; children as WordTree entries
    i = j = 0

    def pop() -> tuple[int, float]:
        nonlocal i, j
        # Take a leaf on ties: keeps the tree shallower (min variance Huffman, Schwartz 1964).
        if i < V and (j >= len(merged_w) or leaf_w[i] <= merged_w[j]):
            i += 1
            return -leaves[i - 1] - 1, leaf_w[i - 1]
        j += 1
        return j - 1, merged_w[j - 1]

    for _ in range(V - 1):
        a, wa = pop()
        b, wb = pop()
        kids.append((a, b))
        merged_w.append(wa + wb)
    return WordTree(bfs_renumber(np.array(kids, dtype=np.int64), root=V - 2), V)
