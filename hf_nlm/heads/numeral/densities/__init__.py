"""The distributions over numerals that the open numeral heads put in their numeral branch, each a torch
module read from h_t:

* :mod:`.digit_rnn`: :class:`DigitRNN`, the digit-RNN that spells a numeral symbol by symbol (Spithourakis &
  Riedel, ACL 2018, sec. 3.3), a distribution over canonical numeral strings (the ``drnn`` and ``combination``
  heads);
* :mod:`.gaussian_mixture`: :class:`NumeralMixture`, a mixture of Gaussians over the numeral's value, each
  written numeral the mass of the interval it stands for (sec. 3.4; the ``mog`` and ``combination`` heads);
* :mod:`.discrete_exponent`: :class:`NumeralExponentDensity`, a softmax over signed powers of ten and a
  density for the mantissa within each (Berg-Kirkpatrick & Spokoyny, EMNLP 2020; the ``dexp`` head).
"""

from .digit_rnn import DigitRNN
from .discrete_exponent import NumeralExponentDensity
from .gaussian_mixture import NumeralMixture

__all__ = ["DigitRNN", "NumeralExponentDensity", "NumeralMixture"]
