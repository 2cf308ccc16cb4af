"""Output layers ("heads") shared by every body: h_t -> distribution over the next token.

:mod:`hf_nlm.heads.base` defines the interface (:class:`OutputHead`: ``forward``, ``log_probs``,
``nll``) and the registry of heads by name; a model's config picks one with its ``head`` field and
:func:`build_head` builds it. ``HEAD_REGISTRY`` (name -> class) lists the registered heads::

    from hf_nlm.heads import HEAD_REGISTRY
    list(HEAD_REGISTRY)

* ``"softmax"`` (:mod:`.softmax`): the full softmax;
* ``"split"`` (:mod:`.split`): the split softmax with tombstones (Merity et al. 2018);
* ``"tree"`` (:mod:`.tree`): the binary tree softmax (Morin & Bengio 2005; Mnih & Hinton 2008);
* the numeral heads of the numeracy LM (Spithourakis & Riedel 2018, :mod:`.numeral`):
  ``"softmax_digits"``, ``"hsoftmax"``, ``"drnn"``, ``"mog"`` and ``"combination"``, and ``"dexp"``
  (Berg-Kirkpatrick & Spokoyny 2020).

A head registers by living in this folder: importing the package imports every module under it
(subpackages included), which runs their :func:`register_head` decorators; each head gives its place in
``HEAD_REGISTRY`` there (``register_head("drnn", place=3)``), so the order does not depend on the order of the
imports. Adding a head is one file here with a ``@register_head("name")`` class and no edit elsewhere. A head
with settings of its own declares them in the same file, as a :func:`head_options` class
(:class:`~.split.SplitSoftmaxOptions`, :class:`~.tree.TreeSoftmaxOptions`,
:class:`~.numeral.mog.MixtureOfGaussiansOptions`); the configs of the models that offer the head list it among
their bases, which makes the settings config fields and ``hf-nlm train`` flags.
"""

import importlib
import pkgutil

from .base import (
    HEAD_REGISTRY,
    OutputHead,
    Targets,
    build_head,
    check_head_config,
    head_class,
    head_options,
    register_head,
)
from .numeral import (
    CombinationHead,
    DigitRNNHead,
    DigitSoftmaxHead,
    DiscreteExponentHead,
    MixtureOfGaussiansHead,
    MixtureOfGaussiansOptions,
    NumeralHierarchicalSoftmaxHead,
)
from .softmax import SoftmaxHead
from .split import SplitSoftmaxHead, SplitSoftmaxOptions, check_cutoffs, check_frequency_order
from .tree import TREE_FIELDS, TreeSoftmaxHead, TreeSoftmaxOptions, tree_config_fields


def import_head_modules() -> list[str]:
    """Import every module of this package and its subpackages, in name order, so that every head
    defined in them is registered; returns the modules' names."""
    names = [info.name for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}.")]
    for name in names:
        importlib.import_module(name)
    return names


import_head_modules()

__all__ = [
    "CombinationHead",
    "DigitRNNHead",
    "DigitSoftmaxHead",
    "DiscreteExponentHead",
    "MixtureOfGaussiansHead",
    "MixtureOfGaussiansOptions",
    "HEAD_REGISTRY",
    "NumeralHierarchicalSoftmaxHead",
    "OutputHead",
    "SoftmaxHead",
    "SplitSoftmaxHead",
    "SplitSoftmaxOptions",
    "TREE_FIELDS",
    "Targets",
    "TreeSoftmaxHead",
    "TreeSoftmaxOptions",
    "build_head",
    "check_cutoffs",
    "check_frequency_order",
    "check_head_config",
    "head_class",
    "head_options",
    "import_head_modules",
    "register_head",
    "tree_config_fields",
]
