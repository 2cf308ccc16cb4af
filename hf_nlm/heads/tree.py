"""Tree (binary hierarchical) softmax: Morin & Bengio 2005; Mnih & Hinton 2008 (HLBL).

F. Morin, Y. Bengio, "Hierarchical Probabilistic Neural Network Language Model", AISTATS 2005;
A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008, eq. 3-4:

    P(d_i = 1 | q_i, h) = sigmoid(h . q_i + b_i)
    P(w | h) = sum_{d in D(w)} prod_i P(d_i | q_i, h)

where D(w) are the codes of w (root-to-leaf paths, see :mod:`hf_nlm.trees`), q_i the vector and b_i
the bias of the i-th internal node on the path, d_i the branch taken. Since
P(d_i = 0 | .) = sigmoid(-(h . q_i + b_i)), each factor is sigmoid(+-(h . q_i + b_i)).

Training touches only the nodes on the target's path(s), and pays for each of them once: the paths
are kept as one flat (ragged) list of (node, bit) steps per word, so a token costs the total length of
its word's codes (about the expected code length for a Huffman tree, one path for a word with one
code), not max_codes x max_depth. Exact full-vocabulary log-probabilities cost one (N, num_nodes)
matmul, one softplus per node and O(num_nodes) additions and gathers per row (top-down over the tree
levels).
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from ..trees import WordTree
from .base import (
    OutputHead,
    Targets,
    head_options,
    refuse_arguments,
    register_head,
    upcast,
    write_unless_loaded,
)
from .softmax import init_output_weights


@head_options
class TreeSoftmaxOptions:
    r"""
    The settings of the tree head: fields of every model's config
    (:class:`~hf_nlm.configuration_utils.NLMConfig` lists this class among its bases), since every body can
    take the tree head. They record the tree's shape, so that `from_pretrained` can build an empty head of the
    right size before the saved tree (in the head's buffers) is loaded into it.

    Args:
        tree_num_nodes, tree_max_codes, tree_max_depth (`int`, *optional*):
            With `head="tree"`: the word tree's shape (`hf_nlm.heads.tree_config_fields(tree)`), so that
            `from_pretrained` can rebuild the head before loading the tree saved with the weights. Leave them
            unset when building a fresh model with `XForCausalLM(config, tree=tree)`, which fills them.
    """

    tree_num_nodes: int | None = None
    tree_max_codes: int | None = None
    tree_max_depth: int | None = None


#: The dtype of the 0/1 buffers ``tree_bits`` and ``tree_mask``: uint8 rather than bool, one byte either way;
#: transformers' own save/load tests compare bool tensors with an expression that fails on them. Checkpoints
#: holding bool buffers load as well (every reader converts with ``.bool()`` / ``.long()``).
FLAG_DTYPE = torch.uint8

#: The config fields that record a tree head's shape (:class:`TreeSoftmaxOptions`).
TREE_FIELDS = tuple(f.name for f in dataclasses.fields(TreeSoftmaxOptions))


def tree_config_fields(tree: WordTree) -> dict[str, int]:
    """The config fields that describe ``tree``'s shape: ``{"tree_num_nodes": ..., ...}``."""
    shape = TreeSoftmaxHead.tree_shape(tree)
    return {
        "tree_num_nodes": shape["num_nodes"],
        "tree_max_codes": shape["max_codes"],
        "tree_max_depth": shape["max_depth"],
    }


def has_tree_shape(config) -> bool:
    return all(getattr(config, name, None) is not None for name in TREE_FIELDS)


@register_head("tree", place=8)
class TreeSoftmaxHead(OutputHead):
    """Binary tree softmax over a :class:`~hf_nlm.trees.WordTree`.

    Args:
        in_features: D, the size of the hidden (predicted) vector h.
        tree: the word tree. Leave it ``None`` and give ``vocab_size``, ``num_nodes``, ``max_codes``,
            ``max_depth`` (see :meth:`tree_shape`) to build an empty head of the right shapes whose
            tree comes from ``load_state_dict`` / ``from_pretrained``.
        bias: learn a bias b_i per internal node.
        sparse: give ``nll``'s gradient of ``weight`` as a sparse tensor (as
            ``nn.Embedding(sparse=True)``): only the touched rows, each once (nodes near the root are
            on most paths), no dense num_nodes x D gradient per step. For optimizers that accept
            sparse gradients (SGD, SparseAdam, Adagrad), as in Mnih & Hinton's and word2vec's SGD
            training. Without it the gradient is dense: added in place into ``weight.grad`` when one is
            kept from the step before (``zero_grad(set_to_none=False)``; O(touched rows)), a fresh
            num_nodes x D tensor otherwise.

    Parameters: ``weight`` (num_nodes x D, the node vectors q_i) and ``bias`` (num_nodes, b_i).
    Persistent buffers (saved in the state dict / safetensors with the model): the tree itself,
    ``tree_nodes`` (|V|, max_codes, max_depth) int64, ``tree_bits`` (same shape) and ``tree_mask`` (same
    shape), the last two 0/1 flags stored as uint8 (:data:`FLAG_DTYPE`); see
    :class:`~hf_nlm.trees.TreeTensors`. The config records only the tree's shape, so the tree is state like
    the weights: a checkpoint that lacks a tree buffer reports it missing. The flat per-word paths ``nll``
    works from and the level tables of ``log_probs`` are derived from these and cached.

    :meth:`init_weights` writes the tree buffers that hold no loaded tree: from the tree given at
    construction (kept as a :class:`~hf_nlm.trees.WordTree`, so that a model built on the meta device
    gets it back), else from the two other buffers when a checkpoint lost one of them.
    """

    config_fields = TREE_FIELDS
    returns_log_probs = True
    resizable = True
    derived_caches = ("_paths_cache", "_structure_cache")
    takes_word_tree = True

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
            tree = tree.renumbered_breadth_first()
            tensors = tree.to_tensors()
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
            tensors = (z, z, z)
        self.in_features = in_features
        self.sparse = sparse
        self.vocab_size = shape["vocab_size"]
        self.num_nodes = shape["num_nodes"]
        self.weight = nn.Parameter(torch.empty(self.num_nodes, in_features))
        self.bias = nn.Parameter(torch.zeros(self.num_nodes)) if bias else None
        nodes, bits, mask = tensors
        self.register_buffer("tree_nodes", nodes.clone())
        self.register_buffer("tree_bits", bits.to(FLAG_DTYPE))
        self.register_buffer("tree_mask", mask.to(FLAG_DTYPE))
        # Not marked as initialised (transformers' _is_hf_initialized): a checkpoint without them reports them
        # missing, and init_weights writes them again from the tree, kept here as numpy arrays (a WordTree),
        # which also serves tensors materialised later (to_empty after the meta device).
        self._source_tree = tree
        self.register_load_state_dict_post_hook(_warm_after_load)
        self._structure_cache: tuple | None = None
        self._paths_cache: tuple | None = None
        self.reset_parameters()
        self.warm_cache()

    @staticmethod
    def tree_shape(tree: WordTree) -> dict[str, int]:
        """The sizes a model config must record to rebuild this head before loading its weights."""
        return {
            "vocab_size": tree.vocab_size,
            "num_nodes": tree.num_nodes,
            "max_codes": tree.max_codes,
            "max_depth": tree.max_depth,
        }

    @classmethod
    def prepare_run(cls, fields: dict, tokenizer, run) -> dict:
        """The run's word tree (``run.word_tree()``: the spec's, or a data-built one)."""
        return {"tree": run.word_tree()}

    @classmethod
    def from_config(cls, config, in_features: int, tree: WordTree | None = None, **kwargs) -> TreeSoftmaxHead:
        """``tree`` fills the head (its shape must match the config's tree fields when those are set);
        without it the head is built empty from the config's tree shape, to be filled by
        ``load_state_dict`` / ``from_pretrained``."""
        refuse_arguments(config, kwargs)
        V = config.vocab_size
        if tree is not None:
            if tree.vocab_size != V:
                raise ValueError(
                    f"the word tree covers {tree.vocab_size} words but the config's vocab_size is {V}"
                )
            if has_tree_shape(config):
                want = {name: getattr(config, name) for name in TREE_FIELDS}
                have = tree_config_fields(tree)
                if want != have:
                    raise ValueError(
                        f"tree shape mismatch: the config says {want} but the given tree has {have}; "
                        "use model.set_tree(tree) to replace the tree of a model"
                    )
            return cls(in_features, tree)
        if not has_tree_shape(config):
            raise ValueError(
                "head='tree' needs a word tree: pass tree=... when building the model (e.g. "
                "hf_nlm.trees.random_tree(vocab_size)), or set the config's tree shape "
                f"({', '.join(TREE_FIELDS)}) to load a saved tree"
            )
        return cls(
            in_features,
            vocab_size=V,
            num_nodes=config.tree_num_nodes,
            max_codes=config.tree_max_codes,
            max_depth=config.tree_max_depth,
        )

    @classmethod
    def check_config(cls, config, owner: str) -> None:
        shape = {name: getattr(config, name) for name in TREE_FIELDS}
        given = [name for name, value in shape.items() if value is not None]
        # All three, or none: none means the tree comes with the model (``tree=`` / ``set_tree``).
        if given and len(given) != len(TREE_FIELDS):
            missing = [name for name in TREE_FIELDS if shape[name] is None]
            raise ValueError(
                f"{owner}: head='tree' needs the tree's whole shape ({', '.join(TREE_FIELDS)}); missing "
                f"{missing}. hf_nlm.heads.tree_config_fields(tree) gives all three"
            )
        for name in given:
            if shape[name] < 1:
                raise ValueError(f"{owner}.{name} must be >= 1, got {shape[name]}")
        if given and shape["tree_num_nodes"] < config.vocab_size - 1:
            raise ValueError(
                f"{owner}.tree_num_nodes={shape['tree_num_nodes']} is too small: a binary tree over "
                f"vocab_size={config.vocab_size} words has at least {config.vocab_size - 1} internal nodes"
            )

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        """The node vectors as every head's; the tree buffers that hold no loaded tree are written from the
        tree given at construction. Without one (``from_pretrained`` builds the head from the config's tree
        shape), a buffer the checkpoint lacks is rebuilt from the two it holds
        (:meth:`~hf_nlm.trees.WordTree.from_partial_tensors`; without ``tree_bits``, a tree whose branches
        may be swapped at some nodes, as a lost parameter comes back re-initialised). Otherwise the
        buffers are emptied: the head holds no tree until one is loaded, and says so if used."""
        super().init_weights(initializer_range, init=init)
        buffers = {"nodes": self.tree_nodes, "bits": self.tree_bits, "mask": self.tree_mask}
        loaded = {name: b for name, b in buffers.items() if getattr(b, "_is_hf_initialized", False)}
        if len(loaded) == len(buffers):
            return
        tree = self._source_tree
        if tree is None and len(loaded) == len(buffers) - 1:
            try:
                tree = WordTree.from_partial_tensors(**loaded)
            except ValueError:
                tree = None  # the loaded two describe no tree either
        if tree is not None and tree.num_nodes == self.num_nodes:
            values = tree.to_tensors()._asdict()
        else:
            values = {name: torch.zeros_like(b) for name, b in buffers.items()}
        for name, buffer in buffers.items():
            write_unless_loaded(buffer, values[name].to(buffer.device))

    def check_resize(self, vocab_size: int) -> None:
        if vocab_size < 2:
            raise ValueError(
                f"a tree head cannot follow a vocabulary resized to {vocab_size} tokens: a word tree needs "
                "at least 2 words"
            )

    @torch.no_grad()
    def resize(self, vocab_size: int, mean_init: bool = True) -> None:
        """Follow a vocabulary resized by words added or cut at its end (``resize_token_embeddings``):
        the tree becomes :meth:`WordTree.resized <hf_nlm.trees.WordTree.resized>`, and every node it keeps
        keeps its vector q_i and bias b_i.

        A cut word's leaves go, and a node left with one child gives way to it: the words below that child
        lose that node's factor sigmoid(+-s_i), so they share the cut words' probability. A new word splits
        the shallowest leaf: a new node i whose bit 0 keeps the old word u and whose bit 1 holds the new
        word w. Its q_i is zero and, with ``mean_init`` (the analogue of transformers' mean resizing, which
        gives a new word an average score), b_i = -log |V| (|V| the vocabulary before), so that
        P(w | h) = P(u | h) / (|V| + 1) and u keeps |V| / (|V| + 1) of its probability, whatever h is: every
        other word's probability is unchanged. Without ``mean_init``, b_i = 0: u and w share u's probability
        equally."""
        self.check_resize(vocab_size)
        if vocab_size == self.vocab_size:
            return
        tree, origin = self.tree().resized(vocab_size)
        kept = torch.as_tensor(origin, device=self.weight.device)
        old = kept >= 0
        weight = self.weight.new_zeros(tree.num_nodes, self.in_features)
        weight[old] = self.weight[kept[old]]
        self.weight = nn.Parameter(weight, requires_grad=self.weight.requires_grad)
        if self.bias is not None:
            bias = self.bias.new_full((tree.num_nodes,), -math.log(self.vocab_size) if mean_init else 0.0)
            bias[old] = self.bias[kept[old]]
            self.bias = nn.Parameter(bias, requires_grad=self.bias.requires_grad)
        self.set_tree_buffers(tree)

    def set_tree_buffers(self, tree: WordTree) -> None:
        """Hold ``tree`` (numbered breadth-first, as many nodes as ``weight`` has rows) in the buffers."""
        device = self.tree_nodes.device
        nodes, bits, mask = tree.to_tensors()
        self.tree_nodes = nodes.to(device)
        self.tree_bits = bits.to(device=device, dtype=FLAG_DTYPE)
        self.tree_mask = mask.to(device=device, dtype=FLAG_DTYPE)
        self.vocab_size, self.num_nodes = tree.vocab_size, tree.num_nodes
        self._source_tree = tree
        self.warm_cache()

    def config_values(self) -> dict[str, int]:
        V, C, L = self.tree_nodes.shape
        return {"tree_num_nodes": self.num_nodes, "tree_max_codes": C, "tree_max_depth": L}

    def reset_parameters(self, std: float | None = None) -> None:
        init_output_weights([self.weight], [self.bias], std)

    def tree(self) -> WordTree:
        """The word tree held in the buffers (validated; internal nodes numbered breadth-first)."""
        return WordTree.from_tensors(self.tree_nodes, self.tree_bits, self.tree_mask)

    # ------------------------------------------------------------------ training path
    def nll(self, hidden: torch.Tensor, targets: torch.Tensor | Targets) -> torch.Tensor:
        """Per-token -log P(target | h) (Mnih & Hinton 2008, eq. 3-4), shape ``target.shape``.

        The (node, bit) steps of all the targets' codes are laid out flat, target after target and code
        after code, so that the work is the total length of those codes: one dot product h . q_i per
        step, log sigmoid(+-(h . q_i + b_i)), a sum per code, and a logsumexp over the codes of a word
        with several. The codes of a word with several share nodes (the root at least): each of its nodes'
        dot products is taken once and read by every step through it. Target -100 gives 0 (ignored) and
        costs nothing.
        """
        target = Targets.of(targets).ids
        p = self._paths()
        D = hidden.shape[-1]
        h = hidden.reshape(-1, D)
        t = target.reshape(-1)
        N = t.shape[0]
        ignore = t == -100
        t = t.masked_fill(ignore, 0)
        length = p["word_length"][t].masked_fill(ignore, 0)  # all codes' steps; none when ignored
        ends = length.cumsum(0)
        E = int(ends[-1]) if N else 0
        rows = torch.arange(N, device=t.device)
        row = torch.repeat_interleave(rows, length, output_size=E)  # the target of each step
        # Step e of the batch is step (e - first step of its target) of that target's word.
        entry = torch.arange(E, device=t.device) + (p["word_start"][t] - (ends - length)).index_select(0, row)
        node = p["node"].index_select(0, entry)
        if not p["multi_code"]:
            score = self._dots(h, node, row, ends)
        else:
            # The dots of each target's distinct nodes, then each step's from its node's.
            distinct = p["distinct_length"][t].masked_fill(ignore, 0)
            distinct_ends = distinct.cumsum(0)
            U = int(distinct_ends[-1]) if N else 0
            distinct_row = torch.repeat_interleave(rows, distinct, output_size=U)
            first = distinct_ends - distinct
            distinct_entry = (torch.arange(U, device=t.device)
                              + (p["distinct_start"][t] - first).index_select(0, distinct_row))
            node_dots = self._dots(h, p["distinct_node"].index_select(0, distinct_entry), distinct_row,
                                   distinct_ends)
            score = node_dots.index_select(0, first.index_select(0, row) + p["distinct_of_step"][entry])
        if self.bias is not None:
            score = score + self.bias.index_select(0, node)  # dense gradient: num_nodes floats, cheap
        score = upcast(score)
        # log sigmoid(+-(h . q_i + b_i)): + for bit 1, - for bit 0.
        log_sig = F.logsigmoid(torch.where(p["bit"].index_select(0, entry), score, -score))
        if not p["multi_code"]:
            log_p = log_sig.new_zeros(N).index_add_(0, row, log_sig)
        else:
            # One segment per (target, code); an ignored target keeps one empty code (log-prob 0).
            n_codes = p["word_codes"][t].masked_fill(ignore, 1)
            code_ends = n_codes.cumsum(0)
            S = int(code_ends[-1]) if N else 0
            code = (code_ends - n_codes).index_select(0, row) + p["code"].index_select(0, entry)
            log_code = log_sig.new_zeros(S).index_add_(0, code, log_sig)  # log prob of each code
            owner = torch.repeat_interleave(rows, n_codes, output_size=S)
            # Segment logsumexp over each target's codes; the max only stabilises, so no gradient.
            top = log_code.new_full((N,), -math.inf).scatter_reduce_(0, owner, log_code.detach(), "amax")
            total = log_code.new_zeros(N).index_add_(0, owner, (log_code - top.index_select(0, owner)).exp())
            log_p = top + total.log()
        return (-log_p).masked_fill(ignore, 0.0).view(target.shape)

    def _dots(self, h: torch.Tensor, node: torch.Tensor, row: torch.Tensor,
              ends: torch.Tensor) -> torch.Tensor:
        """``h[row[e]] . q[node[e]]`` for steps grouped by row, row r's ending at ``ends[r]``; no row may name
        a node twice (the sparse kernels' CSR matrix holds each (row, node) once)."""
        crow = torch.cat([ends.new_zeros(1), ends])
        return _PathScores.apply(self.weight, h.to(self.weight.dtype), node, row, crow, self.sparse,
                                 self._block(h.shape[-1]))

    # Bytes of one (steps, D) block of the CPU training path (None: one pass). Small blocks stay in
    # cache and reuse one buffer, where (all steps, D) tensors would be fresh allocations of tens of
    # MB that glibc maps anew and page-faults on every step (2-3x slower at 2048 tokens, D=256).
    block_bytes: int | None = 1 << 20
    #: The devices that take that path: a model on ``meta`` that stands for one on a CPU (the training-memory
    #: estimate, :mod:`hf_nlm.training.memory`) adds ``"meta"``.
    blocked_devices: tuple[str, ...] = ("cpu",)

    #: The dtypes whose training path takes the sparse kernels of :class:`_PathScores` (those torch's
    #: ``sampled_addmm`` takes); other dtypes, and the ``meta`` device, gather the rows in blocks.
    sparse_kernel_dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64)

    def _block(self, D: int) -> int | None:
        """Steps per block of the gathering path; 0: the sparse kernels."""
        if self.weight.dtype in self.sparse_kernel_dtypes and self.weight.device.type != "meta":
            return 0
        if self.block_bytes is None or self.weight.device.type not in self.blocked_devices:
            return None  # accelerators: one pass, as many steps as possible per kernel
        return max(1, self.block_bytes // max(1, D * self.weight.element_size()))

    def _paths(self) -> dict:
        """The flat per-word paths ``nll`` gathers from, derived from the buffers (cached).

        Word w's steps are ``node[word_start[w] : word_start[w] + word_length[w]]`` (with ``bit``, and
        ``code``, the rank of the code the step belongs to among w's ``word_codes[w]`` codes), code
        after code, root first. For a tree where a word may have several codes, its distinct nodes are
        ``distinct_node[distinct_start[w] : distinct_start[w] + distinct_length[w]]`` (ascending), and
        ``distinct_of_step`` gives each step's node's place among them.
        """
        return self._derived("_paths_cache", self._build_paths)

    def _build_paths(self) -> dict:
        with torch.no_grad():
            V, C, L = self.tree_nodes.shape
            mask = self.tree_mask.bool()
            present = mask.any(-1)  # (V, C): which code slots exist
            rank = present.long().cumsum(1) - 1  # code slots need not be packed at the front
            length = mask.sum((1, 2))
            word_codes = present.sum(1)
            paths = {
                "node": self.tree_nodes[mask],
                "bit": self.tree_bits[mask].bool(),
                "code": rank[:, :, None].expand(V, C, L)[mask],
                "word_start": length.cumsum(0) - length,
                "word_length": length,
                "word_codes": word_codes,
                "multi_code": bool((word_codes > 1).any()),
            }
            if paths["multi_code"]:
                word = torch.repeat_interleave(torch.arange(V, device=length.device), length)
                # (word, node) pairs, sorted: each word's distinct nodes, the words in order.
                pairs, place = torch.unique(word * self.weight.shape[0] + paths["node"], return_inverse=True)
                distinct = torch.bincount(pairs // self.weight.shape[0], minlength=V)
                paths.update(distinct_node=pairs % self.weight.shape[0], distinct_length=distinct,
                             distinct_start=distinct.cumsum(0) - distinct,
                             distinct_of_step=place - (distinct.cumsum(0) - distinct)[word])
        return paths

    def _derived(self, slot: str, build) -> dict:
        """The tables ``build`` derives from the tree buffers, cached in ``slot`` until the buffers change.

        Under ``torch.compile`` / ``torch.export`` the buffers are symbolic and the tables (whose sizes
        depend on the tree) cannot be derived: the cache, filled when the tree was set or loaded, is
        used as it is (constants of the traced graph).
        """
        cache = getattr(self, slot, None)  # absent from heads pickled before it existed
        if torch.compiler.is_compiling():
            if cache is None:
                raise RuntimeError(
                    "TreeSoftmaxHead: run the model once eagerly before torch.compile / torch.export, so "
                    "that the tables derived from its tree exist"
                )
            return cache[1]
        key = self._cache_key()
        if cache is not None and cache[0] == key:
            return cache[1]
        self._check_has_tree()
        value = build()
        setattr(self, slot, (key, value))
        return value

    def warm_cache(self) -> None:
        """Derive the tree's tables now (when it holds a tree), so that tracing finds them."""
        if self.tree_mask.device.type == "meta" or torch.compiler.is_compiling():
            return  # nothing to derive from yet (from_pretrained's empty model), or nothing concrete
        if bool(self.tree_mask.any()):
            self._paths()
            self._structure()

    def _cache_key(self) -> tuple:
        # The buffers' identity and version: load_state_dict or .to(device) invalidate derived tables.
        return tuple(
            (b.data_ptr(), b._version, b.device) for b in (self.tree_nodes, self.tree_bits, self.tree_mask)
        )

    def _check_has_tree(self) -> None:
        if not bool(self.tree_mask.any()):
            raise ValueError(
                "this TreeSoftmaxHead holds no tree yet (it was built from shapes only): load a state dict / "
                "checkpoint that contains tree_nodes, tree_bits, tree_mask (or two of them), or build the "
                "model with tree=..."
            )
        nodes = self.tree_nodes[self.tree_mask.bool()]
        if bool((nodes < 0).any() or (nodes >= self.num_nodes).any()):
            raise ValueError(
                f"this TreeSoftmaxHead's tree_nodes name nodes outside [0, {self.num_nodes}): its buffers "
                "hold no valid tree (uninitialised memory, or a state dict of another tree shape)"
            )

    # ------------------------------------------------------------------ full distribution
    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Exact log-probabilities (normalised by construction; log_softmax leaves them unchanged)."""
        return self.log_probs(hidden)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log P(w | h) for every word, shape ``hidden.shape[:-1] + (|V|,)``.

        All node scores at once (s = q h + b, one matmul against every internal node), then the cost
        -log P of each edge (node, bit): softplus(-s) for bit 1, softplus(s) = softplus(-s) + s for bit 0.
        Top down over the tree levels, each edge adds the cost of the edge that leads to its node (one
        gather per level, from a level already complete), so a leaf's edge ends up holding its code's whole
        -log P; a word's leaves are then gathered (one gather over |V| x max_codes) and combined by
        logsumexp. The work per row after the matmul is O(num_nodes), where a gather over each word's
        padded path would be O(|V| x max_depth) (several times the matmul on a CPU).
        Rows go in blocks of :attr:`chunk_size`, which bounds the (rows, 2, num_nodes) edge table; without
        autograd the scores, costs and result are written in place (``out=``); the per-level gathers are
        the only other temporaries.
        """
        s = self._structure()
        lead = hidden.shape[:-1]
        h = hidden.reshape(-1, hidden.shape[-1])
        weight, bias = self.weight, self.bias
        if s["node_order"] is not None:  # buffers not stored level by level (never from __init__)
            weight = weight.index_select(0, s["node_order"])
            bias = None if bias is None else bias.index_select(0, s["node_order"])
        h = h.to(weight.dtype)
        params = (h, weight) if bias is None else (h, weight, bias)
        if torch.is_grad_enabled() and any(t.requires_grad for t in params):
            # Differentiable: the same computation without out= arguments (which autograd refuses).
            chunks = [
                self._log_probs_chunk(h[i : i + self.chunk_size], weight, bias, s)
                for i in range(0, h.shape[0], self.chunk_size)
            ]
            out = torch.cat(chunks) if chunks else upcast(h).new_zeros(0, self.vocab_size)
        else:
            out = upcast(h).new_empty(h.shape[0], self.vocab_size)
            for i in range(0, h.shape[0], self.chunk_size):
                rows = slice(i, i + self.chunk_size)
                self._log_probs_chunk(h[rows], weight, bias, s, out[rows])
        return out.view(*lead, self.vocab_size)

    # Rows per block of log_probs: larger blocks make the matmul and the per-level gathers more efficient.
    chunk_size = 64

    def _log_probs_chunk(
        self,
        h: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        s: dict,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """log P(w | h) of the rows ``h`` into ``out`` (written in place, no autograd), or returned."""
        n, M = h.shape[0], self.num_nodes
        dtype = upcast(h[:0]).dtype
        # softplus(x) returns x above the threshold, where log1p(exp(-x)) is below the dtype's resolution.
        threshold = 20.0 if dtype != torch.float64 else 40.0
        # edge[:, bit, node]: the cost -log P of reaching that edge; first the node's own factor.
        if out is None:
            neg_score = -upcast(F.linear(h, weight, bias))
            cost_1 = F.softplus(neg_score, threshold=threshold)  # -log sigmoid(s)
            edge = torch.stack((cost_1 - neg_score, cost_1), dim=1)  # bit 0: -log sigmoid(-s)
        else:
            edge = out.new_empty(n, 2, M)
            neg_score = edge[:, 0]  # -(q h + b), overwritten by bit 0's cost below
            if weight.dtype != dtype:  # half precision: scores upcast before the softplus
                neg_score.copy_(F.linear(h, weight, bias)).neg_()
            elif bias is None:
                torch.mm(h, weight.t(), out=neg_score).neg_()
            else:
                torch.addmm(bias, h, weight.t(), beta=-1, alpha=-1, out=neg_score)
            torch._C._nn.softplus(neg_score, 1.0, threshold, out=edge[:, 1])
            torch.sub(edge[:, 1], neg_score, out=edge[:, 0])
        flat = edge.view(n, 2 * M)
        for (start, end), parent_edge in zip(s["level_bounds"], s["level_parent_edge"], strict=True):
            edge[:, :, start:end] += flat.index_select(1, parent_edge)[:, None, :]
        V, C = self.vocab_size, s["max_codes"]
        if C == 1:
            if out is None:
                return -flat.index_select(1, s["leaf_edge"])
            return torch.index_select(flat, 1, s["leaf_edge"], out=out).neg_()
        leaf = (-flat.index_select(1, s["leaf_edge"])).view(n, V, C)
        leaf = leaf.masked_fill(~s["code_mask"], float("-inf"))
        return leaf.logsumexp(-1) if out is None else torch.logsumexp(leaf, dim=-1, out=out)

    def _structure(self) -> dict:
        """Level blocks, parent-edge and leaf-edge indices derived from the buffers (cached).

        Derived rather than stored so that the saved state is just the tree (see :meth:`_cache_key`).
        """
        return self._derived("_structure_cache", self._build_structure)

    def _build_structure(self) -> dict:
        with torch.no_grad():
            V, C, L = self.tree_nodes.shape
            M, dev = self.num_nodes, self.tree_nodes.device
            nodes = self.tree_nodes.reshape(V * C, L)
            bits = self.tree_bits.reshape(V * C, L).long()
            mask = self.tree_mask.reshape(V * C, L).bool()
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
            # Edge (bit, node) of a depth-ordered node p is column bit * M + p of the (n, 2 M) edge table.
            edge_of_node = parent_bit * M + pos[parent]  # the edge leading into each node
            # The root's level (depth 0) has no parent edge to add.
            bounds = [(starts[d], starts[d + 1]) for d in range(1, len(counts))]
            level_parent_edge = [edge_of_node[order[a:b]] for a, b in bounds]
            length = mask.sum(1)
            last = (length - 1).clamp_min(0).unsqueeze(1)
            leaf_node = nodes.gather(1, last).squeeze(1)
            leaf_bit = bits.gather(1, last).squeeze(1)
            structure = {
                "level_bounds": bounds,
                "level_parent_edge": level_parent_edge,
                "leaf_edge": leaf_bit * M + pos[leaf_node],
                "code_mask": (length > 0).view(V, C),
                "max_codes": C,
                "node_order": None if identity else order,
            }
        return structure

    def extra_repr(self) -> str:
        V, C, L = self.tree_nodes.shape
        return (
            f"in_features={self.in_features}, vocab_size={V}, num_nodes={self.num_nodes}, "
            f"max_codes={C}, max_depth={L}, bias={self.bias is not None}"
        )


def _warm_after_load(module: TreeSoftmaxHead, incompatible_keys) -> None:
    if module.tree_mask.device.type != "meta" and bool(module.tree_mask.any()):
        # A loaded tree, which init_weights must keep (transformers' mark of loaded tensors).
        for buffer in (module.tree_nodes, module.tree_bits, module.tree_mask):
            buffer._is_hf_initialized = True
    module.warm_cache()  # a loaded tree's tables, ready for tracing


class _PathScores(torch.autograd.Function):
    """``score[e] = weight[node[e]] . hidden[row[e]]``: one dot product per path step.

    The steps, grouped by row (``crow``: where each row's steps start, as a CSR matrix's row pointers),
    are the nonzeros of an N x num_nodes sparse matrix S. The forward is a sampled product
    (``torch.sparse.sampled_addmm``: only the dots at S's nonzeros), the backward two sparse-dense
    products: dL/dh = S_g @ weight and, for the touched nodes only, dL/dq = S_g^T @ h (S_g: S holding
    the upstream gradient), each one ``embedding_bag`` weighted sum. No (steps, D) tensor is built:
    each kernel reads the node rows and hidden rows where they lie (the nodes near the root, on most
    paths, stay in cache), and no num_nodes x D tensor either, unless the gradient must be a fresh
    dense one (see ``backward``).

    With ``block`` 0 it takes those kernels; otherwise (dtypes they do not take, the ``meta`` device) the
    same dots come from gathering the rows, ``block`` steps at a time (``None``: all at once), into
    buffers reused across blocks; the backward regathers them and scatters the gradients.
    """

    @staticmethod
    def forward(ctx, weight, hidden, node, row, crow, sparse, block):
        # weight and hidden share a dtype (nll casts h), so every product below is taken in it.
        ctx.csr = block == 0
        ctx.sparse, ctx.block = sparse, block
        ctx.save_for_backward(weight, hidden, node, row, crow)
        if ctx.csr:
            ones = weight.new_ones(()).expand(node.shape[0])
            pattern = _csr(crow, node, ones, hidden.shape[0], weight.shape[0])
            return torch.sparse.sampled_addmm(pattern, hidden, weight.t(), beta=0.0).values()
        E, D = node.shape[0], weight.shape[1]
        block = max(E, 1) if block is None else block
        score = weight.new_empty(E)
        q_buf = weight.new_empty(min(block, E), D)
        h_buf = weight.new_empty(min(block, E), D)
        for a in range(0, E, block):
            b = min(a + block, E)
            q = torch.index_select(weight, 0, node[a:b], out=q_buf[: b - a])
            h = torch.index_select(hidden, 0, row[a:b], out=h_buf[: b - a])
            torch.sum(q.mul_(h), dim=1, out=score[a:b])
        return score

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_score):
        """The node gradient as a sparse tensor of the touched rows, each once (nodes near the root are on
        almost every path): with ``sparse``, and also when ``weight.grad`` already holds a dense gradient,
        which autograd then adds it into in place (O(touched rows), no num_nodes x D temporary or
        zero-fill). Otherwise (no gradient yet, dense mode) a dense num_nodes x D tensor, as any dense
        parameter gradient."""
        weight, hidden, node, row, crow = ctx.saved_tensors
        need_w, need_h = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        (M, D), E = weight.shape, node.shape[0]
        g = grad_score.contiguous()
        existing = weight.grad if weight.is_leaf else None  # a non-leaf holds no .grad
        into_existing = (existing is not None and existing.layout == torch.strided
                         and existing.shape == weight.shape and existing.dtype == weight.dtype)
        sparse_w = ctx.sparse or into_existing
        grad_w = grad_h = None
        if need_w:
            # The touched nodes (ascending) and, for each step, its node's rank among them.
            touched = torch.zeros(M, dtype=torch.bool, device=node.device).index_fill_(0, node, True)
            rows = touched.nonzero().squeeze(1)
            into = touched.cumsum(0).index_select(0, node) - 1
        if ctx.csr:
            # Both are CSR x dense products; embedding_bag's weighted sums (one bag per row of S_g, or of
            # S_g^T) take them several times faster than torch's sparse-dense product on a CPU.
            if need_h:
                grad_h = F.embedding_bag(node, weight, crow, mode="sum", per_sample_weights=g,
                                         include_last_offset=True)
            if need_w:
                # S_g^T, one bag per touched node: the steps sorted by node (stable: by row within a node).
                order = torch.argsort(into, stable=True)
                counts = torch.bincount(into, minlength=rows.shape[0])
                starts = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
                grad_rows = F.embedding_bag(row.index_select(0, order), hidden, starts, mode="sum",
                                            per_sample_weights=g.index_select(0, order),
                                            include_last_offset=True)
        else:
            block = max(E, 1) if ctx.block is None else ctx.block
            if need_h:
                grad_h = torch.zeros_like(hidden)
            if need_w:
                grad_rows = weight.new_zeros(rows.shape[0], D)
            buf = weight.new_empty(min(block, E), D)
            for a in range(0, E, block):
                b = min(a + block, E)
                g_ab = g[a:b, None]
                if need_h:
                    q = torch.index_select(weight, 0, node[a:b], out=buf[: b - a])
                    grad_h.index_add_(0, row[a:b], q.mul_(g_ab))
                if need_w:
                    h = torch.index_select(hidden, 0, row[a:b], out=buf[: b - a])
                    grad_rows.index_add_(0, into[a:b], h.mul_(g_ab))
        if need_w:
            if sparse_w:
                grad_w = torch.sparse_coo_tensor(rows[None], grad_rows, (M, D), check_invariants=False,
                                                 is_coalesced=True)
            else:
                grad_w = weight.new_zeros(M, D).index_copy_(0, rows, grad_rows)
        return grad_w, grad_h, None, None, None, None, None


def _csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """The rows x cols CSR matrix with row pointers ``crow``, column indices ``col`` and ``values``."""
    with warnings.catch_warnings():  # torch flags CSR support as beta on first use
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, (rows, cols), check_invariants=False)
