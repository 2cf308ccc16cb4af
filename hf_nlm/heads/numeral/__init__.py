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
  (:mod:`.digit_rnn`), an open vocabulary of numerals.
* ``"mog"`` (:mod:`.mog`, sec. 3.4): the numeral branch is a mixture of Gaussians over the numeral's
  value, each written numeral the mass of the interval it stands for (:mod:`.mixture`).
* ``"combination"`` (:mod:`.combination`, sec. 3.5): the numeral branch mixes the h-softmax, the
  d-RNN and the mixture with weights predicted from h.
* ``"dexp"`` (:mod:`.dexp`; Berg-Kirkpatrick & Spokoyny, EMNLP 2020): the numeral branch is a softmax over
  signed powers of ten and a density for the mantissa within each (:mod:`.exponent`).

The open heads (``drnn``, ``mog``, ``combination``, ``dexp``) derive from :class:`OpenNumeralBranchHead`
(:mod:`.open_branch`) and hold their branches as objects they call (:class:`DigitBranch`,
:class:`ValueBranch`); :mod:`.common` has what all numeral heads share. Every head returns an exact
full-vocabulary distribution, so ``generate()``, perplexity and the adjusted perplexity treat them like
any other head.
"""

# The heads register in the paper's order of the strategies (sec. 3.1-3.5), the order HEAD_REGISTRY lists them.
from .softmax_digits import DigitSoftmaxHead  # noqa: I001
from .hsoftmax import NumeralHierarchicalSoftmaxHead
from .drnn import DigitBranch, DigitRNNHead
from .mog import MixtureOfGaussiansHead, ValueBranch
from .combination import CombinationHead
from .dexp import DiscreteExponentHead
from .common import check_numerals_kept, numeral_vocab_of, spread_over_rows
from .open_branch import OpenNumeralBranchHead

__all__ = [
    "CombinationHead",
    "DigitBranch",
    "DigitRNNHead",
    "DigitSoftmaxHead",
    "DiscreteExponentHead",
    "MixtureOfGaussiansHead",
    "NumeralHierarchicalSoftmaxHead",
    "OpenNumeralBranchHead",
    "ValueBranch",
    "check_numerals_kept",
    "numeral_vocab_of",
    "spread_over_rows",
]
