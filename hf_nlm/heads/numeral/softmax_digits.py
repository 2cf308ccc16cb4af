"""``"softmax_digits"``: the softmax with digit embeddings of Spithourakis & Riedel ("Numeracy for
Language Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018, sec. 3.1).

The output embedding of an in-vocabulary numeral s is its token embedding plus a character-RNN
encoding of its digits, e_out(s) = E_out[s] + charRNN(digits(s)) (a sum, not a concatenation), so
numerals that share digits share evidence; words keep E_out[s]. Then p(s | h) = softmax(b + e_out h),
an exact full-vocabulary distribution.
"""

from __future__ import annotations

import torch
from torch import nn

from ...tokenization.numerals import (
    DIGIT_PAD,
    DIGITS_WIDTH,
    NUM_DIGIT_SYMBOLS,
    canonical_digits,
    encode_digits,
)
from ..base import refuse_arguments, register_head, write_unless_loaded
from ..softmax import SoftmaxHead
from .common import kept_numerals, numeral_vocab_of, sorted_numerals


@register_head("softmax_digits", place=1)  # the numeral heads in the paper's order: sec. 3.1
class DigitSoftmaxHead(SoftmaxHead):
    """Softmax whose numeral rows add a character-RNN encoding of the numeral's digits (sec. 3.1).

    ``weight`` / ``bias`` are the softmax head's (|V| x D, |V|; tieable to the input embedding). The
    digits of every in-vocabulary numeral (ids ``numeral_ids``, digit rows ``numeral_digits`` over
    :data:`~hf_nlm.tokenization.numerals.DIGIT_SYMBOLS`, both buffers saved with the weights) are read
    by an LSTM cell over digit embeddings of size D; its state at the end marker is added to the
    numeral's row. ``<unk_num>`` has no digits and keeps its plain row.

    ``resize`` follows a vocabulary resized at its end, as the softmax head does: the numerals keep their
    ids and digits, and a numeral whose id is cut leaves ``numeral_vocab`` with its row (a size that would
    cut every numeral is refused).
    """

    def __init__(self, in_features: int, vocab_size: int, numeral_vocab: dict[str, int]) -> None:
        super().__init__(in_features, vocab_size)
        self.numeral_vocab = dict(numeral_vocab)
        numerals = [(token, i) for token, i in sorted_numerals(numeral_vocab)
                    if canonical_digits(token) is not None]
        self._numeral_rows = (
            [i for _, i in numerals],
            [encode_digits(canonical_digits(token)) for token, _ in numerals],
        )
        self.digit_embedding = nn.Embedding(NUM_DIGIT_SYMBOLS, in_features, padding_idx=DIGIT_PAD)
        self.digit_rnn = nn.LSTMCell(in_features, in_features)
        self.register_buffer("numeral_ids", torch.tensor(self._numeral_rows[0], dtype=torch.long).reshape(-1))
        self.register_buffer(
            "numeral_digits", torch.tensor(self._numeral_rows[1], dtype=torch.long).reshape(-1, DIGITS_WIDTH)
        )

    @classmethod
    def from_config(cls, config, in_features: int, **kwargs) -> DigitSoftmaxHead:
        refuse_arguments(config, kwargs)
        return cls(in_features, config.vocab_size,
                   numeral_vocab_of(config, type(config).__name__, "softmax_digits"))

    @classmethod
    def check_config(cls, config, owner: str) -> None:
        numeral_vocab_of(config, owner, "softmax_digits")

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        bound = self.in_features**-0.5  # PyTorch's own LSTM initialisation
        for p in self.digit_rnn.parameters():
            init.uniform_(p, -bound, bound)
        # The buffers are fixed by numeral_vocab: written again where they were not loaded (a model
        # built on the meta device by from_pretrained has them from the checkpoint instead).
        ids, digits = self._numeral_rows
        write_unless_loaded(self.numeral_ids, torch.tensor(ids, dtype=torch.long).reshape(-1))
        write_unless_loaded(self.numeral_digits,
                            torch.tensor(digits, dtype=torch.long).reshape(-1, DIGITS_WIDTH))

    def check_resize(self, vocab_size: int) -> None:
        kept_numerals(self.numeral_vocab, vocab_size, type(self).__name__)

    def resize(self, vocab_size: int, mean_init: bool = True) -> None:
        """Rows added (the mean of the old rows with ``mean_init``) or cut at the end; the numeral rows
        kept keep their digits."""
        self.numeral_vocab = kept_numerals(self.numeral_vocab, vocab_size, type(self).__name__)
        super().resize(vocab_size, mean_init)
        # The digit rows are in id order: the numerals kept are the first ones.
        n = sum(i < vocab_size for i in self._numeral_rows[0])
        self._numeral_rows = (self._numeral_rows[0][:n], self._numeral_rows[1][:n])
        self.numeral_ids = self.numeral_ids[:n].clone()
        self.numeral_digits = self.numeral_digits[:n].clone()

    def digit_encodings(self) -> torch.Tensor:
        """charRNN(digits(s)) for every numeral row: the LSTM's output at the end marker, (n, D)."""
        digits = self.numeral_digits
        if digits.shape[0] == 0:
            return self.weight.new_zeros(0, self.in_features)
        end = (digits != DIGIT_PAD).sum(dim=1) - 1  # position of the end marker in each row
        steps = digits.shape[1] if torch.compiler.is_compiling() else int(end.max()) + 1
        x = self.digit_embedding(digits)
        h = c = x.new_zeros(digits.shape[0], self.in_features)
        encoding = h
        for t in range(steps):  # all numerals at once, one digit position at a time
            h, c = self.digit_rnn(x[:, t], (h, c))
            encoding = torch.where((end == t)[:, None], h, encoding)  # each row's state at its end marker
        return encoding

    def output_embeddings(self) -> torch.Tensor:
        """e_out: the word matrix with each numeral row plus its digit encoding, (|V|, D). The softmax
        head's ``forward`` and fused ``nll`` read it, so the digit RNN trains through the fused loss."""
        return self.weight.index_add(0, self.numeral_ids, self.digit_encodings().to(self.weight.dtype))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, numerals_with_digits={self.numeral_ids.numel()}"



__all__ = ["DigitSoftmaxHead"]
