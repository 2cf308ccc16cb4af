"""Tree (binary hierarchical) softmax: Morin & Bengio 2005; Mnih & Hinton 2008 (HLBL).

F. Morin, Y. Bengio, "Hierarchical Probabilistic Neural Network Language Model", AISTATS 2005;
A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008, eq. 3-4:

    P(d_i = 1 | q_i, h) = sigmoid(h . q_i + b_i)
    P(w | h) = sum_{d in D(w)} prod_i P(d_i | q_i, h)

where D(w) are the codes of w (root-to-leaf paths, see :mod:`hf_nlm.trees`), q_i the vector and b_i
the bias of the i-th internal node on the path, d_i the branch taken. Since
P(d_i = 0 | .) = sigmoid(-(h . q_i + b_i)), each factor is sigmoid(+-(h . q_i + b_i)).

Training touches only the O(log |V|) nodes on the target's path(s); exact full-vocabulary
log-probabilities cost one (N, num_nodes) matmul plus O(|V|) additions per row (top-down over the
tree levels), about the price of a full softmax.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..trees import WordTree
from .softmax import upcast


class TreeSoftmaxHead(nn.Module):
    """Binary tree softmax over a :class:`~hf_nlm.trees.WordTree`.

    Args:
        in_features: D, the size of the hidden (predicted) vector h.
        tree: the word tree. Leave it ``None`` and give ``vocab_size``, ``num_nodes``, ``max_codes``,
            ``max_depth`` (see :meth:`tree_shape`) to build an empty head of the right shapes whose
            tree comes from ``load_state_dict`` / ``from_pretrained``.
        bias: learn a bias b_i per internal node.
        sparse: give ``nll``'s gradient of ``weight`` as a sparse tensor (as
            ``nn.Embedding(sparse=True)``): only the O(N log |V|) touched rows, no dense
            num_nodes x D gradient per step. For optimizers that accept sparse gradients (SGD,
            SparseAdam, Adagrad), as in Mnih & Hinton's and word2vec's SGD training.

    Parameters: ``weight`` (num_nodes x D, the node vectors q_i) and ``bias`` (num_nodes, b_i).
    Persistent buffers (saved in the state dict / safetensors with the model):
    ``tree_nodes`` (|V|, max_codes, max_depth) int64, ``tree_bits`` (same shape) bool,
    ``tree_mask`` (same shape) bool; see :class:`~hf_nlm.trees.TreeTensors`.
    """

    def __init__(
        self,
        in_features: int,
        tree: WordTree | None = None,
        bias: bool = True,
        *,
        sparse: bool = False,
        vocab_size: int | None = None,
        num_nodes: int | None = None,
        max_codes: int | None = None,
        max_depth: int | None = None,
    ) -> None:
        super().__init__()
        if tree is not None:
            shape = self.tree_shape(tree)
            # Breadth-first numbering makes each tree level a contiguous block of node vectors.
            tensors = tree.renumbered_breadth_first().to_tensors()
        else:
            given = {
                "vocab_size": vocab_size,
                "num_nodes": num_nodes,
                "max_codes": max_codes,
                "max_depth": max_depth,
            }
            missing = [k for k, v in given.items() if v is None]
            if missing:
                raise ValueError(f"TreeSoftmaxHead needs a tree, or the tree's shape; missing {missing}")
            shape = {k: int(v) for k, v in given.items()}
            V, C, L = shape["vocab_size"], shape["max_codes"], shape["max_depth"]
            # Placeholder tree (every code absent) to be overwritten by a state dict of these shapes.
            z = torch.zeros(V, C, L, dtype=torch.int64)
            tensors = (z, z.bool(), z.bool())
        self.in_features = in_features
        self.sparse = sparse
        self.vocab_size = shape["vocab_size"]
        self.num_nodes = shape["num_nodes"]
        self.weight = nn.Parameter(torch.empty(self.num_nodes, in_features))
        self.bias = nn.Parameter(torch.zeros(self.num_nodes)) if bias else None
        nodes, bits, mask = tensors
        self.register_buffer("tree_nodes", nodes.clone())
        self.register_buffer("tree_bits", bits.clone())
        self.register_buffer("tree_mask", mask.clone())
        self._structure_cache: tuple | None = None
        self.reset_parameters()

    @staticmethod
    def tree_shape(tree: WordTree) -> dict[str, int]:
        """The sizes a model config must record to rebuild this head before loading its weights."""
        return {
            "vocab_size": tree.vocab_size,
            "num_nodes": tree.num_nodes,
            "max_codes": tree.max_codes,
            "max_depth": tree.max_depth,
        }

    def reset_parameters(self, std: float | None = None) -> None:
        if std is None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            nn.init.uniform_(self.weight, -bound, bound)
        else:
            nn.init.normal_(self.weight, std=std)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def tree(self) -> WordTree:
        """The word tree held in the buffers (validated; internal nodes numbered breadth-first)."""
        return WordTree.from_tensors(self.tree_nodes, self.tree_bits, self.tree_mask)

    # ------------------------------------------------------------------ training path
    def nll(self, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-token -log P(target | h) (Mnih & Hinton 2008, eq. 3-4), shape ``target.shape``.

        One gather of the target's padded path node vectors, one batched dot product, logsigmoid,
        masked sum over the path, logsumexp over the codes. Target -100 gives 0 (ignored).
        """
        h = hidden.reshape(-1, hidden.shape[-1])
        t = target.reshape(-1)
        ignore = t == -100
        t = t.masked_fill(ignore, 0)
        nodes, bits, mask = self.tree_nodes[t], self.tree_bits[t], self.tree_mask[t]  # (N, C, L)
        N, C, L = nodes.shape
        # (N, C*L, D): the vectors q_i of the nodes on the target's path(s), one gather.
        q = F.embedding(nodes.view(N, C * L), self.weight, sparse=self.sparse)
        score = torch.bmm(q, h.unsqueeze(-1)).view(N, C, L)  # h . q_i
        if self.bias is not None:
            score = score + self.bias[nodes]  # dense gradient: num_nodes floats, cheap
        score = upcast(score)
        # log sigmoid(+-(h . q_i + b_i)): + for bit 1, - for bit 0; padded steps contribute 0.
        sign = bits.to(score.dtype) * 2 - 1
        log_p = (F.logsigmoid(sign * score) * mask).sum(-1)  # (N, C): log prob of each code
        if C == 1:
            log_p = log_p.squeeze(-1)
        else:
            log_p = log_p.masked_fill(~mask[..., 0], float("-inf")).logsumexp(-1)  # sum over codes
        return (-log_p).masked_fill(ignore, 0.0).view(target.shape)

    # ------------------------------------------------------------------ full distribution
    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Exact log-probabilities (normalised by construction; log_softmax leaves them unchanged)."""
        return self.log_probs(hidden)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log P(w | h) for every word, shape ``hidden.shape[:-1] + (|V|,)``.

        All node scores at once (q h + b, one matmul), then top-down one tree level at a time: the
        log-probability of taking each edge (node, bit) is the node's reach plus
        log sigmoid(+-(h . q_i + b_i)); the next level's nodes are the internal ones among those edges,
        the leaves are the rest; a word's leaves are combined by logsumexp. The work per row is
        O(num_nodes) after the matmul, so the cost stays close to a full softmax's (which also needs
        a |V| x D matmul). Rows are processed in chunks to keep the (num_nodes, chunk) tables in cache.
        """
        s = self._structure()
        lead = hidden.shape[:-1]
        h = hidden.reshape(-1, hidden.shape[-1])
        weight, bias = self.weight, self.bias
        if s["node_order"] is not None:  # buffers not stored level by level (never from __init__)
            weight = weight.index_select(0, s["node_order"])
            bias = None if bias is None else bias.index_select(0, s["node_order"])
        chunks = [
            self._log_probs_chunk(h[i : i + self.chunk_size], weight, bias, s)
            for i in range(0, h.shape[0], self.chunk_size)
        ]
        out = torch.cat(chunks, dim=0) if chunks else h.new_zeros(0, self.vocab_size)
        return out.view(*lead, self.vocab_size)

    # Rows per block of log_probs: (num_nodes x chunk) tables stay small enough for the CPU caches.
    chunk_size = 64

    def _log_probs_chunk(
        self, h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, s: dict
    ) -> torch.Tensor:
        n, M = h.shape[0], self.num_nodes
        # Node-major layout (M, n): one tree level is a contiguous block of rows.
        score = weight @ h.t() if bias is None else torch.addmm(bias[:, None], weight, h.t())
        score = upcast(score)
        log_sig = F.logsigmoid(score)  # log P(bit 1 | node); log P(bit 0 | node) = log_sig - score
        edge = score.new_empty(M, 2, n)  # log-prob of reaching each (node, bit) edge
        reach = score.new_zeros(1, n)  # the root is reached with probability 1
        for (start, end), next_nodes in zip(s["level_bounds"], s["level_children"], strict=True):
            take_1 = reach + log_sig[start:end]
            edge[start:end, 1] = take_1
            edge[start:end, 0] = take_1 - score[start:end]
            # The next level: the internal children of this level, gathered from its edges.
            reach = edge[start:end].reshape(2 * (end - start), n).index_select(0, next_nodes)
        leaf = edge.view(2 * M, n).index_select(0, s["leaf_edge"])  # (V * C, n)
        V, C = self.vocab_size, s["max_codes"]
        if C > 1:
            leaf = leaf.view(V, C, n).masked_fill(~s["code_mask"][..., None], float("-inf")).logsumexp(1)
        return leaf.t()

    def _structure(self) -> dict:
        """Level blocks, child and leaf indices derived from the buffers (cached).

        Derived rather than stored so that the saved state is just the tree; the cache key follows
        the buffers' identity and version, so ``load_state_dict`` or ``.to(device)`` refresh it.
        """
        key = tuple(
            (b.data_ptr(), b._version, b.device) for b in (self.tree_nodes, self.tree_bits, self.tree_mask)
        )
        if self._structure_cache is not None and self._structure_cache[0] == key:
            return self._structure_cache[1]
        if not bool(self.tree_mask.any()):
            raise ValueError(
                "this TreeSoftmaxHead holds no tree yet (it was built from shapes only): "
                "load a state dict / checkpoint that contains tree_nodes, tree_bits, tree_mask"
            )
        with torch.no_grad():
            V, C, L = self.tree_nodes.shape
            M, dev = self.num_nodes, self.tree_nodes.device
            nodes = self.tree_nodes.reshape(V * C, L)
            bits = self.tree_bits.reshape(V * C, L).long()
            mask = self.tree_mask.reshape(V * C, L)
            # Along every path, node l's parent is node l-1, reached by bit l-1.
            step = mask[:, 1:]
            child = nodes[:, 1:][step]
            parent = torch.zeros(M, dtype=torch.int64, device=dev)
            parent_bit = torch.zeros(M, dtype=torch.int64, device=dev)
            depth = torch.zeros(M, dtype=torch.int64, device=dev)
            parent[child] = nodes[:, :-1][step]
            parent_bit[child] = bits[:, :-1][step]
            depth[child] = torch.arange(1, L, device=dev).expand(V * C, L - 1)[step]
            # Work in depth order (identity for trees stored by __init__, which numbers breadth-first).
            order = torch.argsort(depth, stable=True)
            identity = bool((order == torch.arange(M, device=dev)).all())
            pos = torch.empty_like(order)
            pos[order] = torch.arange(M, device=dev)
            counts = torch.bincount(depth, minlength=1).tolist()
            starts = [0]
            for c in counts:
                starts.append(starts[-1] + c)
            bounds = [(starts[d], starts[d + 1]) for d in range(len(counts))]
            # Edge (node, bit) of a depth-ordered node p is row 2 p + bit of the (2M, n) edge table.
            edge_of_node = 2 * pos[parent] + parent_bit  # the edge leading into each node
            level_children = []
            for d, (a, _) in enumerate(bounds):
                if d + 1 < len(bounds):
                    nxt = order[bounds[d + 1][0] : bounds[d + 1][1]]
                    level_children.append(edge_of_node[nxt] - 2 * a)  # local to this level's edges
                else:
                    level_children.append(torch.zeros(0, dtype=torch.int64, device=dev))
            length = mask.sum(1)
            last = (length - 1).clamp_min(0).unsqueeze(1)
            leaf_node = nodes.gather(1, last).squeeze(1)
            leaf_bit = bits.gather(1, last).squeeze(1)
            structure = {
                "level_bounds": bounds,
                "level_children": level_children,
                "leaf_edge": 2 * pos[leaf_node] + leaf_bit,
                "code_mask": (length > 0).view(V, C),
                "max_codes": C,
                "node_order": None if identity else order,
            }
        self._structure_cache = (key, structure)
        return structure

    def extra_repr(self) -> str:
        V, C, L = self.tree_nodes.shape
        return (
            f"in_features={self.in_features}, vocab_size={V}, num_nodes={self.num_nodes}, "
            f"max_codes={C}, max_depth={L}, bias={self.bias is not None}"
        )
