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
  with no shared parameters. The numeral branch is where the digit-RNN (``drnn``) and the mixture of
  Gaussians (``mog``, ``combination``) plug in.

Both return exact full-vocabulary distributions, so ``generate()``, perplexity and the adjusted
perplexity treat them like any other head.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..tokenization.numerals import (
    DIGIT_PAD,
    DIGITS_WIDTH,
    NUM_DIGIT_SYMBOLS,
    UNK_NUM_TOKEN,
    canonical_digits,
    decode_digits,
    encode_digits,
    numeral_features,
    parse_numeral,
)
from .base import OutputHead, Targets, refuse_arguments, register_head, upcast, write_unless_loaded
from .mixture import log_interval_probability
from .softmax import SoftmaxHead, resized_rows

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


def check_numerals_kept(numeral_vocab: dict[str, int], vocab_size: int, owner: str) -> None:
    """Raise ``ValueError`` if a vocabulary resized to ``vocab_size`` tokens would cut a numeral of
    ``numeral_vocab`` (``owner`` starts the message): resizing adds or cuts words at the end only."""
    cut = sorted((i, token) for token, i in numeral_vocab.items() if i >= vocab_size)
    if cut:
        i, token = cut[0]
        raise ValueError(
            f"{owner} cannot follow a vocabulary resized to {vocab_size} tokens: it would cut the numeral {token!r} "
            f"(id {i}) of numeral_vocab. Resizing adds or cuts words at the end of the vocabulary: keep at least "
            f"{cut[-1][0] + 1} tokens, or train a tokenizer and a new model without those numerals"
        )


