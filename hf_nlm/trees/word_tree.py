"""The binary word tree of a hierarchical softmax: structure, validation, tensors, save/load.

Morin & Bengio (2005), "Hierarchical Probabilistic Neural Network Language Model", and Mnih & Hinton
(2008), "A Scalable Hierarchical Distributed Language Model": the words are the leaves of a binary
tree; a word's *code* is the path from the root to one of its leaves, a sequence of
(internal node i, bit d_i) pairs, and

    P(w | h) = sum_{codes d of w} prod_i P(d_i | q_i, h),   P(d_i = 1 | q_i, h) = sigmoid(h . q_i + b_i)

(Mnih & Hinton 2008, eq. 3-4). A word may sit at several leaves (several codes), as in their
ADAPTIVE(eps) trees.

Storage: ``children`` is a ``(num_nodes, 2)`` int64 array; ``children[n, d]`` is the child of
internal node ``n`` on branch ``d`` (bit 0 or 1). A value ``>= 0`` is another internal node, a value
``< 0`` is a leaf holding word ``-value - 1``. Node 0 is the root. This is compact (|V| - 1 rows
for a tree with one code per word) and makes "binary" a matter of shape; ``codes(word)`` gives the
per-word list of codes, each a list of ``(node, bit)`` from the root down.
"""

from __future__ import annotations

import heapq
import json
import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from ..saved_files import read_json

_FORMAT = "hf_nlm.word_tree"
_VERSION = 1


class TreeTensors(NamedTuple):
    """The padded per-word paths a tree head gathers from, each of shape (|V|, max_codes, max_depth).

    ``nodes[w, c, l]`` is the l-th internal node on word w's c-th code, ``bits[w, c, l]`` the branch
    taken there, ``mask[w, c, l]`` whether that step exists (paths are padded with node 0 / bit 0).
    A code slot ``c`` whose mask is all False is absent (the word has fewer codes than max_codes).
    """

    nodes: torch.Tensor  # int64
    bits: torch.Tensor  # bool
    mask: torch.Tensor  # bool


def leaf(word: int) -> int:
    """The ``children`` entry that stands for a leaf holding ``word``."""
    return -int(word) - 1


