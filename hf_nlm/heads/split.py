"""Split softmax with tombstones (Merity et al.'s SplitCrossEntropyLoss).

S. Merity, N. S. Keskar, R. Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018,
reference code ``splitcross.py``. The vocabulary is sorted by frequency and cut at
0 = s_0 < s_1 < ... < s_m = |V|. With one output matrix W (|V| x D) and bias b (|V|):

    Y_head = h [W[s_0:s_1]; W_tail]^T + [b[s_0:s_1]; b_tail]       head scores: s_1 words + m-1 tombstones
    P_head = log_softmax(Y_head)
    log P(w | h) = P_head[w]                                          for w in [s_0, s_1)
    log P(w | h) = P_head[tomb_p] + log_softmax(h W[s_{p-1}:s_p]^T + b[s_{p-1}:s_p])[w - s_{p-1}]
                                                                       for w in cluster p = [s_{p-1}, s_p)

(a tail word costs its cluster's tombstone plus its own place within the cluster). Unlike torch's
``AdaptiveLogSoftmaxWithLoss``, the tail clusters use the rows of the same full-width W, so W has
the shape of an input embedding and can be tied to it.

The training loss only evaluates a tail cluster's softmax on the tokens whose target lies in it, so
its cost is |head| + sum_p n_p |cluster p| per batch instead of N |V|. That loss
(:func:`split_softmax_nll`) is written out by hand: the clusters read disjoint row blocks of one
|V| x D output matrix W. Left to autograd, every block read (a slice or a ``split``) ends in a backward that
materialises a |V| x D gradient and copies the block into it. Here the backward allocates the gradient of W
once and writes each block's gradient straight into its rows (``torch.mm(..., out=grad_W[lo:hi])``), so no
|V| x D copy or zero-fill happens beyond that one allocation. The arithmetic is the textbook cross-entropy
gradient: for logits y and target k, d(-log softmax(y)_k)/dy = softmax(y) - onehot(k).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from .base import OutputHead, Targets, head_options, refuse_arguments, register_head, upcast
from .softmax import init_output_weights, resize_word_rows


class SplitSoftmaxNLL(torch.autograd.Function):
    """-log P(t | h) of the split softmax for N rows; see :func:`split_softmax_nll`."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, tomb_weight, tomb_bias, target, boundaries):
        s1 = boundaries[1]
        valid = target != -100
        t = target.masked_fill(~valid, 0)
        cluster = torch.bucketize(
            t, torch.tensor(boundaries[1:-1], dtype=t.dtype, device=t.device), right=True
        )
        # Head: the s_1 head words and the m-1 tombstones in one matmul (Y_head in :mod:`hf_nlm.heads.split`).
        head_w = torch.cat([weight[:s1], tomb_weight])
        head_b = None if bias is None else torch.cat([bias[:s1], tomb_bias])
        head_lp = torch.log_softmax(upcast(F.linear(hidden, head_w, head_b)), dim=-1)
        head_t = torch.where(cluster == 0, t, s1 + cluster - 1)
        loss = -head_lp.gather(1, head_t[:, None]).squeeze(1)
        tails = []
        for p in range(1, len(boundaries) - 1):
            rows = torch.nonzero((cluster == p) & valid).squeeze(1)
            if rows.numel() == 0:
                tails.append(None)
                continue
            lo, hi = boundaries[p], boundaries[p + 1]
            h_p = hidden.index_select(0, rows)
            lp = torch.log_softmax(
                upcast(F.linear(h_p, weight[lo:hi], None if bias is None else bias[lo:hi])), -1
            )
            t_p = t.index_select(0, rows) - lo
            loss.index_add_(0, rows, -lp.gather(1, t_p[:, None]).squeeze(1))
            tails.append((rows, t_p, lp))
        loss = loss.masked_fill(~valid, 0.0)
        ctx.boundaries = boundaries
        ctx.has_bias = bias is not None
        ctx.tails = tails
        ctx.save_for_backward(hidden, weight, head_w, head_lp, head_t, valid)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss):
        hidden, weight, head_w, head_lp, head_t, valid = ctx.saved_tensors
        boundaries, s1 = ctx.boundaries, ctx.boundaries[1]
        # Per-row upstream gradient; ignored rows get none. It scales rows, so it is applied to the
        # (N, D) operands rather than to the (N, |cluster|) softmax gradients (one pass fewer over those).
        g = (grad_loss * valid.to(grad_loss.dtype)).to(weight.dtype)
        g_h = hidden * g[:, None]
        # d loss_i / d Y_head[i] = g_i (softmax(Y_head[i]) - onehot(head_t[i])).
        d_head = head_lp.exp()
        d_head[torch.arange(d_head.shape[0], device=d_head.device), head_t] -= 1
        d_head = d_head.to(weight.dtype)
        grad_h = (d_head @ head_w) * g[:, None]
        grad_w = torch.empty_like(weight)  # every row block is written below, exactly once
        torch.mm(d_head[:, :s1].t(), g_h, out=grad_w[:s1])
        grad_tw = d_head[:, s1:].t() @ g_h
        grad_b = grad_tb = None
        if ctx.has_bias:
            grad_b = torch.empty(weight.shape[0], dtype=weight.dtype, device=weight.device)
            torch.mv(d_head[:, :s1].t(), g, out=grad_b[:s1])
            grad_tb = d_head[:, s1:].t() @ g
        for p, tail in enumerate(ctx.tails, start=1):
            lo, hi = boundaries[p], boundaries[p + 1]
            if tail is None:  # no target in this cluster: its rows of W get a zero gradient
                grad_w[lo:hi].zero_()
                if grad_b is not None:
                    grad_b[lo:hi].zero_()
                continue
            rows, t_p, lp = tail
            d = lp.exp()
            d[torch.arange(d.shape[0], device=d.device), t_p] -= 1
            d = d.to(weight.dtype)
            g_p = g.index_select(0, rows)
            grad_h.index_add_(0, rows, (d @ weight[lo:hi]) * g_p[:, None])
            torch.mm(d.t(), g_h.index_select(0, rows), out=grad_w[lo:hi])
            if grad_b is not None:
                torch.mv(d.t(), g_p, out=grad_b[lo:hi])
        return grad_h, grad_w, grad_b, grad_tw, grad_tb, None, None