@register_head("softmax_digits")
class DigitSoftmaxHead(SoftmaxHead):
    """Softmax whose numeral rows add a character-RNN encoding of the numeral's digits (sec. 3.1).

    ``weight`` / ``bias`` are the softmax head's (|V| x D, |V|; tieable to the input embedding). The
    digits of every in-vocabulary numeral (ids ``numeral_ids``, digit rows ``numeral_digits`` over
    :data:`~hf_nlm.tokenization.numerals.DIGIT_SYMBOLS`, both buffers saved with the weights) are read
    by an LSTM cell over digit embeddings of size D; its state at the end marker is added to the
    numeral's row. ``<unk_num>`` has no digits and keeps its plain row.

    ``resize`` follows a vocabulary resized by words at its end, as the softmax head does; the numerals
    keep their ids, and a size that would cut one is refused.
    """

    def __init__(self, in_features: int, vocab_size: int, numeral_vocab: dict[str, int]) -> None:
        super().__init__(in_features, vocab_size)
        self.numeral_vocab = dict(numeral_vocab)
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
        write_unless_loaded(self.numeral_ids, torch.tensor(ids, dtype=torch.long).reshape(-1))
        write_unless_loaded(self.numeral_digits, torch.tensor(digits, dtype=torch.long).reshape(-1, DIGITS_WIDTH))

    def check_resize(self, vocab_size: int) -> None:
        check_numerals_kept(self.numeral_vocab, vocab_size, type(self).__name__)

    def resize(self, vocab_size: int, mean_init: bool = True) -> None:
        """Word rows added (the mean of the old rows with ``mean_init``) or cut at the end; the numeral
        rows and their digits stay as they are."""
        self.check_resize(vocab_size)
        super().resize(vocab_size, mean_init)

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
    and the numeral branch: here ``numeral_weight`` (|N| x D) / ``numeral_bias``, a softmax over the
    vocabulary's numerals (``<unk_num>`` one of them). Buffers (saved with the weights): ``word_ids``
    and ``numeral_ids``, the vocabulary ids of each branch's rows, and ``vocab_position``, where each
    id sits in the concatenation [word branch, numeral branch]. Every token that is not a numeral,
    ``<eos>`` and ``<unk_word>`` included, is in the word branch.

    Subclasses replace the numeral branch (:meth:`build_numeral_branch`, :meth:`numeral_log_probs`)
    and, with an open vocabulary of numerals (``open_numeral_vocabulary``: the digit-RNN, the mixture of
    Gaussians), score a numeral target from its own per-target fields (:meth:`exact_numeral_log_probs`)
    rather than from its vocabulary row, so an unseen numeral gets the probability of *its* digits or
    value instead of ``<unk_num>``'s.

    ``resize`` follows a vocabulary resized by words at its end: they join the word branch, with rows the
    mean of the old word rows (zeros without ``mean_init``), so p(class | h) and the numeral branch are
    unchanged and an old word's probability changes only by the word softmax's new normalisation. The
    numerals keep their ids; a size that would cut one is refused.
    """

    returns_log_probs = True
    resizable = True
    #: The numeral branch gives every numeral a probability from its per-target fields, so a numeral
    #: outside the vocabulary is scored as itself (and is not an unknown token for the adjusted perplexity).
    open_numeral_vocabulary: ClassVar[bool] = False

    def __init__(self, in_features: int, vocab_size: int, numeral_vocab: dict[str, int], **branch_options) -> None:
        super().__init__()
        self.in_features = in_features
        self.vocab_size = vocab_size
        self.numeral_vocab = dict(numeral_vocab)
        numerals = _sorted_numerals(numeral_vocab)
        # Python lists, what init_weights writes the index buffers from again.
        self._index_lists = self.branch_indices(vocab_size, [i for _, i in numerals])
        for name, values in self._index_lists.items():
            self.register_buffer(name, torch.tensor(values, dtype=torch.long))
        num_words = len(self._index_lists["word_ids"])
        self.class_weight = nn.Parameter(torch.empty(2, in_features))
        self.class_bias = nn.Parameter(torch.zeros(2))
        self.word_weight = nn.Parameter(torch.empty(num_words, in_features))
        self.word_bias = nn.Parameter(torch.zeros(num_words))
        self.build_numeral_branch(in_features, [token for token, _ in numerals], **branch_options)
        bound = in_features**-0.5
        for p in self.parameters(recurse=False):
            if p.ndim == 2:
                nn.init.uniform_(p, -bound, bound)

    @staticmethod
    def branch_indices(vocab_size: int, numeral_ids: list[int]) -> dict[str, list[int]]:
        """The vocabulary ids of each branch's rows (``word_ids``: every id that is not a numeral, in
        order) and ``vocab_position``, where each id sits in the concatenation [word branch, numeral branch]."""
        taken = set(numeral_ids)
        word_ids = [i for i in range(vocab_size) if i not in taken]
        position = [0] * vocab_size
        for pos, i in enumerate(word_ids + numeral_ids):
            position[i] = pos
        return {"word_ids": word_ids, "numeral_ids": list(numeral_ids), "vocab_position": position}

    def build_numeral_branch(self, in_features: int, tokens: list[str]) -> None:
        """The numeral branch's parameters; ``tokens`` are the numeral rows' tokens, in row order."""
        self.numeral_weight = nn.Parameter(torch.empty(len(tokens), in_features))
        self.numeral_bias = nn.Parameter(torch.zeros(len(tokens)))

    @classmethod
    def from_config(cls, config, in_features: int, **kwargs) -> NumeralHierarchicalSoftmaxHead:
        refuse_arguments(config, kwargs)
        vocab = numeral_vocab_of(config, type(config).__name__, cls.head_name)
        return cls(in_features, config.vocab_size, vocab, **cls.branch_options(config))

    @classmethod
    def branch_options(cls, config) -> dict:
        """Construction options of the numeral branch read from the config (none for the softmax branch)."""
        return {}

    @classmethod
    def check_config(cls, config, owner: str) -> None:
        vocab = numeral_vocab_of(config, owner, cls.head_name)
        if len(set(vocab.values())) >= config.vocab_size:
            raise ValueError(f"{owner}: head={cls.head_name!r} needs words besides the numerals, but all "
                             f"{config.vocab_size} ids are numerals")

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        for name, values in self._index_lists.items():
            write_unless_loaded(getattr(self, name), torch.tensor(values, dtype=torch.long))

    def check_resize(self, vocab_size: int) -> None:
        check_numerals_kept(self.numeral_vocab, vocab_size, type(self).__name__)
        if vocab_size <= len(self.numeral_vocab):
            raise ValueError(f"{type(self).__name__} cannot follow a vocabulary resized to {vocab_size} tokens: its "
                             f"{len(self.numeral_vocab)} numerals would leave no word for the word branch")

    def resize(self, vocab_size: int, mean_init: bool = True) -> None:
        """The word branch follows a vocabulary resized by words at its end (class docstring)."""
        self.check_resize(vocab_size)
        # Word ids are in order, so the words added (or cut) at the end of the vocabulary are the word
        # branch's last rows; the numeral rows come after the word rows in vocab_position.
        self._index_lists = self.branch_indices(vocab_size, self._index_lists["numeral_ids"])
        num_words = len(self._index_lists["word_ids"])
        self.word_weight = nn.Parameter(resized_rows(self.word_weight, num_words, mean_init))
        self.word_bias = nn.Parameter(resized_rows(self.word_bias, num_words, mean_init))
        for name, values in self._index_lists.items():
            setattr(self, name, torch.tensor(values, dtype=torch.long, device=getattr(self, name).device))
        self.vocab_size = vocab_size

    # ------------------------------------------------------------------ the branches
    def class_and_word_log_probs(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log p(class | h) (..., 2) and log p(s | word, h) (..., |W|)."""
        log_class = torch.log_softmax(upcast(F.linear(hidden, self.class_weight, self.class_bias)), dim=-1)
        words = torch.log_softmax(upcast(F.linear(hidden, self.word_weight, self.word_bias)), dim=-1)
        return log_class, words

    def numeral_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p(s | numeral, h) over the numeral rows (..., |N|): a distribution over the rows."""
        return torch.log_softmax(upcast(F.linear(hidden, self.numeral_weight, self.numeral_bias)), dim=-1)

    def exact_numeral_log_probs(self, hidden: torch.Tensor, fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """log p(numeral | numeral, h) of each target from its fields, (M,); None: score by vocabulary row."""
        return None

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p(s | h) over the whole vocabulary, ``hidden.shape[:-1] + (|V|,)``."""
        log_class, words = self.class_and_word_log_probs(hidden)
        numerals = self.numeral_log_probs(hidden)
        branches = torch.cat([words + log_class[..., :1], numerals + log_class[..., 1:]], dim=-1)
        return branches.index_select(-1, self.vocab_position)

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor | Targets) -> torch.Tensor:
        """-log p(class(s) | h) - log p(s | class, h), read from the branches: the |V|-wide permutation
        of ``forward`` is never built, and the numeral branch runs on the numeral targets only."""
        targets = Targets.of(targets)
        shape = targets.ids.shape
        ids = targets.ids.reshape(-1)
        hidden = hidden.reshape(-1, hidden.shape[-1])
        keep = ids != -100
        position = self.vocab_position[torch.where(keep, ids, 0)]
        num_words = self.word_ids.numel()
        is_numeral = keep & (position >= num_words)
        log_class, words = self.class_and_word_log_probs(hidden)
        picked = log_class[:, 0] + words.gather(-1, position.clamp(max=num_words - 1)[:, None]).squeeze(-1)
        rows = torch.nonzero(is_numeral).squeeze(-1)
        if rows.numel():
            h = hidden[rows]
            fields = {name: value.reshape(-1, *value.shape[len(shape):])[rows] for name, value in targets.fields.items()}
            exact = self.exact_numeral_log_probs(h, fields)
            by_row = None if exact is not None else slice(None)  # targets scored by their vocabulary row
            if exact is not None:  # the target's own probability where its fields say it is a numeral
                numeral = fields["numeral_mask"].bool()
                in_branch = exact.to(log_class.dtype)
                if not bool(numeral.all()):  # e.g. a literal "<unk_num>" in the text
                    by_row = torch.nonzero(~numeral).squeeze(-1)
            if by_row is not None:  # the open branches' |N|-wide rows only where they are needed
                row = position[rows][by_row] - num_words
                vocab = self.numeral_log_probs(h[by_row]).gather(-1, row[:, None]).squeeze(-1).to(log_class.dtype)
                in_branch = vocab if exact is None else in_branch.index_put((by_row,), vocab)
            picked = picked.index_put((rows,), log_class[rows, 1] + in_branch)
        return torch.where(keep, -picked, torch.zeros_like(picked)).view(shape)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, words={self.word_ids.numel()}, numerals={self.numeral_ids.numel()}"


