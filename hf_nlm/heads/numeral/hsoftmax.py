"""``"hsoftmax"``: the hierarchical softmax over words and numerals of Spithourakis & Riedel ("Numeracy
for Language Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018, sec. 3.2).

p(s | h) = p(c | h) p(s | c, h) with the class c in {word, numeral}: a two-way softmax, then a softmax
over the class's own tokens, the three with no shared parameters. The numeral branch is where the
digit-RNN (``drnn``, :mod:`.drnn`), the mixture of Gaussians (``mog``, :mod:`.mog`) and their combination
(``combination``, :mod:`.combination`) plug in; :class:`NumeralHierarchicalSoftmaxHead` is their base.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..base import (
    OutputHead,
    Targets,
    refuse_arguments,
    register_head,
    upcast,
    write_unless_loaded,
    zero_with_gradient,
)
from ..softmax import linear_nll, resized_rows
from .common import kept_numerals, numeral_vocab_of, sorted_numerals


@register_head("hsoftmax", place=2)  # sec. 3.2
class NumeralHierarchicalSoftmaxHead(OutputHead):
    """p(s | h) = p(c | h) p(s | c, h), c in {word, numeral} (sec. 3.2); no parameter is shared.

    Parameters: ``class_weight`` (2 x D) / ``class_bias``, ``word_weight`` (|W| x D) / ``word_bias``,
    and the numeral branch: here ``numeral_weight`` (|N| x D) / ``numeral_bias``, a softmax over the
    vocabulary's numerals (``<unk_num>`` one of them). Buffers (saved with the weights): ``word_ids``
    and ``numeral_ids``, the vocabulary ids of each branch's rows, and ``vocab_position``, where each
    id sits in the concatenation [word branch, numeral branch]. Every token that is not a numeral,
    ``<eos>`` and ``<unk_word>`` included, is in the word branch.

    Subclasses replace the numeral branch (:meth:`build_numeral_branch`, :meth:`numeral_log_probs`) and, with
    an open vocabulary of numerals (``open_numeral_vocabulary``: the digit-RNN, the mixture of Gaussians,
    their combination; :class:`~hf_nlm.heads.numeral.open_branch.OpenNumeralBranchHead`), score a numeral
    target from its own per-target fields (:meth:`exact_numeral_log_probs`) rather than from its vocabulary
    row, so an unseen numeral gets the probability of *its* digits or value instead of ``<unk_num>``'s.

    ``resize`` follows a vocabulary resized at its end. New tokens are words: they join the word branch,
    with rows the mean of the old word rows (zeros without ``mean_init``), so p(class | h) and the numeral
    branch are unchanged and an old word's probability changes only by the word softmax's new
    normalisation. Cut words leave the word branch; a numeral whose id is cut leaves ``numeral_vocab`` and
    the numeral branch (:meth:`cut_numeral_rows`). The numerals kept keep their ids. A size that would leave
    either branch empty is refused.
    """

    returns_log_probs = True
    resizable = True
    #: The numeral branch gives every numeral a probability from its per-target fields, so a numeral
    #: outside the vocabulary is scored as itself (and is not an unknown token for the adjusted perplexity).
    open_numeral_vocabulary: ClassVar[bool] = False

    def __init__(self, in_features: int, vocab_size: int, numeral_vocab: dict[str, int],
                 **branch_options) -> None:
        super().__init__()
        self.in_features = in_features
        self.vocab_size = vocab_size
        self.numeral_vocab = dict(numeral_vocab)
        numerals = sorted_numerals(numeral_vocab)
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
        #: The numeral branch's parameters (every one but the class and word softmaxes'), which ``nll`` ties
        #: into every training loss; by name, so that a parameter replaced (loaded, resized) is the one read.
        self._numeral_branch_parameters = tuple(
            name for name, _ in self.named_parameters() if not name.startswith(("class_", "word_")))

    @staticmethod
    def branch_indices(vocab_size: int, numeral_ids: list[int]) -> dict[str, list[int]]:
        """The vocabulary ids of each branch's rows (``word_ids``: every id that is not a numeral, in order)
        and ``vocab_position``, where each id sits in the concatenation [word branch, numeral branch]."""
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

    #: Numerals the numeral branch cannot do without (the open branches' ``<unk_num>``).
    needed_numerals: ClassVar[tuple[str, ...]] = ()

    def check_resize(self, vocab_size: int) -> dict[str, int]:
        kept = kept_numerals(self.numeral_vocab, vocab_size, type(self).__name__, self.needed_numerals)
        if vocab_size <= len(kept):
            raise ValueError(f"{type(self).__name__} cannot follow a vocabulary resized to {vocab_size} "
                             f"tokens: its {len(kept)} numerals would leave no word for the word branch")
        return kept

    def resize(self, vocab_size: int, mean_init: bool = True) -> None:
        """Both branches follow a vocabulary resized at its end (class docstring)."""
        kept = self.check_resize(vocab_size)
        if len(kept) < len(self.numeral_vocab):
            self.numeral_vocab = kept
            self.cut_numeral_rows(len(kept))  # the rows are in id order: the numerals kept come first
        # Word ids are in order, so the words added (or cut) at the end of the vocabulary are the word
        # branch's last rows; the numeral rows come after the word rows in vocab_position.
        self._index_lists = self.branch_indices(vocab_size, self._index_lists["numeral_ids"][: len(kept)])
        num_words = len(self._index_lists["word_ids"])
        self.word_weight = nn.Parameter(resized_rows(self.word_weight, num_words, mean_init))
        self.word_bias = nn.Parameter(resized_rows(self.word_bias, num_words, mean_init))
        for name, values in self._index_lists.items():
            setattr(self, name, torch.tensor(values, dtype=torch.long, device=getattr(self, name).device))
        self.vocab_size = vocab_size

    def cut_numeral_rows(self, num_rows: int) -> None:
        """Keep the numeral branch's first ``num_rows`` rows (the numerals a smaller vocabulary keeps)."""
        self.numeral_weight = nn.Parameter(self.numeral_weight.detach()[:num_rows].clone())
        self.numeral_bias = nn.Parameter(self.numeral_bias.detach()[:num_rows].clone())

    # ------------------------------------------------------------------ the branches
    def class_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p(class | h), (..., 2): word, numeral."""
        return torch.log_softmax(upcast(F.linear(hidden, self.class_weight, self.class_bias)), dim=-1)

    def class_and_word_log_probs(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log p(class | h) (..., 2) and log p(s | word, h) (..., |W|)."""
        words = torch.log_softmax(upcast(F.linear(hidden, self.word_weight, self.word_bias)), dim=-1)
        return self.class_log_probs(hidden), words

    def numeral_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p(s | numeral, h) over the numeral rows (..., |N|): a distribution over the rows."""
        return torch.log_softmax(upcast(F.linear(hidden, self.numeral_weight, self.numeral_bias)), dim=-1)

    def exact_numeral_log_probs(self, hidden: torch.Tensor,
                                fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
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
        of ``forward`` is never built, the word branch runs on the word targets only (the fused softmax
        loss, :func:`~hf_nlm.heads.softmax.linear_nll`) and the numeral branch on the numeral targets only."""
        targets = Targets.of(targets)
        shape = targets.ids.shape
        ids = targets.ids.reshape(-1)
        hidden = hidden.reshape(-1, hidden.shape[-1])
        keep = ids != -100
        position = self.vocab_position[torch.where(keep, ids, 0)]
        num_words = self.word_ids.numel()
        is_numeral = keep & (position >= num_words)
        log_class = self.class_log_probs(hidden)
        picked = log_class[:, 0]
        words = torch.nonzero(keep & ~is_numeral).squeeze(-1)
        if words.numel():
            in_branch = -linear_nll(hidden[words], self.word_weight, self.word_bias, position[words])
            picked = picked.index_put((words,), log_class[words, 0] + in_branch.to(log_class.dtype))
        rows = torch.nonzero(is_numeral).squeeze(-1)
        if rows.numel():
            h = hidden[rows]
            fields = {name: value.reshape(-1, *value.shape[len(shape):])[rows]
                      for name, value in targets.fields.items()}
            exact = self.exact_numeral_log_probs(h, fields)
            by_row = None if exact is not None else slice(None)  # targets scored by their vocabulary row
            if exact is not None:  # the target's own probability where its fields say it is a numeral
                numeral = fields["numeral_mask"].bool()
                in_branch = exact.to(log_class.dtype)
                if not bool(numeral.all()):  # e.g. a literal "<unk_num>" in the text
                    by_row = torch.nonzero(~numeral).squeeze(-1)
            if by_row is not None:  # the open branches' |N|-wide rows only where they are needed
                row = position[rows][by_row] - num_words
                vocab = (self.numeral_log_probs(h[by_row]).gather(-1, row[:, None]).squeeze(-1)
                         .to(log_class.dtype))
                in_branch = vocab if exact is None else in_branch.index_put((by_row,), vocab)
            picked = picked.index_put((rows,), log_class[rows, 1] + in_branch)
        if torch.is_grad_enabled():
            # The numeral branch's parameters are few: tie them in always, whichever of them the
            # targets used; the word branch only when the batch has no word target.
            unused = [self.get_parameter(name) for name in self._numeral_branch_parameters]
            if not words.numel():
                unused += [self.word_weight, self.word_bias]
            picked = picked + zero_with_gradient(unused).to(picked.dtype)
        return torch.where(keep, -picked, torch.zeros_like(picked)).view(shape)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, words={self.word_ids.numel()}, "
                f"numerals={self.numeral_ids.numel()}")


__all__ = ["NumeralHierarchicalSoftmaxHead"]
