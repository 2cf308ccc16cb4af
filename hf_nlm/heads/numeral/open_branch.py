"""The base of the numeral heads whose numeral branch is open: a distribution over every numeral, in the
vocabulary or not (Spithourakis & Riedel, "Numeracy for Language Models: Evaluating and Improving their
Ability to Predict Numbers", ACL 2018, sec. 3.3-3.5): ``drnn``, ``mog``, ``combination`` and ``dexp``; and
the two kinds of open branch such a head holds, each a density of :mod:`.densities` laid over the vocabulary's
numeral rows: :class:`DigitBranch` (a numeral told by its digit string: the d-RNN) and :class:`ValueBranch`
(a numeral told by its value and precision: the mixture of Gaussians, the discrete latent exponent).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ...tokenization.numerals import UNK_NUM_TOKEN, canonical_digits, numeral_features, parse_numeral
from ..base import Targets, write_unless_loaded
from .common import first_rows, spread_over_rows
from .densities.digit_rnn import DigitRNN
from .densities.gaussian_mixture import write_value
from .hsoftmax import NumeralHierarchicalSoftmaxHead


class OpenNumeralBranchHead(NumeralHierarchicalSoftmaxHead):
    """A hierarchical softmax whose numeral branch is a distribution over *all* numerals (sec. 3.3-3.5).

    Over the vocabulary: each numeral token gets the branch's probability of its numeral (a numeral
    that two tokens write alike, ``1,200`` and ``1200``, is given to the more frequent, lower id, the
    other gets 0), and ``<unk_num>`` the rest, the mass of every numeral outside the vocabulary; so
    ``forward`` is still a distribution over the vocabulary and ``generate()`` samples from it. A
    training or evaluation target is scored by its own fields (:meth:`exact_numeral_log_probs`), the
    probability of exactly that numeral, in the vocabulary or not.

    A subclass builds its branch in :meth:`build_open_branch`. The numeral branch's hooks
    (:meth:`numeral_log_probs`, :meth:`exact_numeral_log_probs`, :meth:`numeral_key`, :meth:`draw_numeral`)
    call ``self.branch``, the branch object of a head with one open branch (the d-RNN's
    :class:`DigitBranch`, the mixture's :class:`ValueBranch`); a head that mixes several overrides them.
    """

    open_numeral_vocabulary = True
    needed_numerals = (UNK_NUM_TOKEN,)

    def build_numeral_branch(self, in_features: int, tokens: list[str], **options) -> None:
        """The numeral rows' tokens (``numeral_tokens``), the row of ``<unk_num>`` (``unknown_row``) and the
        open branch (:meth:`build_open_branch`)."""
        self.numeral_tokens = tokens
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.build_open_branch(in_features, tokens, **options)

    def build_open_branch(self, in_features: int, tokens: list[str], **options) -> None:
        """Build the branch and register its parameters and buffers on the head."""
        raise NotImplementedError

    def cut_numeral_rows(self, num_rows: int) -> None:
        """Keep the first ``num_rows`` numeral rows: each branch object is rebuilt over the tokens kept (its
        density or d-RNN, which is not per numeral, is kept whole), the value buffers follow."""
        if hasattr(self, "numeral_weight"):  # a closed component (the combination's h-softmax)
            super().cut_numeral_rows(num_rows)
        self.numeral_tokens = self.numeral_tokens[:num_rows]
        self.unknown_row = self.numeral_tokens.index(UNK_NUM_TOKEN)
        for name, branch in list(vars(self).items()):
            if isinstance(branch, DigitBranch | ValueBranch):
                setattr(self, name, branch.over(self.numeral_tokens))
            if isinstance(branch, ValueBranch):
                values, precisions = getattr(self, name).known_numeral_tensors()
                self.known_values = values.to(self.known_values)  # (its device and dtype)
                self.known_precisions = precisions.to(self.known_precisions)

    # ------------------------------------------------------------------ the numeral branch's hooks
    def branch_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The open branch's distribution over the numeral rows, (..., |N|), float64."""
        return self.branch.log_probs(hidden)

    def numeral_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.branch_log_probs(hidden).to(torch.promote_types(hidden.dtype, torch.float32))

    def exact_numeral_log_probs(self, hidden: torch.Tensor,
                                fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        return self.branch.exact(hidden, fields)

    def numeral_key(self, text: str):
        """What tells two numerals apart for this branch (its canonical string, or value and precision)."""
        return self.branch.key(text)

    def draw_numeral(self, hidden: torch.Tensor, do_sample: bool,
                     generator: torch.Generator | None) -> list[str]:
        """Candidate numerals at ``hidden`` (D,), best first: one sample, or the branch's best guesses."""
        return self.branch.draw(hidden, do_sample, generator)

    # ------------------------------------------------------------------ writing out <unk_num>
    @torch.no_grad()
    def write_numeral(self, hidden: torch.Tensor, do_sample: bool = False,
                      generator: torch.Generator | None = None, tries: int = 20) -> str:
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
        return texts, scores.masked_fill(~torch.tensor(unseen, dtype=torch.bool, device=hidden.device),
                                         float("-inf"))


class DigitBranch:
    """The d-RNN (sec. 3.3) as a numeral branch: its distribution over all numerals, laid over the
    vocabulary's numeral rows, and the numerals it writes.

    ``rnn`` is the :class:`DigitRNN` the head registers as ``digit_rnn`` (:meth:`build`), so its parameters
    are the head's. A numeral row is scored by its canonical digit string (the first row of each string,
    ``rows`` / ``strings``; a second spelling of the same numeral gets 0); ``<unk_num>`` (``unknown_row``)
    gets the rest, every numeral outside the vocabulary.
    """

    def __init__(self, rnn: DigitRNN, tokens: list[str]) -> None:
        self.rnn = rnn
        keys = [canonical_digits(token) for token in tokens]
        self.rows = first_rows(keys)
        self.strings = [keys[row] for row in self.rows]
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.num_rows = len(tokens)

    @classmethod
    def build(cls, head: nn.Module, in_features: int, tokens: list[str]) -> DigitBranch:
        """A d-RNN reading vectors of size ``in_features``, registered on ``head`` as ``digit_rnn``, and the
        branch over the numeral rows ``tokens``."""
        head.digit_rnn = DigitRNN(in_features)
        return cls(head.digit_rnn, tokens)

    def over(self, tokens: list[str]) -> DigitBranch:
        """The branch with the same d-RNN over the numeral rows ``tokens``."""
        return DigitBranch(self.rnn, tokens)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        self.rnn.init_weights(initializer_range, init)

    @staticmethod
    def key(text: str) -> str | None:
        """What tells two numerals apart for the d-RNN: the canonical digit string."""
        return canonical_digits(text)

    def vocabulary_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p_d(s | h) of the numeral of each scored row, (..., len(rows))."""
        return self.rnn.log_prob_of_strings(hidden, self.strings)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The d-RNN's open distribution over the numeral rows (..., |N|), float64."""
        return spread_over_rows(self.vocabulary_log_probs(hidden), self.rows, self.unknown_row, self.num_rows)

    def exact(self, hidden: torch.Tensor, fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """log p_d(s | h) of each target's own digits (``digit_ids``); None without the fields."""
        if "digit_ids" not in fields or "numeral_mask" not in fields:
            return None
        return self.rnn.log_prob(hidden, fields["digit_ids"])

    def draw(self, hidden: torch.Tensor, do_sample: bool, generator: torch.Generator | None) -> list[str]:
        """One sample at ``hidden`` (D,), or the 16 most likely strings of a beam search, best first."""
        if do_sample:
            return self.rnn.sample(hidden[None], generator=generator)[0]
        # The most likely strings, best first, so that the best one outside the vocabulary is found.
        beams, _ = self.rnn.beam_search(hidden[None], num_beams=16, num_return_sequences=16)
        return [text for text in beams[0] if text]


class ValueBranch:
    """A density over numbers as a numeral branch: the mixture of Gaussians (sec. 3.4,
    :class:`~hf_nlm.heads.numeral.densities.gaussian_mixture.NumeralMixture`) or the discrete latent exponent
    (:class:`~hf_nlm.heads.numeral.densities.discrete_exponent.NumeralExponentDensity`). Its distribution over
    all numerals, each written numeral the mass of the interval it stands for, laid over the vocabulary's
    numeral rows, and the numerals it writes.

    ``density`` is the module the head registers under a name of its own (:meth:`build`: ``mixture`` for
    ``mog`` and ``combination``), so its parameters are the head's. A numeral row is scored by its value and
    precision (the first row of each, ``rows``, their ``(value, precision)`` in ``known_numerals``; a second
    spelling of the same numeral gets 0); ``<unk_num>`` (``unknown_row``) gets the rest, every numeral
    outside the vocabulary. The head holds the scored rows' values and precisions as the buffers
    ``known_values`` / ``known_precisions`` (saved with the weights), which :meth:`log_probs` is given.
    """

    def __init__(self, density: nn.Module, tokens: list[str]) -> None:
        self.density = density
        keys = [self.key(token) for token in tokens]
        self.rows = first_rows(keys)
        # (value, precision) of each scored row as Python numbers: what the buffers are written from again.
        self.known_numerals = [keys[row] for row in self.rows]
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.num_rows = len(tokens)

    @classmethod
    def build(cls, head: nn.Module, tokens: list[str], density: nn.Module,
              name: str = "mixture") -> ValueBranch:
        """``density`` registered on ``head`` as ``name``, the branch over the numeral rows ``tokens``, and
        the head's buffers ``known_values`` / ``known_precisions``."""
        setattr(head, name, density)
        branch = cls(density, tokens)
        values, precisions = branch.known_numeral_tensors()
        head.register_buffer("known_values", values)
        head.register_buffer("known_precisions", precisions)
        return branch

    def over(self, tokens: list[str]) -> ValueBranch:
        """The branch with the same density over the numeral rows ``tokens``."""
        return ValueBranch(self.density, tokens)

    @staticmethod
    def key(text: str) -> tuple[float, int] | None:
        """What tells two numerals apart for the mixture: value and precision (None: no numeral)."""
        numeral = parse_numeral(text)
        return (numeral.value, numeral.precision) if numeral is not None else None

    def known_numeral_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The values (float64: exact for every numeral a float64 holds) and precisions of the scored rows."""
        values = torch.tensor([value for value, _ in self.known_numerals], dtype=torch.float64)
        precisions = torch.tensor([precision for _, precision in self.known_numerals], dtype=torch.long)
        return values, precisions

    def init_weights(self, init, known_values: torch.Tensor, known_precisions: torch.Tensor) -> None:
        """The density as at construction (its ``init_weights``) and the head's buffers of the scored rows,
        which follow from the numeral tokens; what was loaded from a checkpoint is kept."""
        self.density.init_weights(init)
        values, precisions = self.known_numeral_tensors()
        write_unless_loaded(known_values, values)
        write_unless_loaded(known_precisions, precisions)

    def fit(self, stream: dict[str, torch.Tensor], head_name: str) -> None:
        """The density started from the training split's numerals (its ``initialize_from``: EM for the
        mixture's components, the training frequencies for the biases)."""
        mask = stream.get("numeral_mask")
        if mask is None or not bool(mask.any()):
            raise ValueError(f"the {head_name} head fits its density to the training numerals, but the "
                             "training data has none (or no numeral fields: use a numeracy tokenizer)")
        mask = mask.bool()
        self.density.initialize_from(stream["numeral_value"][mask], stream["numeral_precision"][mask])

    def log_probs(self, hidden: torch.Tensor, known_values: torch.Tensor,
                  known_precisions: torch.Tensor) -> torch.Tensor:
        """The density's open distribution over the numeral rows (..., |N|), float64: P(r | h) times the
        interval mass of each scored row (values ``known_values``, precisions ``known_precisions``)."""
        known = self.density.vocabulary_log_probs(hidden, known_values, known_precisions)
        return spread_over_rows(known, self.rows, self.unknown_row, self.num_rows)

    def exact(self, hidden: torch.Tensor, fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """log P(v, r | h) of each target's own ``numeral_value`` and ``numeral_precision``; None without
        them."""
        if not {"numeral_mask", "numeral_value", "numeral_precision"} <= fields.keys():
            return None
        return self.density.log_prob(hidden, fields["numeral_value"].to(torch.float64),
                                     fields["numeral_precision"])

    def draw(self, hidden: torch.Tensor, do_sample: bool, generator: torch.Generator | None) -> list[str]:
        """One sample at ``hidden`` (D,), or the median written with the most likely precision."""
        if do_sample:
            return self.density.sample(hidden[None], generator=generator)[2]
        precision = int(self.density.log_precision_probs(hidden).argmax())
        return [write_value(float(self.density.median(hidden[None])[0]), precision)]


__all__ = ["DigitBranch", "OpenNumeralBranchHead", "ValueBranch"]