def spread_over_rows(known: torch.Tensor, scored_rows: list[int], unknown_row: int, num_rows: int) -> torch.Tensor:
    """An open numeral distribution over the numeral rows of the vocabulary: ``known`` (..., len(scored_rows))
    log-probabilities of the rows' numerals go to ``scored_rows``, the rest of the mass (every numeral
    outside the vocabulary) to ``unknown_row`` (``<unk_num>``), -inf elsewhere (a duplicate spelling)."""
    known = known.to(torch.float64)
    rest = torch.log1p(-torch.exp(torch.logsumexp(known, dim=-1)).clamp(max=1 - 1e-12))
    out = known.new_full((*known.shape[:-1], num_rows), float("-inf"))
    out[..., scored_rows] = known
    out[..., unknown_row] = rest
    return out


def first_rows(keys: list) -> list[int]:
    """The first row of each distinct key (None: ``<unk_num>`` or a token that is no numeral)."""
    seen, rows = set(), []
    for row, key in enumerate(keys):
        if key is not None and key not in seen:
            seen.add(key)
            rows.append(row)
    return rows


class OpenNumeralBranchHead(NumeralHierarchicalSoftmaxHead):
    """A hierarchical softmax whose numeral branch is a distribution over *all* numerals (sec. 3.3-3.5).

    Over the vocabulary: each numeral token gets the branch's probability of its numeral (a numeral
    that two tokens write alike, ``1,200`` and ``1200``, is given to the more frequent, lower id, the
    other gets 0), and ``<unk_num>`` the rest, the mass of every numeral outside the vocabulary; so
    ``forward`` is still a distribution over the vocabulary and ``generate()`` samples from it. A
    training or evaluation target is scored by its own fields (:meth:`exact_numeral_log_probs`), the
    probability of exactly that numeral, in the vocabulary or not.
    """

    open_numeral_vocabulary = True

    def numeral_key(self, text: str):
        """What tells two numerals apart for this branch (its canonical string, or value and precision)."""
        raise NotImplementedError

    def draw_numeral(self, hidden: torch.Tensor, do_sample: bool, generator: torch.Generator | None) -> list[str]:
        """Candidate numerals at ``hidden`` (D,), best first: one sample, or the branch's best guesses."""
        raise NotImplementedError

    @torch.no_grad()
    def write_numeral(self, hidden: torch.Tensor, do_sample: bool = False, generator: torch.Generator | None = None,
                      tries: int = 20) -> str:
        """A numeral for a generated ``<unk_num>`` at ``hidden`` (D,): drawn from the numeral branch (or its
        best guess) among the numerals *outside* the vocabulary, which is what ``<unk_num>`` stands for
        here (sampling: up to ``tries`` draws; the last one is kept if all were in the vocabulary)."""
        known = {self.numeral_key(token) for token in self.numeral_tokens}
        text = ""
        for _ in range(tries if do_sample else 1):
            for text in self.draw_numeral(hidden, do_sample, generator):
                if self.numeral_key(text) not in known:
                    return text
        return text

    @torch.no_grad()
    def best_unknown_numerals(self, hidden: torch.Tensor) -> tuple[list[str], torch.Tensor]:
        """For each row of ``hidden`` (M, D): the numeral outside the vocabulary that :meth:`write_numeral`
        writes (greedy), and log p(it | h) under the whole head, log p(numeral | h) + log p(s | numeral, h).

        That is the score of ``<unk_num>`` in a search for the likeliest text *with its numerals
        written out*: ``<unk_num>``'s own probability is the sum over every unseen numeral, but the
        text shows one of them. -inf where the decoder found no numeral outside the vocabulary.
        The decoder's best is the d-RNN's best of 16 beams or the MoG's median, not a proven maximum.
        """
        texts = [self.write_numeral(h) for h in hidden]
        known = {self.numeral_key(token) for token in self.numeral_tokens}
        unseen = [bool(text) and self.numeral_key(text) not in known for text in texts]
        written = [text if ok else "0" for text, ok in zip(texts, unseen, strict=True)]
        features = [numeral_features(text, [(0, len(text))]) for text in written]
        fields = {name: torch.as_tensor(np.concatenate([f[name] for f in features]), device=hidden.device)
                  for name in features[0]} if features else {}
        ids = self.numeral_ids[self.unknown_row].expand(len(texts))
        scores = -self.nll(hidden, Targets(ids, fields))
        return texts, scores.masked_fill(~torch.tensor(unseen, dtype=torch.bool, device=hidden.device), float("-inf"))


