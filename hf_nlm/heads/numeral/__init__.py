"""Numeral-aware output heads of the numeracy LM (Spithourakis & Riedel, "Numeracy for Language
Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018, sec. 3).

The vocabulary holds words and numerals ranked together; ``config.numeral_vocab`` (token -> id,
``<unk_num>`` included) says which ids are numerals. One module per head, registered under the
paper's name of the strategy:

* ``"softmax_digits"`` (:mod:`.softmax_digits`, sec. 3.1, "softmax + digit embeddings"): the output
  embedding of an in-vocabulary numeral s is its token embedding plus a character-RNN encoding of its
  digits, e_out(s) = E_out[s] + charRNN(digits(s)); p(s | h) = softmax(b + e_out h).
* ``"hsoftmax"`` (:mod:`.hsoftmax`, sec. 3.2, hierarchical softmax): p(s | h) = p(c | h) p(s | c, h)
  with the class c in {word, numeral}, the numeral branch a softmax over the vocabulary's numerals.
* ``"drnn"`` (:mod:`.drnn`, sec. 3.3): the numeral branch is a digit-level RNN that spells the numeral
  (:mod:`.densities.digit_rnn`), an open vocabulary of numerals.
* ``"mog"`` (:mod:`.mog`, sec. 3.4): the numeral branch is a mixture of Gaussians over the numeral's
  value, each written numeral the mass of the interval it stands for (:mod:`.densities.gaussian_mixture`);
  its settings (``mog_components``, ``mog_transform``, ``mog_trainable``) are declared in the same file.
* ``"combination"`` (:mod:`.combination`, sec. 3.5): the numeral branch mixes the h-softmax, the
  d-RNN and the mixture with weights predicted from h.
* ``"dexp"`` (:mod:`.dexp`; Berg-Kirkpatrick & Spokoyny, EMNLP 2020): the numeral branch is a softmax over
  signed powers of ten and a density for the mantissa within each (:mod:`.densities.discrete_exponent`).

Each head gives its place in the registry (``register_head(name, place=...)``: the paper's order), so
``HEAD_REGISTRY`` lists them in that order whatever order their files are imported in.

The open heads (``drnn``, ``mog``, ``combination``, ``dexp``) derive from :class:`OpenNumeralBranchHead`
(:mod:`.open_branch`) and hold their branches as objects they call (:class:`DigitBranch`,
:class:`ValueBranch`, in the same file), each over a density of :mod:`.densities`; :mod:`.common` has what
all numeral heads share. Every head returns an exact full-vocabulary distribution, so ``generate()``,
perplexity and the adjusted perplexity treat them like any other head.
"""

from .combination import CombinationHead
from .common import kept_numerals, numeral_vocab_of, spread_over_rows
from .dexp import DiscreteExponentHead
from .drnn import DigitRNNHead
from .hsoftmax import NumeralHierarchicalSoftmaxHead
from .mog import MixtureOfGaussiansHead, MixtureOfGaussiansOptions
from .open_branch import DigitBranch, OpenNumeralBranchHead, ValueBranch
from .softmax_digits import DigitSoftmaxHead

__all__ = [
    "CombinationHead",
    "DigitBranch",
    "DigitRNNHead",
    "DigitSoftmaxHead",
    "DiscreteExponentHead",
    "MixtureOfGaussiansHead",
    "MixtureOfGaussiansOptions",
    "NumeralHierarchicalSoftmaxHead",
    "OpenNumeralBranchHead",
    "ValueBranch",
    "kept_numerals",
    "numeral_vocab_of",
    "spread_over_rows",
]