class WordTree:
    """A validated binary tree over the words ``0 .. vocab_size - 1`` (see the module docstring).

    Build one with :func:`balanced_tree`, :func:`random_tree`, :func:`huffman_tree`,
    :func:`adaptive_tree`, or from explicit codes with :meth:`WordTree.from_codes`.
    """

    def __init__(self, children: np.ndarray | Sequence[Sequence[int]], vocab_size: int) -> None:
        rows = [len(r) for r in children] if not isinstance(children, np.ndarray) else None
        if rows is not None:
            for n, k in enumerate(rows):
                if k != 2:
                    raise ValueError(f"node {n} has {k} children; a word tree is binary (exactly 2 per node)")
        arr = np.asarray(children, dtype=np.int64)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError(f"children must have shape (num_nodes, 2) (binary nodes), got {arr.shape}")
        if vocab_size < 2:
            raise ValueError(f"a word tree needs at least 2 words, got vocab_size={vocab_size}")
        self.children = arr
        self.children.setflags(write=False)
        self.vocab_size = int(vocab_size)
        self._validate()

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        ch, V = self.children, self.vocab_size
        M = ch.shape[0]
        if M == 0:
            raise ValueError("a word tree needs at least one internal node")
        internal = ch >= 0
        if (ch[internal] >= M).any():
            bad = int(ch[internal][ch[internal] >= M][0])
            raise ValueError(f"child node {bad} does not exist (the tree has {M} internal nodes, 0..{M - 1})")
        words = -ch[~internal] - 1
        if (words >= V).any():
            bad = int(words[words >= V][0])
            raise ValueError(f"leaf holds word {bad}, outside the vocabulary 0..{V - 1}")
        # Every internal node but the root has exactly one parent.
        n_parents = np.bincount(ch[internal], minlength=M)
        if n_parents[0] > 0:
            raise ValueError("node 0 is the root and must not be the child of another node")
        if (n_parents[1:] != 1).any():
            n = int(np.flatnonzero(n_parents[1:] != 1)[0]) + 1
            raise ValueError(
                f"node {n} has {int(n_parents[n])} parents; every non-root node needs exactly one"
            )
        # Walk down from the root level by level: depth, parent, and reachability in one pass.
        parent = np.full(M, -1, dtype=np.int64)
        parent_bit = np.zeros(M, dtype=np.int64)
        depth = np.full(M, -1, dtype=np.int64)
        depth[0] = 0
        frontier = np.array([0], dtype=np.int64)
        d = 0
        while frontier.size:
            kids = ch[frontier]  # (F, 2)
            for bit in (0, 1):
                k = kids[:, bit]
                is_node = k >= 0
                parent[k[is_node]] = frontier[is_node]
                parent_bit[k[is_node]] = bit
                depth[k[is_node]] = d + 1
            frontier = kids[kids >= 0]
            d += 1
        if (depth < 0).any():
            n = int(np.flatnonzero(depth < 0)[0])
            raise ValueError(f"node {n} is not reachable from the root (node 0)")
        missing = np.setdiff1d(np.arange(V), words)
        if missing.size:
            raise ValueError(
                f"word {int(missing[0])} is missing from the tree ({missing.size} word(s) have no leaf); "
                "every word needs at least one code"
            )
        self.parent, self.parent_bit, self.depth = parent, parent_bit, depth
        for a in (parent, parent_bit, depth):
            a.setflags(write=False)

    # ------------------------------------------------------------------ sizes
    @property
    def num_nodes(self) -> int:
        """Number of internal nodes (= rows of the node-vector matrix q)."""
        return int(self.children.shape[0])

    @property
    def num_leaves(self) -> int:
        """Number of leaves = total number of codes = num_nodes + 1."""
        return self.num_nodes + 1

    def _leaves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(node, bit, word) of every leaf, in a fixed order (by node, then bit)."""
        node, bit = np.nonzero(self.children < 0)
        return node, bit, -self.children[node, bit] - 1

    def num_codes(self) -> np.ndarray:
        """How many codes (leaves) each word has, shape (|V|,)."""
        return np.bincount(self._leaves()[2], minlength=self.vocab_size)

    @property
    def max_codes(self) -> int:
        return int(self.num_codes().max())

    @property
    def max_depth(self) -> int:
        """The longest code (number of internal nodes on the deepest root-to-leaf path)."""
        return int(self.depth.max()) + 1

    def code_lengths(self) -> list[list[int]]:
        """Per word, the lengths of its codes."""
        node, _, word = self._leaves()
        out: list[list[int]] = [[] for _ in range(self.vocab_size)]
        for n, w in zip(node.tolist(), word.tolist(), strict=True):
            out[w].append(int(self.depth[n]) + 1)
        return out

    def expected_code_length(self, counts: Sequence[float] | np.ndarray) -> float:
        """sum_w p(w) * len(code(w)), with p proportional to ``counts`` (mean length if several codes).

        For a Huffman tree this is the optimal expected code length (Huffman 1952), between the
        entropy H(p) and H(p) + 1 bits.
        """
        p = np.asarray(counts, dtype=np.float64)
        if p.shape != (self.vocab_size,):
            raise ValueError(f"counts must have one entry per word ({self.vocab_size}), got shape {p.shape}")
        p = p / p.sum()
        mean_len = np.array([np.mean(ls) for ls in self.code_lengths()])
        return float((p * mean_len).sum())

    # ------------------------------------------------------------------ codes
    def codes(self, word: int) -> list[list[tuple[int, int]]]:
        """The codes of ``word``: each a list of (node, bit) from the root down to one of its leaves."""
        if not 0 <= word < self.vocab_size:
            raise ValueError(f"word {word} is outside the vocabulary 0..{self.vocab_size - 1}")
        out = []
        nodes, bits = np.nonzero(self.children == leaf(word))
        for n, b in zip(nodes.tolist(), bits.tolist(), strict=True):
            path = [(n, b)]
            while self.parent[n] >= 0:
                n, b = int(self.parent[n]), int(self.parent_bit[n])
                path.append((n, b))
            out.append(path[::-1])
        return out

    def all_codes(self) -> list[list[list[tuple[int, int]]]]:
        """``codes(w)`` for every word (the per-word view of the tree)."""
        t = self.to_tensors()
        out: list[list[list[tuple[int, int]]]] = []
        for w in range(self.vocab_size):
            word_codes = []
            for c in range(t.nodes.shape[1]):
                m = t.mask[w, c]
                if m.any():
                    word_codes.append(
                        list(zip(t.nodes[w, c][m].tolist(), t.bits[w, c][m].long().tolist(), strict=True))
                    )
            out.append(word_codes)
        return out

    @classmethod
    def from_codes(cls, codes: Sequence[Sequence[Sequence[tuple[int, int]]]]) -> WordTree:
        """Build a tree from per-word codes: ``codes[w]`` is a list of codes, each a list of (node, bit).

        Node ids must be 0..M-1 with the root 0, and the codes must describe one binary tree:
        each (node, bit) branch leads to one place, every node has both branches, no two codes end
        at the same leaf.
        """
        V = len(codes)
        slot: dict[tuple[int, int], int] = {}  # (node, bit) -> child entry (node id or leaf)
        where: dict[tuple[int, int], str] = {}
        for w, word_codes in enumerate(codes):
            if len(word_codes) == 0:
                raise ValueError(f"word {w} has no code: it is missing from the tree")
            for c, code in enumerate(word_codes):
                if len(code) == 0:
                    raise ValueError(
                        f"word {w}, code {c} is empty; a code is a root-to-leaf path of (node, bit)"
                    )
                if int(code[0][0]) != 0:
                    raise ValueError(
                        f"word {w}, code {c} starts at node {code[0][0]}; every code starts at the root, "
                        "node 0"
                    )
                for i, (node, bit) in enumerate(code):
                    node, bit = int(node), int(bit)
                    if bit not in (0, 1):
                        raise ValueError(
                            f"word {w}, code {c}: node {node} has a branch with bit {bit}; "
                            "a word tree is binary (bits 0 and 1)"
                        )
                    if node < 0:
                        raise ValueError(f"word {w}, code {c}: node id {node} is negative")
                    child = int(code[i + 1][0]) if i + 1 < len(code) else leaf(w)
                    here = f"word {w}, code {c}"
                    if child < 0 and slot.get((node, bit)) == child:  # this very leaf was claimed before
                        raise ValueError(
                            f"word {w} has the same code twice ({where[(node, bit)]} and code {c})"
                        )
                    old = slot.setdefault((node, bit), child)
                    if old != child:
                        if child < 0 and old < 0:
                            other = -old - 1
                            if other == w:
                                raise ValueError(
                                    f"word {w} has the same code twice ({where[(node, bit)]} and code {c})"
                                )
                            raise ValueError(
                                f"words {other} and {w} have the same code (node {node}, bit {bit})"
                            )
                        raise ValueError(
                            f"{here}: branch (node {node}, bit {bit}) leads to {_describe(child)} but "
                            f"{where[(node, bit)]} says it leads to {_describe(old)}"
                        )
                    where.setdefault((node, bit), here)
        M = max(n for n, _ in slot) + 1
        children = np.full((M, 2), np.iinfo(np.int64).min, dtype=np.int64)
        for (n, b), child in slot.items():
            children[n, b] = child
        unset = np.argwhere(children == np.iinfo(np.int64).min)
        if unset.size:
            n, b = (int(x) for x in unset[0])
            if (children[n] == np.iinfo(np.int64).min).all():
                raise ValueError(f"node ids must be 0..{M - 1}, but node {n} appears in no code")
            raise ValueError(f"node {n} has only one child (no code takes bit {b}); a word tree is binary")
        return cls(children, V)

    # ------------------------------------------------------------------ tensors
    def to_tensors(self) -> TreeTensors:
        """The padded (|V|, max_codes, max_depth) node / bit / mask arrays a tree head gathers from."""
        V, L = self.vocab_size, self.max_depth
        leaf_node, leaf_bit, leaf_word = self._leaves()
        K = leaf_node.size
        length = self.depth[leaf_node] + 1
        nodes = np.zeros((K, L), dtype=np.int64)
        bits = np.zeros((K, L), dtype=np.int64)
        mask = np.zeros((K, L), dtype=bool)
        # Fill each path bottom-up, all leaves at once: step s writes position length - 1 - s.
        cur, cur_bit, rows = leaf_node.copy(), leaf_bit.copy(), np.arange(K)
        for s in range(L):
            live = length - 1 - s >= 0
            if not live.any():
                break
            r, pos = rows[live], (length - 1 - s)[live]
            nodes[r, pos], bits[r, pos], mask[r, pos] = cur[live], cur_bit[live], True
            cur_bit = np.where(live, self.parent_bit[cur], 0)
            cur = np.where(live, np.maximum(self.parent[cur], 0), 0)
        # Group the leaves by word: code slot c = rank of the leaf among its word's leaves.
        order = np.argsort(leaf_word, kind="stable")
        w_sorted = leaf_word[order]
        first = np.searchsorted(w_sorted, w_sorted, side="left")
        slot = np.arange(K) - first
        C = int(slot.max()) + 1
        out_nodes = np.zeros((V, C, L), dtype=np.int64)
        out_bits = np.zeros((V, C, L), dtype=bool)
        out_mask = np.zeros((V, C, L), dtype=bool)
        out_nodes[w_sorted, slot] = nodes[order]
        out_bits[w_sorted, slot] = bits[order].astype(bool)
        out_mask[w_sorted, slot] = mask[order]
        return TreeTensors(
            torch.from_numpy(out_nodes), torch.from_numpy(out_bits), torch.from_numpy(out_mask)
        )

    @classmethod
    def from_tensors(cls, nodes: torch.Tensor, bits: torch.Tensor, mask: torch.Tensor) -> WordTree:
        """Rebuild a tree from :meth:`to_tensors`' arrays (e.g. the buffers of a loaded tree head)."""
        nodes_np = nodes.detach().cpu().numpy().astype(np.int64)
        bits_np = bits.detach().cpu().numpy().astype(np.int64)
        mask_np = mask.detach().cpu().numpy().astype(bool)
        if not (nodes_np.shape == bits_np.shape == mask_np.shape) or nodes_np.ndim != 3:
            raise ValueError("nodes, bits and mask must share one shape (vocab_size, max_codes, max_depth)")
        V = nodes_np.shape[0]
        codes = []
        for w in range(V):
            word_codes = []
            for c in range(nodes_np.shape[1]):
                m = mask_np[w, c]
                if m.any():
                    word_codes.append(
                        list(zip(nodes_np[w, c][m].tolist(), bits_np[w, c][m].tolist(), strict=True))
                    )
            codes.append(word_codes)
        return cls.from_codes(codes)

    @classmethod
    def from_partial_tensors(
        cls,
        nodes: torch.Tensor | None = None,
        bits: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> WordTree:
        """Rebuild a tree from two of :meth:`to_tensors`' three arrays (a checkpoint that lost one).

        The arrays must be those of a tree numbered breadth-first, as a tree head stores its tree
        (:meth:`renumbered_breadth_first`); the third then follows from the two:

        * without ``nodes``: node ids go level by level, in order of (parent, bit): breadth-first order;
        * without ``mask``: node 0 is the root and nowhere else on a path, so a step l > 0 exists where its
          node is not 0; a word's codes come in order of their leaves, so its first code slot is taken,
          and a later one is taken where it has such a step or starts with bit 1;
        * without ``bits``: each node's two children are known, not which branch is which. The internal
          child of the lower id takes bit 0 (as breadth-first numbering gives it), an internal child comes
          before a leaf, a leaf of a lower word (code slot) before another. Where the stored tree had
          another choice, the result is its mirror image at that node: the same words under each node,
          reached by the other branch.

        Raises ``ValueError`` if the two arrays describe no tree (or not one numbered breadth-first).
        """
        given = {name: a for name, a in (("nodes", nodes), ("bits", bits), ("mask", mask)) if a is not None}
        if len(given) != 2:
            raise ValueError(f"give two of nodes, bits, mask; got {sorted(given) or 'none'}")
        arrays = {name: torch.as_tensor(a).detach().cpu().numpy() for name, a in given.items()}
        shapes = {a.shape for a in arrays.values()}
        if len(shapes) != 1 or len(next(iter(shapes))) != 3:
            raise ValueError("the arrays must share one shape (vocab_size, max_codes, max_depth)")
        V, C, L = next(iter(shapes))
        node = arrays["nodes"].astype(np.int64) if nodes is not None else None
        bit = arrays["bits"].astype(np.int64) if bits is not None else None
        if mask is not None:
            on = arrays["mask"].astype(bool)
        else:
            deeper = node[:, :, 1:] != 0
            taken = deeper.any(-1) | (bit[:, :, 0] == 1) | (np.arange(C) == 0)[None, :]
            on = np.concatenate([taken[..., None], deeper & taken[..., None]], axis=-1)
        if node is None:
            node = np.zeros((V, C, L), dtype=np.int64)
            next_id = 1
            for level in range(1, L):
                here = on[:, :, level]
                parent_branch = 2 * node[:, :, level - 1][here] + bit[:, :, level - 1][here]
                branches, rank = np.unique(parent_branch, return_inverse=True)
                node[:, :, level][here] = next_id + rank
                next_id += branches.size
        # Every step (w, c, l) is an edge from its node to the next step's node, or to the leaf of code (w,
        # c).
        w, c, step = np.nonzero(on)
        if w.size == 0 or (node[on] < 0).any() or (bit is not None and ((bit < 0) | (bit > 1)).any()):
            raise ValueError(
                "the arrays hold no tree (no code, negative node ids or bits other than 0 and 1)"
            )
        parent = node[w, c, step]
        M = int(parent.max()) + 1
        if M > w.size:  # more nodes than steps on all the paths: ids that no tree numbers so
            raise ValueError(f"node id {M - 1} is beyond what {w.size} path steps can number")
        last = step + 1 >= L
        onward = np.zeros_like(last)
        onward[~last] = on[w[~last], c[~last], step[~last] + 1]
        child = np.where(onward, node[w, c, np.minimum(step + 1, L - 1)], -w - 1)
        children = np.full((M, 2), np.iinfo(np.int64).min, dtype=np.int64)
        if bit is not None:
            children[parent, bit[w, c, step]] = child
        else:
            # Internal children (ids < M) first by id, then leaves by (word, code slot).
            key = np.where(child >= 0, child, M + w * C + c)
            pairs = np.unique(np.stack([parent, key], axis=1), axis=0)
            count = np.bincount(pairs[:, 0], minlength=M)
            if (count != 2).any():
                n = int(np.flatnonzero(count != 2)[0])
                raise ValueError(
                    f"node {n} has {int(count[n])} children in these arrays; a word tree is binary"
                )
            value = np.where(pairs[:, 1] < M, pairs[:, 1], -((pairs[:, 1] - M) // C) - 1)
            children[pairs[0::2, 0], 0], children[pairs[1::2, 0], 1] = value[0::2], value[1::2]
        if (children == np.iinfo(np.int64).min).any():
            n = int(np.argwhere(children == np.iinfo(np.int64).min)[0, 0])
            raise ValueError(f"node {n} has one branch only in these arrays; a word tree is binary")
        tree = cls(children, V)
        rebuilt = tree.to_tensors()
        for name, a in arrays.items():
            if (getattr(rebuilt, name).shape != a.shape
                    or not np.array_equal(getattr(rebuilt, name).numpy(), a)):
                raise ValueError(
                    f"the arrays do not describe one tree numbered breadth-first ({name} differs)"
                )
        return tree

    def resized(self, vocab_size: int) -> tuple[WordTree, np.ndarray]:
        """This tree over the words ``0 .. vocab_size - 1``, as ``resize_token_embeddings`` changes a
        vocabulary (words added or cut at the end), with its internal nodes numbered breadth-first; and for
        each of them the node of this tree it continues (-1: a new node), so that a tree head keeps the
        vectors q_i of the nodes it keeps.

        Cutting removes every leaf of a word ``>= vocab_size``; a node left with one child is replaced by that
        child (its subtree moves up one level), so every remaining word keeps its place below the same nodes.
        Adding gives each new word a leaf: the shallowest leaf (the first breadth-first among the shallowest)
        becomes a new node whose children are its old word (bit 0) and the new word (bit 1), so the tree
        grows level by level, as balanced as it was.
        """
        if vocab_size < 2:
            raise ValueError(f"a word tree needs at least 2 words, got vocab_size={vocab_size}")
        # Post-order rebuild (iterative: a tree may be as deep as its vocabulary): each entry of the new
        # tree is a leaf, a new internal node (an index into rows), or None (a subtree of cut words only).
        rows: list[list[int]] = []
        origin: list[int] = []
        built: dict[int, int | None] = {}
        stack = [(0, False)]
        while stack:
            node, expanded = stack.pop()
            kids = [int(c) for c in self.children[node]]
            if not expanded:
                stack.append((node, True))
                stack.extend((c, False) for c in kids if c >= 0)
                continue
            entries = [built.pop(c) if c >= 0 else (c if -c - 1 < vocab_size else None) for c in kids]
            kept = [e for e in entries if e is not None]
            if len(kept) == 2:
                rows.append(kept)
                origin.append(node)
                built[node] = len(rows) - 1
            else:  # one child left: it takes the node's place; none: the node goes too
                built[node] = kept[0] if kept else None
        root = built[0]
        # (vocab_size >= 2 and every kept word has a leaf: at least one internal node remains.)
        children = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
        children, order = bfs_order(children, root)
        origin = np.asarray(origin, dtype=np.int64)[order]
        if vocab_size > self.vocab_size:
            children, origin = self._add_leaves(children, origin, vocab_size)
        return WordTree(children, vocab_size), origin

    def _add_leaves(self, children: np.ndarray, origin: np.ndarray,
                    vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """``children`` (numbered breadth-first) with a leaf for each word from ``self.vocab_size`` to
        ``vocab_size - 1``, each splitting the shallowest leaf (:meth:`resized`), renumbered breadth-first."""
        rows = children.tolist()
        origin = origin.tolist()
        depth = np.zeros(len(rows), dtype=np.int64)
        for n, row in enumerate(rows):  # breadth-first: a parent comes before its children
            for c in row:
                if c >= 0:
                    depth[c] = depth[n] + 1
        # (depth, rank, node, bit): the rank keeps the breadth-first order among leaves of one depth.
        leaves = [(int(depth[n]), 2 * n + bit, n, bit) for n, row in enumerate(rows) for bit in (0, 1)
                  if row[bit] < 0]
        heapq.heapify(leaves)
        rank = 2 * len(rows)
        for word in range(self.vocab_size, vocab_size):
            d, _, n, bit = heapq.heappop(leaves)
            rows.append([rows[n][bit], leaf(word)])
            origin.append(-1)
            rows[n][bit] = len(rows) - 1
            for b in (0, 1):
                heapq.heappush(leaves, (d + 1, rank, len(rows) - 1, b))
                rank += 1
        children, order = bfs_order(np.asarray(rows, dtype=np.int64), 0)
        return children, np.asarray(origin, dtype=np.int64)[order]

    def renumbered_breadth_first(self) -> WordTree:
        """The same tree with internal nodes numbered breadth-first (root 0, then depth 1, ...).

        The builders already number this way; a tree head stores its tree in this order so that
        each tree level is a contiguous block of node vectors.
        """
        return WordTree(bfs_renumber(self.children, root=0), self.vocab_size)

    # ------------------------------------------------------------------ save / load
    def save(self, path: str | os.PathLike) -> None:
        """Write the tree as JSON (``children`` rows; negative = leaf of word -x-1). No pickle."""
        data = {
            "format": _FORMAT,
            "version": _VERSION,
            "vocab_size": self.vocab_size,
            "children": self.children.tolist(),
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, separators=(",", ":"))

    @classmethod
    def load(cls, path: str | os.PathLike) -> WordTree:
        """Read a tree written by :meth:`save`; a malformed file (truncated, not UTF-8 JSON, not a tree)
        raises ValueError naming it."""
        data = read_json(path,
                         restore="give a file WordTree.save wrote (as hf-nlm build-tree's word_tree.json)")
        if data.get("format") != _FORMAT:
            raise ValueError(f'{os.fspath(path)}: not a word tree file (expected "format": "{_FORMAT}")')
        if data.get("version") != _VERSION:
            raise ValueError(
                f"{os.fspath(path)}: word tree format version {data.get('version')}, this code reads "
                f"{_VERSION}"
            )
        try:
            return cls(data["children"], int(data["vocab_size"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{os.fspath(path)}: invalid word tree: {err}") from err

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, WordTree)
            and self.vocab_size == other.vocab_size
            and np.array_equal(self.children, other.children)
        )

    def __hash__(self) -> int:
        return hash((self.vocab_size, self.children.tobytes()))

    def __repr__(self) -> str:
        return (
            f"WordTree(vocab_size={self.vocab_size}, num_nodes={self.num_nodes}, "
            f"max_depth={self.max_depth}, max_codes={self.max_codes})"
        )


def bfs_renumber(children: np.ndarray, root: int) -> np.ndarray:
    """``children`` with the internal nodes renumbered breadth-first from ``root`` (which becomes 0)."""
    return bfs_order(children, root)[0]


def bfs_order(children: np.ndarray, root: int) -> tuple[np.ndarray, np.ndarray]:
    """``children`` renumbered breadth-first from ``root`` (:func:`bfs_renumber`), and the old number of each
    new node."""
    M = children.shape[0]
    new_id = np.full(M, -1, dtype=np.int64)
    order = []
    frontier = np.array([root], dtype=np.int64)
    n = 0
    while frontier.size:
        new_id[frontier] = np.arange(n, n + frontier.size)
        n += frontier.size
        order.append(frontier)
        kids = children[frontier].reshape(-1)
        frontier = kids[kids >= 0]
    old = np.concatenate(order)
    out = children[old].copy()
    internal = out >= 0
    out[internal] = new_id[out[internal]]
    return out, old


def _describe(entry: int) -> str:
    return f"node {entry}" if entry >= 0 else f"the leaf of word {-entry - 1}"