class DigitBranch:
    """The digit-RNN numeral branch (sec. 3.3), shared by the ``drnn`` and ``combination`` heads."""

    def build_digit_branch(self, in_features: int, tokens: list[str]) -> None:
        from .digit_rnn import DigitRNN

        self.digit_rnn = DigitRNN(in_features)
        keys = [canonical_digits(token) for token in tokens]
        self.digit_rows = first_rows(keys)
        self.digit_strings = [keys[row] for row in self.digit_rows]

    def digit_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The d-RNN's open distribution over the numeral rows (..., |N|)."""
        known = self.digit_rnn.log_prob_of_strings(hidden, self.digit_strings)
        return spread_over_rows(known, self.digit_rows, self.unknown_row, len(self.numeral_tokens))

    def digit_exact(self, hidden: torch.Tensor, fields) -> torch.Tensor | None:
        if "digit_ids" not in fields or "numeral_mask" not in fields:
            return None
        return self.digit_rnn.log_prob(hidden, fields["digit_ids"])

    def digit_draw(self, hidden, do_sample, generator) -> list[str]:
        if do_sample:
            return self.digit_rnn.sample(hidden[None], generator=generator)[0]
        # The most likely strings, best first, so that the best one outside the vocabulary is found.
        beams, _ = self.digit_rnn.beam_search(hidden[None], num_beams=16, num_return_sequences=16)
        return [text for text in beams[0] if text]

    # The numeral branch's hooks (OpenNumeralBranchHead), when the d-RNN is the whole branch.
    def numeral_log_probs(self, hidden):
        return self.digit_log_probs(hidden).to(torch.promote_types(hidden.dtype, torch.float32))

    def exact_numeral_log_probs(self, hidden, fields):
        return self.digit_exact(hidden, fields)

    def numeral_key(self, text: str):
        return canonical_digits(text)

    def draw_numeral(self, hidden, do_sample, generator):
        return self.digit_draw(hidden, do_sample, generator)