def split_softmax_nll(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    tombstone_weight: torch.Tensor,
    tombstone_bias: torch.Tensor | None,
    target: torch.Tensor,
    boundaries: list[int],
) -> torch.Tensor:
    """Per-row -log P(target | hidden) of the split softmax with cluster bounds s_0 = 0 < ... < s_m = |V|.

    ``hidden`` (N, D), ``target`` (N,) with -100 ignored (loss 0, no gradient). Gradients flow to
    hidden, weight, bias and the tombstone parameters.
    """
    return SplitSoftmaxNLL.apply(
        hidden, weight, bias, tombstone_weight, tombstone_bias, target, list(boundaries)
    )


@head_options
class SplitSoftmaxOptions:
    r"""
    The setting of the split head: a field of every model's config
    (:class:`~hf_nlm.configuration_utils.NLMConfig` lists this class among its bases), since every body can
    take the split head.

    Args:
        cutoffs (`list[int]`, *optional*):
            With `head="split"`: the cluster boundaries [s_1, ..., s_(m-1)], strictly increasing inside
            (0, |V|). A run (`hf_nlm.training.train`, `hf-nlm train`) given none takes
            `default_cutoffs(|V|)`: one tail cluster behind the |V| / 10 most frequent ids.
    """

    cutoffs: list[int] | None = None


