"""One place that turns a model config's head fields into an output head.

Every body (NPLM, LBL, HLBL, ...) carries the same head fields in its config:

* ``head``: ``"softmax"`` (full softmax), ``"split"`` (split softmax with tombstones, Merity et al.
  2018 / seed 001 sec. 5.3) or ``"tree"`` (binary tree softmax, Morin & Bengio 2005;
  Mnih & Hinton 2008);
* ``cutoffs``: the split softmax's [s_1, ..., s_(m-1)] (``head="split"`` only);
* ``tree_num_nodes``, ``tree_max_codes``, ``tree_max_depth``: the shape of the word tree
  (``head="tree"`` only; see :meth:`TreeSoftmaxHead.tree_shape`). The tree itself lives in the
  head's persistent buffers (saved in ``model.safetensors``); the config records its shape so that
  ``from_pretrained`` can build an empty head of the right size before the weights load.

:func:`check_head_config` validates these fields (called by each config's ``__post_init__``),
:func:`build_head` builds the head, :func:`init_head` initialises it and :func:`tree_config_fields`
gives the fields that describe a tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from ..trees import WordTree
from .softmax import SoftmaxHead
from .split import SplitSoftmaxHead
from .tree import TreeSoftmaxHead

HEADS = ("softmax", "split", "tree")
TREE_FIELDS = ("tree_num_nodes", "tree_max_codes", "tree_max_depth")


def check_cutoffs(cutoffs: Sequence[int], vocab_size: int, owner: str = "cutoffs") -> None:
    """Raise ValueError unless ``cutoffs`` is strictly increasing inside (0, vocab_size)."""
    prev = 0
    for c in cutoffs:
        if not 0 < c < vocab_size:
            raise ValueError(
                f"{owner}: cutoff {c} is outside (0, vocab_size={vocab_size}); cutoffs are the split softmax's "
                f"cluster boundaries [s_1, ..., s_(m-1)] over a frequency-sorted vocabulary, got {list(cutoffs)}"
            )
        if c <= prev:
            raise ValueError(f"{owner}: cutoffs must be strictly increasing, but {c} follows {prev}: {list(cutoffs)}")
        prev = c


def tree_config_fields(tree: WordTree) -> dict[str, int]:
    """The config fields that describe ``tree``'s shape: ``{"tree_num_nodes": ..., ...}``."""
    shape = TreeSoftmaxHead.tree_shape(tree)
    return {
        "tree_num_nodes": shape["num_nodes"],
        "tree_max_codes": shape["max_codes"],
        "tree_max_depth": shape["max_depth"],
    }


def check_head_config(config, owner: str) -> None:
    """Validate a config's head fields; ``owner`` (e.g. ``"NPLMConfig"``) starts the error messages."""
    if config.head not in HEADS:
        raise ValueError(f"{owner}.head must be one of {', '.join(HEADS)}; got {config.head!r}")
    if config.head == "split":
        if config.cutoffs is None:
            raise ValueError(f"{owner}: head='split' needs cutoffs=[s_1, ..., s_(m-1)] (e.g. [2000, 10000])")
        check_cutoffs(config.cutoffs, config.vocab_size, owner=f"{owner}.cutoffs")
    elif config.cutoffs is not None:
        raise ValueError(f"{owner}.cutoffs applies to head='split' only, but head={config.head!r}")
    shape = {name: getattr(config, name) for name in TREE_FIELDS}
    given = [name for name, value in shape.items() if value is not None]
    if config.head == "tree":
        # All three, or none: none means the tree comes with the model (``tree=`` / ``set_tree``).
        if given and len(given) != len(TREE_FIELDS):
            missing = [name for name in TREE_FIELDS if shape[name] is None]
            raise ValueError(
                f"{owner}: head='tree' needs the tree's whole shape ({', '.join(TREE_FIELDS)}); missing {missing}. "
                "hf_nlm.heads.tree_config_fields(tree) gives all three"
            )
        for name in given:
            if shape[name] < 1:
                raise ValueError(f"{owner}.{name} must be >= 1, got {shape[name]}")
        if given and shape["tree_num_nodes"] < config.vocab_size - 1:
            raise ValueError(
                f"{owner}.tree_num_nodes={shape['tree_num_nodes']} is too small: a binary tree over "
                f"vocab_size={config.vocab_size} words has at least {config.vocab_size - 1} internal nodes"
            )
    elif given:
        raise ValueError(f"{owner}: {', '.join(given)} apply to head='tree' only, but head={config.head!r}")
    if config.head == "tree" and getattr(config, "tie_word_embeddings", False):
        raise ValueError(
            f"{owner}: tie_word_embeddings=True needs a softmax or split head; a tree head's node vectors q_i "
            "are not word vectors. Set tie_word_embeddings=False"
        )


def has_tree_shape(config) -> bool:
    return all(getattr(config, name) is not None for name in TREE_FIELDS)


def build_head(config, in_features: int, tree: WordTree | None = None) -> nn.Module:
    """The output head ``config`` asks for, reading vectors of size ``in_features``.

    With ``head="tree"``: ``tree`` fills the head (its shape must match the config's tree fields when
    those are set); without ``tree`` the head is built empty from the config's tree shape, to be
    filled by ``load_state_dict`` / ``from_pretrained``.
    """
    V = config.vocab_size
    if tree is not None and config.head != "tree":
        raise ValueError(f"a word tree was given but the config's head is {config.head!r}, not 'tree'")
    if config.head == "softmax":
        return SoftmaxHead(in_features, V)
    if config.head == "split":
        return SplitSoftmaxHead(in_features, V, config.cutoffs)
    if config.head != "tree":
        raise ValueError(f"unknown head {config.head!r}; expected one of {', '.join(HEADS)}")
    if tree is not None:
        if tree.vocab_size != V:
            raise ValueError(f"the word tree covers {tree.vocab_size} words but the config's vocab_size is {V}")
        if has_tree_shape(config):
            want = {name: getattr(config, name) for name in TREE_FIELDS}
            have = tree_config_fields(tree)
            if want != have:
                raise ValueError(
                    f"tree shape mismatch: the config says {want} but the given tree has {have}; "
                    "use model.set_tree(tree) to replace the tree of a model"
                )
        return TreeSoftmaxHead(in_features, tree)
    if not has_tree_shape(config):
        raise ValueError(
            "head='tree' needs a word tree: pass tree=... when building the model (e.g. "
            "hf_nlm.trees.random_tree(vocab_size)), or set the config's tree shape "
            f"({', '.join(TREE_FIELDS)}) to load a saved tree"
        )
    return TreeSoftmaxHead(
        in_features,
        vocab_size=V,
        num_nodes=config.tree_num_nodes,
        max_codes=config.tree_max_codes,
        max_depth=config.tree_max_depth,
    )


def init_head(head: nn.Module, initializer_range: float, init=nn.init) -> None:
    """Uniform(+-initializer_range) weights, zero biases, for any head of :mod:`hf_nlm.heads`.

    ``init`` is the module of init functions to use (``transformers.initialization`` inside a
    model's ``_init_weights``, which skips tensors already loaded from a checkpoint).
    """
    for p in head.parameters(recurse=False):
        if p.ndim >= 2:
            init.uniform_(p, -initializer_range, initializer_range)
        else:
            init.zeros_(p)


__all__ = [
    "HEADS",
    "TREE_FIELDS",
    "build_head",
    "check_cutoffs",
    "check_head_config",
    "has_tree_shape",
    "init_head",
    "tree_config_fields",
]