class ValueBranch:
    """The mixture-of-Gaussians numeral branch (sec. 3.4), shared by the ``mog`` and ``combination`` heads."""

    def build_value_branch(self, in_features: int, tokens: list[str], num_components: int, transform: str) -> None:
        from .mixture import NumeralMixture

        self.mixture = NumeralMixture(in_features, num_components, transform=transform)
        parsed = [parse_numeral(token) for token in tokens]
        keys = [(n.value, n.precision) if n is not None else None for n in parsed]
        self.value_rows = first_rows(keys)
        # (value, precision) of each scored row as Python numbers: what the buffers are written from again.
        self.known_numerals = [keys[r] for r in self.value_rows]
        values, precisions = self.known_numeral_tensors()
        self.register_buffer("known_values", values)
        self.register_buffer("known_precisions", precisions)

    def known_numeral_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The values (float64: exact for every numeral a float64 holds) and precisions of the scored rows."""
        values = torch.tensor([value for value, _ in self.known_numerals], dtype=torch.float64)
        precisions = torch.tensor([precision for _, precision in self.known_numerals], dtype=torch.long)
        return values, precisions

    def init_value_branch(self, init) -> None:
        """The mixture as at construction (:meth:`NumeralMixture.init_weights`) and the buffers of the scored
        rows, which follow from ``numeral_vocab``; what was loaded from a checkpoint is kept."""
        self.mixture.init_weights(init)
        values, precisions = self.known_numeral_tensors()
        write_unless_loaded(self.known_values, values)
        write_unless_loaded(self.known_precisions, precisions)

    def prepare_training(self, stream: dict[str, torch.Tensor]) -> None:
        """EM on the training split's numerals: the components' means and deviations, the mixture and
        precision biases (:meth:`NumeralMixture.initialize_from`)."""
        mask = stream.get("numeral_mask")
        if mask is None or not bool(mask.any()):
            raise ValueError(f"the {self.head_name} head fits its Gaussians to the training numerals, but the "
                             "training data has none (or no numeral fields: use a numeracy tokenizer)")
        mask = mask.bool()
        self.mixture.initialize_from(stream["numeral_value"][mask], stream["numeral_precision"][mask])

    def value_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The mixture's open distribution over the numeral rows (..., |N|)."""
        mixture = self.mixture
        means, log_stds = mixture.components()
        r = mixture.clip_precision(self.known_precisions)
        interval = log_interval_probability(
            self.known_values, r, mixture.log_weights(hidden).unsqueeze(-2), means, log_stds, mixture.transform
        )
        known = mixture.log_precision_probs(hidden).index_select(-1, r).to(interval.dtype) + interval
        return spread_over_rows(known, self.value_rows, self.unknown_row, len(self.numeral_tokens))

    def value_exact(self, hidden: torch.Tensor, fields) -> torch.Tensor | None:
        if not {"numeral_mask", "numeral_value", "numeral_precision"} <= fields.keys():
            return None
        return self.mixture.log_prob(hidden, fields["numeral_value"].to(torch.float64), fields["numeral_precision"])

    def value_draw(self, hidden, do_sample, generator) -> list[str]:
        if do_sample:
            return self.mixture.sample(hidden[None], generator=generator)[2]
        # The median, written with the most likely precision.
        precision = int(self.mixture.log_precision_probs(hidden).argmax())
        return [f"{float(self.mixture.median(hidden[None])[0]):.{precision}f}"]

    # The numeral branch's hooks (OpenNumeralBranchHead), when the mixture is the whole branch.
    def numeral_log_probs(self, hidden):
        return self.value_log_probs(hidden).to(torch.promote_types(hidden.dtype, torch.float32))

    def exact_numeral_log_probs(self, hidden, fields):
        return self.value_exact(hidden, fields)

    def numeral_key(self, text: str):
        return _value_key(text)

    def draw_numeral(self, hidden, do_sample, generator):
        return self.value_draw(hidden, do_sample, generator)