def default_cutoffs(vocab_size: int) -> list[int]:
    """``[max(1, |V| // 10)]``: a head cluster of the |V| / 10 most frequent ids and one tail. With Zipfian
    word frequencies (rank-r share ~ 1 / r) the head then covers about 75% of the tokens of a 10,000-word
    vocabulary, and the expected cost per token, s_1 + 1 + p(tail) (|V| - s_1), is near its minimum over
    single splits (the trade-off Grave et al. 2017 make for the adaptive softmax)."""
    if vocab_size < 2:
        raise ValueError(f"a split head needs a vocabulary of at least 2 ids, got {vocab_size}")
    return [max(1, vocab_size // 10)]


def check_cutoffs(cutoffs: Sequence[int], vocab_size: int, owner: str = "cutoffs") -> None:
    """Raise ValueError unless ``cutoffs`` is strictly increasing inside (0, vocab_size)."""
    prev = 0
    for c in cutoffs:
        if not 0 < c < vocab_size:
            raise ValueError(
                f"{owner}: cutoff {c} is outside (0, vocab_size={vocab_size}); cutoffs are the split "
                "softmax's cluster boundaries [s_1, ..., s_(m-1)] over a frequency-sorted vocabulary, got "
                f"{list(cutoffs)}"
            )
        if c <= prev:
            raise ValueError(
                f"{owner}: cutoffs must be strictly increasing, but {c} follows {prev}: {list(cutoffs)}"
            )
        prev = c


def check_frequency_order(
    cutoffs: Sequence[int], counts: torch.Tensor, special_ids: Sequence[int] = (), min_coverage: float = 0.9
) -> None:
    """Raise ``ValueError`` if word ids are clearly not sorted by decreasing frequency.

    The split softmax only pays off when its head cluster [0, s_1) holds the frequent words: then most
    targets never reach a tail softmax. ``counts`` are the training counts per id. The k ordinary words
    of the head cluster must cover at least ``min_coverage`` of the tokens that the k most frequent
    ordinary words cover (a sorted vocabulary covers all of them, ties at the cut aside). Special
    tokens (``<unk>``, ``<eos>``) sit first whatever their count, so they are left out.
    """
    if not cutoffs:
        return
    s1 = int(cutoffs[0])
    ordinary = torch.ones(counts.numel(), dtype=torch.bool)
    ordinary[[i for i in special_ids if 0 <= i < counts.numel()]] = False
    counts = counts.double()
    k = int(ordinary[:s1].sum())
    best = counts[ordinary].topk(min(k, int(ordinary.sum()))).values.sum()
    covered = counts[:s1][ordinary[:s1]].sum()
    if best > 0 and covered < min_coverage * best:
        raise ValueError(
            f"split softmax: word ids are not sorted by decreasing frequency. Its head cluster (ids < {s1}) "
            f"holds {covered / counts.sum():.1%} of the training tokens, while the {k} most frequent words "
            f"would hold {best / counts.sum():.1%}. Use a word-level tokenizer "
            "(hf_nlm.tokenization.train_word_level_tokenizer sorts ids by frequency), or a softmax or tree "
            "head"
        )


@register_head("split", place=7)  # the heads that factorise the vocabulary come last
class SplitSoftmaxHead(OutputHead):
    """Frequency-split softmax: a head softmax over the s_1 most frequent words and m-1 tombstones.

    Args:
        in_features: D, the size of the hidden vector h.
        vocab_size: |V|; word ids must be sorted by decreasing frequency.
        cutoffs: [s_1, ..., s_{m-1}], strictly increasing inside (0, |V|). ``[]`` is a full softmax.
        bias: learn b (|V|) and the tombstone biases.

    Parameters: ``weight`` (|V| x D, tie-able to an input embedding), ``bias`` (|V|),
    ``tombstone_weight`` (m-1 x D, the seed's W_tail) and ``tombstone_bias`` (m-1, b_tail).
    """

    config_fields = ("cutoffs",)
    returns_log_probs = True
    tieable = True
    resizable = True

    def __init__(self, in_features: int, vocab_size: int, cutoffs: Sequence[int], bias: bool = True) -> None:
        super().__init__()
        cutoffs = [int(c) for c in cutoffs]
        check_cutoffs(cutoffs, vocab_size)
        self.in_features = in_features
        self.vocab_size = vocab_size
        self.cutoffs = cutoffs
        self.boundaries = [0, *cutoffs, vocab_size]  # s_0 .. s_m
        self.head_size = self.boundaries[1]
        n_tails = len(cutoffs)
        self.weight = nn.Parameter(torch.empty(vocab_size, in_features))
        self.bias = nn.Parameter(torch.zeros(vocab_size)) if bias else None
        self.tombstone_weight = nn.Parameter(torch.empty(n_tails, in_features))
        self.tombstone_bias = nn.Parameter(torch.zeros(n_tails)) if bias else None
        self.reset_parameters()

    @classmethod
    def prepare_run(cls, fields: dict, tokenizer, run) -> dict:
        """Cut-offs from the vocabulary where the run gives none (:func:`default_cutoffs`)."""
        if fields.get("cutoffs") is None:
            fields["cutoffs"] = default_cutoffs(len(tokenizer))
            run.say(f"split head: --cutoffs {' '.join(map(str, fields['cutoffs']))} (|V| / 10; --cutoffs "
                    "sets them)")
        return {}

    @classmethod
    def from_config(cls, config, in_features: int, **kwargs) -> SplitSoftmaxHead:
        refuse_arguments(config, kwargs)
        return cls(in_features, config.vocab_size, config.cutoffs)

    @classmethod
    def check_config(cls, config, owner: str) -> None:
        if config.cutoffs is None:
            raise ValueError(f"{owner}: head='split' needs cutoffs=[s_1, ..., s_(m-1)] (e.g. [2000, 10000])")
        check_cutoffs(config.cutoffs, config.vocab_size, owner=f"{owner}.cutoffs")

    def reset_parameters(self, std: float | None = None) -> None:
        init_output_weights([self.weight, self.tombstone_weight], [self.bias, self.tombstone_bias], std)

    def check_training_counts(self, counts: torch.Tensor, special_ids=()) -> None:
        """Training ids must be sorted by frequency for the split to pay off
        (:func:`check_frequency_order`)."""
        check_frequency_order(self.cutoffs, counts, special_ids)

    # ------------------------------------------------------------------ pieces
    def clusters(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """(W[s_p:s_{p+1}], b[s_p:s_{p+1}]) for p = 0 .. m-1: the head words' rows, then each tail's.

        One ``split`` rather than several slices: the backward of a split writes all the pieces'
        gradients into one |V| x D tensor, where each slice's backward would allocate its own
        zero-filled |V| x D gradient and add them up.
        """
        sizes = [hi - lo for lo, hi in zip(self.boundaries[:-1], self.boundaries[1:], strict=True)]
        weights = self.weight.split(sizes)
        biases = self.bias.split(sizes) if self.bias is not None else [None] * len(sizes)
        return list(zip(weights, biases, strict=True))

    def head_scores(
        self, hidden: torch.Tensor, head_weight: torch.Tensor, head_bias: torch.Tensor | None
    ) -> torch.Tensor:
        """Y_head = h [W[0:s_1]; W_tail]^T + [b[0:s_1]; b_tail]: head words then tombstones, one matmul."""
        w = torch.cat([head_weight, self.tombstone_weight])
        b = None if head_bias is None else torch.cat([head_bias, self.tombstone_bias])
        return F.linear(hidden, w, b)

    def cluster_of(self, target: torch.Tensor) -> torch.Tensor:
        """0 for a head word, p for a word of tail cluster p (s_p <= w < s_{p+1})."""
        # A fresh tiny tensor, not a buffer: nothing to go stale on .to() or meta-device loading.
        return torch.bucketize(
            target, torch.tensor(self.cutoffs, dtype=target.dtype, device=target.device), right=True
        )

    def config_values(self) -> dict:
        return {"cutoffs": list(self.cutoffs)}

    def check_resize(self, vocab_size: int) -> None:
        if vocab_size < 1:
            raise ValueError(f"cannot resize the split softmax to {vocab_size} words: it needs at least one")

    def resize(self, vocab_size: int, mean_init: bool = True) -> None:
        """Follow a resized vocabulary (``resize_token_embeddings``): words are cut or added at the end,
        i.e. in the last (rarest) cluster, which keeps the frequency order the split assumes. Cutting past
        a cut-off empties the clusters after it: they go, with their tombstones (the head softmax no longer
        offers them), and ``cutoffs`` keeps the cut-offs below ``vocab_size``; cutting into the head
        cluster leaves a full softmax (``cutoffs=[]``)."""
        self.check_resize(vocab_size)
        resize_word_rows(self, vocab_size, mean_init)
        self.cutoffs = [c for c in self.cutoffs if c < vocab_size]
        tails = len(self.cutoffs)
        if self.tombstone_weight.shape[0] != tails:
            self.tombstone_weight = nn.Parameter(self.tombstone_weight.detach()[:tails].clone())
            if self.tombstone_bias is not None:
                self.tombstone_bias = nn.Parameter(self.tombstone_bias.detach()[:tails].clone())
        self.boundaries = [0, *self.cutoffs, vocab_size]
        self.head_size = self.boundaries[1]

    # ------------------------------------------------------------------ interface
    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Exact log-probabilities (already normalised, so log_softmax leaves them unchanged)."""
        return self.log_probs(hidden)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log P(w | h) for every word, shape ``hidden.shape[:-1] + (|V|,)``."""
        (head_w, head_b), *tails = self.clusters()
        head = torch.log_softmax(upcast(self.head_scores(hidden, head_w, head_b)), dim=-1)
        parts = [head[..., : self.head_size]]
        for p, (w, b) in enumerate(tails, start=1):
            # log P(tombstone_p | h) + log softmax of cluster p's own scores.
            tomb = head[..., self.head_size + p - 1 : self.head_size + p]
            parts.append(tomb + torch.log_softmax(upcast(F.linear(hidden, w, b)), dim=-1))
        return torch.cat(parts, dim=-1)

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor | Targets) -> torch.Tensor:
        """Per-token -log P(target | h), shape ``target.shape``; target -100 gives 0 (ignored).

        The head softmax runs on all N rows in one matmul; tail cluster p's softmax only on the rows
        whose target lies in it (one matmul per cluster). No (N, |V|) tensor is built. Forward and
        backward are fused (:func:`split_softmax_nll`); :meth:`nll_reference` is the same loss
        left to autograd.
        """
        target = Targets.of(targets).ids
        h = hidden.reshape(-1, hidden.shape[-1])
        loss = split_softmax_nll(
            h,
            self.weight,
            self.bias,
            self.tombstone_weight,
            self.tombstone_bias,
            target.reshape(-1),
            self.boundaries,
        )
        return loss.view(target.shape)

    def nll_reference(self, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """:meth:`nll` written with autograd only (readable; slower backward: one |V| x D copy more)."""
        h = hidden.reshape(-1, hidden.shape[-1])
        t = target.reshape(-1)
        cluster = self.cluster_of(t)
        (head_w, head_b), *tails = self.clusters()
        # Head cross-entropy: a head word is its own column, a tail word its cluster's tombstone.
        head_target = torch.where(cluster == 0, t, self.head_size + cluster - 1)
        loss = F.cross_entropy(upcast(self.head_scores(h, head_w, head_b)), head_target, reduction="none")
        for p, (w, b) in enumerate(tails, start=1):
            rows = torch.nonzero(cluster == p).squeeze(1)
            if rows.numel() == 0:
                continue
            tail = upcast(F.linear(h.index_select(0, rows), w, b))
            tail_loss = F.cross_entropy(tail, t.index_select(0, rows) - self.boundaries[p], reduction="none")
            loss = loss.index_add(0, rows, tail_loss.to(loss.dtype))
        return loss.view(target.shape)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, vocab_size={self.vocab_size}, cutoffs={self.cutoffs}, "
            f"bias={self.bias is not None}"
        )
