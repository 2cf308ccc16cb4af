"""Numeral-aware output heads of the numeracy LM (Spithourakis & Riedel, "Numeracy for Language
Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018, sec. 3).

The vocabulary holds words and numerals ranked together; ``config.numeral_vocab`` (token -> id,
``<unk_num>`` included) says which ids are numerals. Two heads use it:

* ``"softmax_digits"`` (sec. 3.1, "softmax + digit embeddings"): the output embedding of an
  in-vocabulary numeral s is its token embedding plus a character-RNN encoding of its digits,
  e_out(s) = E_out[s] + charRNN(digits(s)) (a sum, not a concatenation), so numerals that share
  digits share evidence; words keep E_out[s]. Then p(s | h) = softmax(b + e_out h).
* ``"hsoftmax"`` (sec. 3.2, hierarchical softmax): p(s | h) = p(c | h) p(s | c, h) with the class
  c in {word, numeral}: a two-way softmax, then a softmax over the class's own tokens, the three
  with no shared parameters. The numeral branch is where the next issue's digit-RNN and mixture of
  Gaussians plug in.

Both return exact full-vocabulary distributions, so ``generate()``, perplexity and the adjusted
perplexity treat them like any other head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..tokenization.numerals import (
    DIGIT_PAD,
    DIGITS_WIDTH,
    NUM_DIGIT_SYMBOLS,
    canonical_digits,
    encode_digits,
)
from .base import OutputHead, Targets, refuse_arguments, register_head, upcast
from .softmax import SoftmaxHead

NUMERAL_HEAD_FIELD = "numeral_vocab"


def numeral_vocab_of(config, owner: str, head: str) -> dict[str, int]:
    """``config.numeral_vocab``, which a numeral head cannot do without."""
    vocab = getattr(config, NUMERAL_HEAD_FIELD, None)
    if not vocab:
        raise ValueError(
            f"{owner}: head={head!r} needs numeral_vocab, the numeral tokens of the vocabulary and their ids "
            "(a NumeracyLMConfig built with numeral_vocab=tokenizer.numeral_vocab from a numeracy tokenizer)"
        )
    return vocab


def _sorted_numerals(vocab: dict[str, int]) -> list[tuple[str, int]]:
    """The numeral tokens by id: the order of the head's rows, independent of the dict's order."""
    return sorted(vocab.items(), key=lambda item: item[1])


@register_head("softmax_digits")
class DigitSoftmaxHead(SoftmaxHead):
    """Softmax whose numeral rows add a character-RNN encoding of the numeral's digits (sec. 3.1).

    ``weight`` / ``bias`` are the softmax head's (|V| x D, |V|; tieable to the input embedding). The
    digits of every in-vocabulary numeral (ids ``numeral_ids``, digit rows ``numeral_digits`` over
    :data:`~hf_nlm.tokenization.numerals.DIGIT_SYMBOLS`, both buffers saved with the weights) are read
    by an LSTM cell over digit embeddings of size D; its state at the end marker is added to the
    numeral's row. ``<unk_num>`` has no digits and keeps its plain row.
    """

    resizable = False  # the numeral rows are tied to the ids of numeral_vocab

    def __init__(self, in_features: int, vocab_size: int, numeral_vocab: dict[str, int]) -> None:
        super().__init__(in_features, vocab_size)
        numerals = [(token, i) for token, i in _sorted_numerals(numeral_vocab) if canonical_digits(token) is not None]
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
        return cls(in_features, config.vocab_size, numeral_vocab_of(config, type(config).__name__, "softmax_digits"))

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
        init.copy_(self.numeral_ids, torch.tensor(ids, dtype=torch.long).reshape(-1))
        init.copy_(self.numeral_digits, torch.tensor(digits, dtype=torch.long).reshape(-1, DIGITS_WIDTH))

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
        """e_out: the word matrix with each numeral row plus its digit encoding, (|V|, D)."""
        return self.weight.index_add(0, self.numeral_ids, self.digit_encodings().to(self.weight.dtype))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.output_embeddings(), self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, numerals_with_digits={self.numeral_ids.numel()}"


@register_head("hsoftmax")
class NumeralHierarchicalSoftmaxHead(OutputHead):
    """p(s | h) = p(c | h) p(s | c, h), c in {word, numeral} (sec. 3.2); no parameter is shared.

    Parameters: ``class_weight`` (2 x D) / ``class_bias``, ``word_weight`` (|W| x D) / ``word_bias``,
    ``numeral_weight`` (|N| x D) / ``numeral_bias``. Buffers (saved with the weights): ``word_ids``
    and ``numeral_ids``, the vocabulary ids of each branch's rows, and ``vocab_position``, where each
    id sits in the concatenation [word branch, numeral branch]. Every token that is not a numeral,
    ``<eos>`` and ``<unk_word>`` included, is in the word branch.
    """

    returns_log_probs = True

    def __init__(self, in_features: int, vocab_size: int, numeral_vocab: dict[str, int]) -> None:
        super().__init__()
        self.in_features = in_features
        self.vocab_size = vocab_size
        numeral_ids = [i for _, i in _sorted_numerals(numeral_vocab)]
        taken = set(numeral_ids)
        word_ids = [i for i in range(vocab_size) if i not in taken]
        position = [0] * vocab_size
        for pos, i in enumerate(word_ids + numeral_ids):
            position[i] = pos
        self._index_lists = {"word_ids": word_ids, "numeral_ids": numeral_ids, "vocab_position": position}
        for name, values in self._index_lists.items():
            self.register_buffer(name, torch.tensor(values, dtype=torch.long))
        self.class_weight = nn.Parameter(torch.empty(2, in_features))
        self.class_bias = nn.Parameter(torch.zeros(2))
        self.word_weight = nn.Parameter(torch.empty(len(word_ids), in_features))
        self.word_bias = nn.Parameter(torch.zeros(len(word_ids)))
        self.numeral_weight = nn.Parameter(torch.empty(len(numeral_ids), in_features))
        self.numeral_bias = nn.Parameter(torch.zeros(len(numeral_ids)))
        bound = in_features**-0.5
        for w in (self.class_weight, self.word_weight, self.numeral_weight):
            nn.init.uniform_(w, -bound, bound)

    @classmethod
    def from_config(cls, config, in_features: int, **kwargs) -> NumeralHierarchicalSoftmaxHead:
        refuse_arguments(config, kwargs)
        return cls(in_features, config.vocab_size, numeral_vocab_of(config, type(config).__name__, "hsoftmax"))

    @classmethod
    def check_config(cls, config, owner: str) -> None:
        vocab = numeral_vocab_of(config, owner, "hsoftmax")
        if len(set(vocab.values())) >= config.vocab_size:
            raise ValueError(f"{owner}: head='hsoftmax' needs words besides the numerals, but all "
                             f"{config.vocab_size} ids are numerals")

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        for name, values in self._index_lists.items():
            init.copy_(getattr(self, name), torch.tensor(values, dtype=torch.long))

    def branch_log_probs(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """log p(class | h) (..., 2), log p(s | word, h) (..., |W|) and log p(s | numeral, h) (..., |N|)."""
        log_class = torch.log_softmax(upcast(F.linear(hidden, self.class_weight, self.class_bias)), dim=-1)
        words = torch.log_softmax(upcast(F.linear(hidden, self.word_weight, self.word_bias)), dim=-1)
        numerals = torch.log_softmax(upcast(F.linear(hidden, self.numeral_weight, self.numeral_bias)), dim=-1)
        return log_class, words, numerals

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p(s | h) over the whole vocabulary, ``hidden.shape[:-1] + (|V|,)``."""
        log_class, words, numerals = self.branch_log_probs(hidden)
        branches = torch.cat([words + log_class[..., :1], numerals + log_class[..., 1:]], dim=-1)
        return branches.index_select(-1, self.vocab_position)

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor | Targets) -> torch.Tensor:
        """-log p(class(s) | h) - log p(s | class, h), read from the two branches: the |V|-wide
        permutation of ``forward`` (and its backward) is never built."""
        ids = Targets.of(targets).ids
        keep = ids != -100
        log_class, words, numerals = self.branch_log_probs(hidden)
        position = self.vocab_position[torch.where(keep, ids, 0)]
        num_words = words.shape[-1]
        is_numeral = position >= num_words
        in_words = words.gather(-1, position.clamp(max=num_words - 1).unsqueeze(-1)).squeeze(-1)
        in_numerals = numerals.gather(-1, (position - num_words).clamp(min=0).unsqueeze(-1)).squeeze(-1)
        picked = torch.where(is_numeral, log_class[..., 1] + in_numerals, log_class[..., 0] + in_words)
        return torch.where(keep, -picked, torch.zeros_like(picked))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, words={self.word_ids.numel()}, numerals={self.numeral_ids.numel()}"


__all__ = ["DigitSoftmaxHead", "NumeralHierarchicalSoftmaxHead"]