def _value_key(text: str):
    numeral = parse_numeral(text)
    return (numeral.value, numeral.precision) if numeral is not None else None


@register_head("drnn")
class DigitRNNHead(DigitBranch, OpenNumeralBranchHead):
    """Hierarchical softmax whose numeral branch is a digit-level RNN (sec. 3.3, "d-RNN"): started from
    h_t, it spells the numeral over {0-9, ., -, end} (:class:`~hf_nlm.heads.digit_rnn.DigitRNN`), an
    open vocabulary with no ``<unk_num>`` of its own. Reads the targets' ``digit_ids``."""

    target_fields = ("numeral_mask", "digit_ids")

    def build_numeral_branch(self, in_features: int, tokens: list[str]) -> None:
        self.numeral_tokens = tokens
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.build_digit_branch(in_features, tokens)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.digit_rnn.init_weights(initializer_range, init)


@register_head("mog")
class MixtureOfGaussiansHead(ValueBranch, OpenNumeralBranchHead):
    """Hierarchical softmax whose numeral branch is a mixture of Gaussians (sec. 3.4, "MoG"): a numeral
    v written with r decimals has P(r | h) sum_k pi_k(h) [Phi((v + 0.5 10^-r - mu_k) / sigma_k) -
    Phi((v - 0.5 10^-r - mu_k) / sigma_k)] (:class:`~hf_nlm.heads.mixture.NumeralMixture`; in log
    space, with the pdf x 10^-r fallback). The means and deviations are fitted by EM on the training
    numerals when training starts (:meth:`prepare_training`) and then frozen (only pi(h) and P(r | h)
    are learned). ``config.mog_components`` = K, ``config.mog_transform``: ``"log"`` (Gaussians over
    sign(v) log(1 + |v|), for numbers spanning orders of magnitude) or ``"none"`` (over v).
    Reads the targets' ``numeral_value`` and ``numeral_precision``."""

    target_fields = ("numeral_mask", "numeral_value", "numeral_precision")

    @classmethod
    def branch_options(cls, config) -> dict:
        return {"num_components": config.mog_components, "transform": config.mog_transform}

    def build_numeral_branch(self, in_features: int, tokens: list[str], num_components: int = 10,
                             transform: str = "log") -> None:
        self.numeral_tokens = tokens
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.build_value_branch(in_features, tokens, num_components, transform)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.init_value_branch(init)


