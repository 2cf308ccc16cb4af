"""The base of the numeral heads whose numeral branch is open: a distribution over every numeral, in the
vocabulary or not (Spithourakis & Riedel, "Numeracy for Language Models: Evaluating and Improving their
Ability to Predict Numbers", ACL 2018, sec. 3.3-3.5): ``drnn``, ``mog`` and ``combination``.
"""

from __future__ import annotations

import numpy as np
import torch

from ...tokenization.numerals import UNK_NUM_TOKEN, numeral_features
from ..base import Targets
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
    :class:`~hf_nlm.heads.numeral.drnn.DigitBranch`, the mixture's
    :class:`~hf_nlm.heads.numeral.mog.ValueBranch`); a head that mixes several overrides them.
    """

    open_numeral_vocabulary = True

    def build_numeral_branch(self, in_features: int, tokens: list[str], **options) -> None:
        """The numeral rows' tokens (``numeral_tokens``), the row of ``<unk_num>`` (``unknown_row``) and the
        open branch (:meth:`build_open_branch`)."""
        self.numeral_tokens = tokens
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.build_open_branch(in_features, tokens, **options)

    def build_open_branch(self, in_features: int, tokens: list[str], **options) -> None:
        """Build the branch and register its parameters and buffers on the head."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the numeral branch's hooks
    def branch_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The open branch's distribution over the numeral rows, (..., |N|), float64."""
        return self.branch.log_probs(hidden)

    def numeral_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.branch_log_probs(hidden).to(torch.promote_types(hidden.dtype, torch.float32))

    def exact_numeral_log_probs(self, hidden: torch.Tensor, fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        return self.branch.exact(hidden, fields)

    def numeral_key(self, text: str):
        """What tells two numerals apart for this branch (its canonical string, or value and precision)."""
        return self.branch.key(text)

    def draw_numeral(self, hidden: torch.Tensor, do_sample: bool, generator: torch.Generator | None) -> list[str]:
        """Candidate numerals at ``hidden`` (D,), best first: one sample, or the branch's best guesses."""
        return self.branch.draw(hidden, do_sample, generator)

    # ------------------------------------------------------------------ writing out <unk_num>
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


__all__ = ["OpenNumeralBranchHead"]