@register_head("combination")
class CombinationHead(DigitBranch, ValueBranch, OpenNumeralBranchHead):
    """The combination of strategies (sec. 3.5): p(s | numeral, h) = sum_m p(m | h) p_m(s | h) over
    m in {h-softmax, d-RNN, MoG}, the strategy weights p(m | h) a softmax of h (``strategy_weight``).

    The h-softmax component is closed (a softmax over the vocabulary's numerals and ``<unk_num>``); so
    that the mixture is a distribution over all numerals, its ``<unk_num>`` mass is spread over the
    numerals outside the vocabulary as the d-RNN distributes its own there:
    p_soft(s) = p_soft(<unk_num>) p_d(s) / (1 - sum_{v in vocab} p_d(v)) for an unseen s. Reads the
    targets' ``digit_ids``, ``numeral_value`` and ``numeral_precision``; the MoG's Gaussians are fitted
    by EM when training starts, as for ``mog``."""

    target_fields = ("numeral_mask", "digit_ids", "numeral_value", "numeral_precision")
    #: The components, in the order of ``strategy_weight``'s rows.
    STRATEGIES = ("hsoftmax", "drnn", "mog")

    @classmethod
    def branch_options(cls, config) -> dict:
        return {"num_components": config.mog_components, "transform": config.mog_transform}

    def build_numeral_branch(self, in_features: int, tokens: list[str], num_components: int = 10,
                             transform: str = "log") -> None:
        self.numeral_tokens = tokens
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.numeral_weight = nn.Parameter(torch.empty(len(tokens), in_features))
        self.numeral_bias = nn.Parameter(torch.zeros(len(tokens)))
        self.strategy_weight = nn.Parameter(torch.empty(len(self.STRATEGIES), in_features))
        self.strategy_bias = nn.Parameter(torch.zeros(len(self.STRATEGIES)))
        self.build_digit_branch(in_features, tokens)
        self.build_value_branch(in_features, tokens, num_components, transform)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.digit_rnn.init_weights(initializer_range, init)
        self.init_value_branch(init)

    def strategy_log_weights(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p(m | h) for m in :data:`STRATEGIES`, (..., 3)."""
        return torch.log_softmax(upcast(F.linear(hidden, self.strategy_weight, self.strategy_bias)), dim=-1)

    def component_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Each strategy's distribution over the numeral rows, (..., |N|, 3), float64."""
        soft = torch.log_softmax(upcast(F.linear(hidden, self.numeral_weight, self.numeral_bias)), dim=-1)
        return torch.stack([soft.to(torch.float64), self.digit_log_probs(hidden), self.value_log_probs(hidden)], -1)

    def numeral_log_probs(self, hidden):
        mixed = torch.logsumexp(self.component_log_probs(hidden) + self.strategy_log_weights(hidden).unsqueeze(-2), -1)
        return mixed.to(torch.promote_types(hidden.dtype, torch.float32))

    def exact_numeral_log_probs(self, hidden, fields):
        digits, values = self.digit_exact(hidden, fields), self.value_exact(hidden, fields)
        if digits is None or values is None:
            return None
        # The h-softmax's share of this very numeral: its own row if the vocabulary holds it, else its
        # <unk_num> mass times the d-RNN's probability of it among the numerals outside the vocabulary.
        soft = torch.log_softmax(upcast(F.linear(hidden, self.numeral_weight, self.numeral_bias)), dim=-1).to(torch.float64)
        in_vocab = self.digit_rnn.log_prob_of_strings(hidden, self.digit_strings).to(torch.float64)
        outside = torch.log1p(-torch.exp(torch.logsumexp(in_vocab, -1)).clamp(max=1 - 1e-12))
        spread = soft[:, self.unknown_row] + digits.to(torch.float64) - outside
        canonical = [decode_digits(row) for row in fields["digit_ids"].tolist()]
        row_of = {text: row for text, row in zip(self.digit_strings, self.digit_rows, strict=True)}
        rows = torch.tensor([row_of.get(text, -1) for text in canonical], device=hidden.device)
        own = soft.gather(-1, rows.clamp(min=0)[:, None]).squeeze(-1)
        soft_share = torch.where(rows >= 0, own, spread)
        components = torch.stack([soft_share, digits.to(torch.float64), values.to(torch.float64)], -1)
        return torch.logsumexp(components + self.strategy_log_weights(hidden).to(torch.float64), -1)

    # numeral_key: the d-RNN's (DigitBranch), the canonical digit string.

    def draw_numeral(self, hidden, do_sample, generator):
        # Written by the open component the context trusts more (the h-softmax cannot write an unseen numeral).
        weights = self.strategy_log_weights(hidden)
        use_digits = bool(weights[1] >= weights[2])
        return (self.digit_draw if use_digits else self.value_draw)(hidden, do_sample, generator)


__all__ = [
    "CombinationHead",
    "DigitRNNHead",
    "DigitSoftmaxHead",
    "MixtureOfGaussiansHead",
    "NumeralHierarchicalSoftmaxHead",
    "OpenNumeralBranchHead",
]
