"""Output heads: full, split (tombstones) and tree softmax against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from hf_nlm.heads import SoftmaxHead, SplitSoftmaxHead, TreeSoftmaxHead
from hf_nlm.trees import WordTree, adaptive_tree, balanced_tree, huffman_tree, leaf, random_tree

V, D = 30, 5


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny tensors gain nothing from threads, and on a busy 2-core machine the thread pool's barriers
    # make every small op wait for a descheduled thread (tests ran 5x slower under load).
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def ambiguous_vectors() -> np.ndarray:
    """30 word vectors in two overlapping mirror-image clusters; ADAPTIVE(eps) duplicates some words."""
    A = np.random.default_rng(0).normal(size=(14, 3))
    A[:, 0] += 2.0
    return np.concatenate([A, -A, np.zeros((2, 3))])


TREES = {
    "balanced": lambda: balanced_tree(V),
    "random": lambda: random_tree(V, seed=3),
    "huffman": lambda: huffman_tree(1.0 / np.arange(1, V + 1)),
    "adaptive": lambda: adaptive_tree(ambiguous_vectors(), mode="adaptive"),
    "adaptive_balanced": lambda: adaptive_tree(ambiguous_vectors(), mode="balanced"),
    "adaptive_eps": lambda: adaptive_tree(ambiguous_vectors(), mode="adaptive", eps=0.3),
}

HEADS = {
    "softmax": lambda: SoftmaxHead(D, V),
    "split1": lambda: SplitSoftmaxHead(D, V, [8]),
    "split2": lambda: SplitSoftmaxHead(D, V, [5, 17]),
    "split3": lambda: SplitSoftmaxHead(D, V, [3, 10, 20]),
    "split2_nobias": lambda: SplitSoftmaxHead(D, V, [5, 17], bias=False),
    **{f"tree_{k}": (lambda k=k: TreeSoftmaxHead(D, TREES[k]())) for k in TREES},
    "tree_nobias": lambda: TreeSoftmaxHead(D, balanced_tree(V), bias=False),
}


def make_head(name: str) -> nn.Module:
    torch.manual_seed(0)
    head = HEADS[name]().double()
    with torch.no_grad():  # random biases too, so that they matter in every check
        for p in head.parameters():
            p.normal_(0, 0.7)
    return head


def test_adaptive_eps_tree_has_multiple_codes():
    assert TREES["adaptive_eps"]().max_codes >= 2


@pytest.mark.parametrize("name", list(HEADS))
def test_log_probs_normalised_and_nll_consistent(name):
    head = make_head(name)
    torch.manual_seed(1)
    hidden = torch.randn(3, 47, D, dtype=torch.float64)  # 141 rows: several log_probs chunks for the tree
    target = torch.randint(0, V, (3, 47))
    target[0, :V] = torch.arange(V)  # every word at least once
    lp = head.log_probs(hidden)
    assert lp.shape == (3, 47, V)
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(3, 47, dtype=torch.float64))
    nll = head.nll(hidden, target)
    assert nll.shape == target.shape
    torch.testing.assert_close(nll, -lp.gather(-1, target[..., None]).squeeze(-1))
    # forward() may return unnormalised scores: its log_softmax must be the exact distribution.
    torch.testing.assert_close(torch.log_softmax(head(hidden), -1), lp)


@pytest.mark.parametrize("name", [n for n in HEADS if n != "softmax"])
def test_nll_ignores_minus_100(name):
    # (the model drops -100 labels before the head; split and tree heads also accept them)
    head = make_head(name)
    hidden = torch.randn(6, D, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1, -100, 7, 25, -100, 12])
    nll = head.nll(hidden, target)
    assert nll[1] == 0 and nll[4] == 0
    nll.sum().backward()
    assert (hidden.grad[[1, 4]] == 0).all() and (hidden.grad[[0, 2, 3, 5]] != 0).any()


class _NLL(nn.Module):
    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self.head = head

    def forward(self, hidden: torch.Tensor, target: torch.Tensor, log_probs: bool = False) -> torch.Tensor:
        if log_probs:  # a fixed random projection of the full distribution
            lp = self.head.log_probs(hidden)
            return (lp * torch.linspace(-1, 1, lp.shape[-1], dtype=lp.dtype)).sum(-1)
        return self.head.nll(hidden, target)


@pytest.mark.parametrize(
    "name", ["softmax", "split1", "split3", "split2_nobias", "tree_huffman", "tree_adaptive_eps"]
)
@pytest.mark.parametrize("which", ["nll", "log_probs"])
def test_gradients_match_finite_differences(name, which):
    head = make_head(name)
    wrapper = _NLL(head)
    names = [n for n, _ in wrapper.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in wrapper.parameters()]
    torch.manual_seed(2)
    hidden = torch.randn(7, D, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 4, 9, 13, 21, 29, 2])

    def f(h, *ps):
        return torch.func.functional_call(
            wrapper, dict(zip(names, ps, strict=True)), (h, target, which == "log_probs")
        )

    # Full Jacobian check for the hidden state; a random-projection ("fast") finite-difference check
    # for all inputs at once keeps the many parameter entries cheap on a loaded 2-core machine.
    assert torch.autograd.gradcheck(lambda h: f(h, *params), (hidden,))
    assert torch.autograd.gradcheck(f, (hidden, *params), fast_mode=True)


# ---------------------------------------------------------------- split softmax by hand


def split_by_hand(head: SplitSoftmaxHead, h: torch.Tensor) -> torch.Tensor:
    """The split cross-entropy of Merity et al.'s awd-lstm-lm with explicit softmaxes: head over [s_0, s_1) +
    tombstones, then tails."""
    W, b = head.weight, head.bias
    s = [0, *head.cutoffs, V]
    Y_head = h @ torch.cat([W[: s[1]], head.tombstone_weight]).T + torch.cat([b[: s[1]], head.tombstone_bias])
    P_head = torch.exp(Y_head) / torch.exp(Y_head).sum(-1, keepdim=True)
    out = torch.empty(h.shape[0], V, dtype=h.dtype)
    for w in range(V):
        if w < s[1]:
            out[:, w] = P_head[:, w]
            continue
        p = max(i for i in range(1, len(s) - 1) if s[i] <= w)  # tail cluster of w: [s_p, s_{p+1})
        Y_p = h @ W[s[p] : s[p + 1]].T + b[s[p] : s[p + 1]]
        P_p = torch.exp(Y_p) / torch.exp(Y_p).sum(-1, keepdim=True)
        out[:, w] = P_head[:, s[1] + p - 1] * P_p[:, w - s[p]]
    return out


@pytest.mark.parametrize("cutoffs", [[8], [5, 17], [3, 10, 20], [1, 2, 29]])
def test_split_softmax_matches_the_formula(cutoffs):
    torch.manual_seed(0)
    head = SplitSoftmaxHead(D, V, cutoffs).double()
    with torch.no_grad():
        head.bias.normal_()
        head.tombstone_bias.normal_()
    h = torch.randn(9, D, dtype=torch.float64)
    with torch.no_grad():
        expected = split_by_hand(head, h)
        torch.testing.assert_close(head.log_probs(h).exp(), expected)
        t = torch.randint(0, V, (9,))
        torch.testing.assert_close(head.nll(h, t), -expected.log().gather(1, t[:, None]).squeeze(1))


def test_split_fused_nll_equals_autograd_reference():
    head = make_head("split3")
    h = torch.randn(40, D, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, V, (40,))
    t[5] = -100
    t[t >= 20] = 3  # the last cluster gets no target: its gradient rows must be exactly zero
    w = torch.randn(40, dtype=torch.float64)
    grads = []
    for fn in (head.nll, head.nll_reference):
        loss = fn(h, t)
        grads.append((loss, *torch.autograd.grad((loss * w).sum(), [h, *head.parameters()])))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)
    assert (grads[0][2][20:] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_softmax_fused_nll_equals_cross_entropy(dtype, bias):
    """The fused loss (scores laid out N x |V|, gradient formed in the forward pass) against autograd
    through F.cross_entropy(F.linear(...)): values and the gradients of a row-weighted sum, with an
    ignored target and targets at both ends of the vocabulary."""
    torch.manual_seed(0)
    head = SoftmaxHead(D, V, bias=bias).to(dtype)
    if bias:
        nn.init.normal_(head.bias)
    h = torch.randn(3, 7, D, dtype=dtype, requires_grad=True)
    t = torch.randint(0, V, (3, 7))
    t[0, 0], t[1, 2], t[2, 6] = -100, 0, V - 1
    w = torch.randn(3, 7, dtype=dtype)
    params = [h, *head.parameters()]
    fused = head.nll(h, t)
    reference = F.cross_entropy(head(h).reshape(-1, V), t.reshape(-1), reduction="none").view(3, 7)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    torch.testing.assert_close(fused, reference, **tol)
    assert fused[0, 0] == 0
    for a, b in zip(torch.autograd.grad((fused * w).sum(), params),
                    torch.autograd.grad((reference * w).sum(), params), strict=True):
        torch.testing.assert_close(a, b, **tol)
    with torch.no_grad():  # the forward-only path (no gradient buffer kept)
        torch.testing.assert_close(head.nll(h, t), reference, **tol)


def test_softmax_fused_nll_gradient_to_the_inputs_it_is_asked_for():
    """A frozen output layer (weight without grad) and hidden states without grad each still train the
    other."""
    torch.manual_seed(1)
    head = SoftmaxHead(D, V).double()
    h = torch.randn(6, D, dtype=torch.float64)
    t = torch.randint(0, V, (6,))
    head.weight.requires_grad_(False)
    h.requires_grad_(True)
    (g_h,) = torch.autograd.grad(head.nll(h, t).sum(), [h])
    (ref_h,) = torch.autograd.grad(F.cross_entropy(head(h), t, reduction="sum"), [h])
    torch.testing.assert_close(g_h, ref_h)
    head.weight.requires_grad_(True)
    h.requires_grad_(False)
    g_w, g_b = torch.autograd.grad(head.nll(h, t).sum(), [head.weight, head.bias])
    ref_w, ref_b = torch.autograd.grad(F.cross_entropy(head(h), t, reduction="sum"), [head.weight, head.bias])
    torch.testing.assert_close(g_w, ref_w)
    torch.testing.assert_close(g_b, ref_b)


def test_softmax_fused_nll_reuses_its_score_buffer_safely():
    """Consecutive steps share one score buffer: each gives cross_entropy's gradients, and a graph kept for a
    second backward whose buffer a later step took fails loudly instead of giving wrong numbers."""
    torch.manual_seed(8)
    head = SoftmaxHead(D, V)
    t = torch.randint(0, V, (6,))
    for _ in range(2):
        h = torch.randn(6, D)
        (got,) = torch.autograd.grad(head.nll(h, t).sum(), [head.weight])
        (ref,) = torch.autograd.grad(F.cross_entropy(head(h), t, reduction="sum"), [head.weight])
        torch.testing.assert_close(got, ref)
    kept = head.nll(torch.randn(6, D), t).sum()
    kept.backward(retain_graph=True)  # gives the buffer back
    head.nll(torch.randn(6, D), t).sum()  # takes it
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        kept.backward()


def test_softmax_nll_under_autocast_and_in_half_precision_uses_upcast_scores():
    head = SoftmaxHead(D, V).to(torch.bfloat16)
    h = torch.randn(4, D, dtype=torch.bfloat16)
    t = torch.randint(0, V, (4,))
    expected = F.cross_entropy(head(h).float(), t, reduction="none")
    torch.testing.assert_close(head.nll(h, t), expected)
    assert head.nll(h, t).dtype == torch.float32


def test_split_weight_is_tieable_to_an_embedding():
    emb = nn.Embedding(V, D)
    head = SplitSoftmaxHead(D, V, [5, 17])
    head.weight = emb.weight  # what _tied_weights_keys does
    ids = torch.randint(0, V, (4, 6))
    head.nll(emb(ids)[:, :-1], ids[:, 1:]).mean().backward()
    assert emb.weight.grad is not None and emb.weight.grad.shape == (V, D)
    assert head.weight is emb.weight


@pytest.mark.parametrize(
    ("cutoffs", "message"),
    [
        ([5, 5], "strictly increasing, but 5 follows 5"),
        ([10, 4], "strictly increasing, but 4 follows 10"),
        ([0, 4], "cutoff 0 is outside"),
        ([4, V], f"cutoff {V} is outside"),
        ([-3], "cutoff -3 is outside"),
    ],
)
def test_split_bad_cutoffs(cutoffs, message):
    with pytest.raises(ValueError, match=message):
        SplitSoftmaxHead(D, V, cutoffs)


# ---------------------------------------------------------------- tree softmax by hand


def tree_by_hand(head: TreeSoftmaxHead, tree: WordTree, h: torch.Tensor) -> torch.Tensor:
    """Mnih & Hinton 2008 eq. 3-4 word by word: sum over codes of prod sigmoid(+-(h.q_i + b_i))."""
    q, b = head.weight, head.bias
    out = torch.zeros(h.shape[0], tree.vocab_size, dtype=h.dtype)
    for w in range(tree.vocab_size):
        for code in tree.codes(w):
            p = torch.ones(h.shape[0], dtype=h.dtype)
            for node, bit in code:
                x = h @ q[node] + (b[node] if b is not None else 0.0)
                p = p * (torch.sigmoid(x) if bit == 1 else 1 - torch.sigmoid(x))
            out[:, w] += p
    return out


@pytest.mark.parametrize("kind", list(TREES))
def test_tree_softmax_matches_the_formula(kind):
    tree = TREES[kind]()
    head = make_head(f"tree_{kind}")
    assert head.tree() == tree.renumbered_breadth_first() == tree  # the builders number breadth-first
    h = torch.randn(6, D, dtype=torch.float64)
    with torch.no_grad():
        expected = tree_by_hand(head, tree, h)
        torch.testing.assert_close(head.log_probs(h).exp(), expected)
        assert math.isclose(float(expected.sum(1).mean()), 1.0, rel_tol=1e-12)


@pytest.mark.parametrize("kind", ["huffman", "adaptive_eps"])
def test_tree_log_probs_under_autograd_match_nll(kind):
    """With gradients on, log_probs takes its differentiable path: the same values as without, and its
    gradient at the targets equals the training loss's (an independent computation over the paths)."""
    head = make_head(f"tree_{kind}").double()
    h = torch.randn(5, D, dtype=torch.float64, requires_grad=True)
    target = torch.arange(5) * 3 % V
    log_probs = head.log_probs(h)
    with torch.no_grad():
        torch.testing.assert_close(log_probs, head.log_probs(h))
    picked = log_probs.gather(1, target[:, None]).squeeze(1)
    torch.testing.assert_close(picked, -head.nll(h, target))
    grad_log_probs = torch.autograd.grad(picked.sum(), (h, head.weight))
    grad_nll = torch.autograd.grad(-head.nll(h, target).sum(), (h, head.weight))
    for a, b in zip(grad_log_probs, grad_nll, strict=True):
        torch.testing.assert_close(a, b)


def test_tree_head_renumbers_a_depth_unsorted_tree():
    # Node 1 is deeper than node 2: 0 -> (2, w0), 2 -> (1, w1), 1 -> (w2, w3)
    tree = WordTree([[2, leaf(0)], [leaf(2), leaf(3)], [1, leaf(1)]], 4)
    head = TreeSoftmaxHead(3, tree).double()
    stored = head.tree()
    assert stored == tree.renumbered_breadth_first() and stored != tree
    h = torch.randn(5, 3, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(head.log_probs(h).exp(), tree_by_hand(head, stored, h))


def test_tree_log_probs_with_buffers_not_in_depth_order():
    """Buffers loaded from elsewhere need not be breadth-first; log_probs must still be exact."""
    tree = huffman_tree(1.0 / np.arange(1, V + 1))
    head = make_head("tree_huffman")
    h = torch.randn(4, D, dtype=torch.float64)
    with torch.no_grad():
        before = head.log_probs(h)
        perm = torch.randperm(tree.num_nodes, generator=torch.Generator().manual_seed(0))
        new_id = torch.empty_like(perm)
        new_id[perm] = torch.arange(tree.num_nodes)  # old node perm[i] becomes node i
        head.tree_nodes.copy_(new_id[head.tree_nodes])
        head.weight.copy_(head.weight[perm])
        head.bias.copy_(head.bias[perm])
        assert head._structure()["node_order"] is not None
        torch.testing.assert_close(head.log_probs(h), before)
        t = torch.randint(0, V, (4,))
        torch.testing.assert_close(head.nll(h, t), -before.gather(1, t[:, None]).squeeze(1))


def test_tree_sparse_gradient_equals_dense():
    tree = balanced_tree(V)
    dense, sparse = TreeSoftmaxHead(D, tree), TreeSoftmaxHead(D, tree, sparse=True)
    sparse.load_state_dict(dense.state_dict())
    h, t = torch.randn(8, D), torch.randint(0, V, (8,))
    for head in (dense, sparse):
        head.nll(h, t).sum().backward()
    assert sparse.weight.grad.is_sparse
    torch.testing.assert_close(sparse.weight.grad.to_dense(), dense.weight.grad)
    torch.testing.assert_close(sparse.bias.grad, dense.bias.grad)
    torch.optim.SGD(sparse.parameters(), lr=0.1).step()  # an optimizer that takes sparse gradients


def test_tree_state_dict_round_trip_through_safetensors(tmp_path):
    tree = TREES["adaptive_eps"]()
    head = make_head("tree_adaptive_eps").float()
    sd = head.state_dict()
    assert {"weight", "bias", "tree_nodes", "tree_bits", "tree_mask"} <= set(sd)
    assert sd["tree_nodes"].dtype == torch.int64 and sd["tree_bits"].dtype == torch.uint8
    save_file(sd, tmp_path / "head.safetensors")
    # A fresh head knows only the shapes (as a model config would record them), not the tree.
    fresh = TreeSoftmaxHead(D, **TreeSoftmaxHead.tree_shape(tree))
    with pytest.raises(ValueError, match="holds no tree yet"):
        fresh.log_probs(torch.randn(1, D))
    fresh.load_state_dict(load_file(tmp_path / "head.safetensors"))
    assert fresh.tree() == head.tree()
    h = torch.randn(5, D)
    torch.testing.assert_close(fresh.log_probs(h), head.log_probs(h), rtol=0, atol=0)
    torch.testing.assert_close(fresh.nll(h, torch.arange(5)), head.nll(h, torch.arange(5)), rtol=0, atol=0)


def test_tree_head_needs_a_tree_or_its_shape():
    with pytest.raises(ValueError, match=r"missing \['num_nodes', 'max_depth'\]"):
        TreeSoftmaxHead(D, vocab_size=V, max_codes=1)


def test_tree_training_touches_only_the_target_paths():
    tree = balanced_tree(V)
    head = TreeSoftmaxHead(D, tree)
    head.nll(torch.randn(1, D), torch.tensor([7])).sum().backward()
    on_path = {n for n, _ in tree.codes(7)[0]}
    touched = set(torch.nonzero(head.weight.grad.abs().sum(1)).flatten().tolist())
    assert touched == on_path
    assert len(on_path) in (tree.max_depth, tree.max_depth - 1)


def test_tree_head_survives_save_pretrained_from_pretrained(tmp_path):
    """The tree lives in the checkpoint (persistent buffers); the config only records its shape."""
    from transformers import PretrainedConfig, PreTrainedModel

    class TinyConfig(PretrainedConfig):
        model_type = "hf_nlm_test_tree_head"

        def __init__(self, vocab_size=V, num_nodes=1, max_codes=1, max_depth=1, **kwargs):
            self.num_nodes, self.max_codes, self.max_depth = num_nodes, max_codes, max_depth
            super().__init__(vocab_size=vocab_size, **kwargs)

    class Tiny(PreTrainedModel):
        config_class = TinyConfig

        def __init__(self, config):
            super().__init__(config)
            self.emb = nn.Embedding(config.vocab_size, D)
            shape = {k: getattr(config, k) for k in ("vocab_size", "num_nodes", "max_codes", "max_depth")}
            self.lm_head = TreeSoftmaxHead(D, **shape)
            self.post_init()

        def _init_weights(self, module):
            pass

        def forward(self, ids):
            return self.lm_head.log_probs(self.emb(ids))

    tree = TREES["adaptive_eps"]()
    model = Tiny(TinyConfig(**TreeSoftmaxHead.tree_shape(tree)))
    model.lm_head.load_state_dict(TreeSoftmaxHead(D, tree).state_dict())
    ids = torch.arange(V)[None]
    model.save_pretrained(tmp_path)
    loaded = Tiny.from_pretrained(tmp_path)
    assert loaded.lm_head.tree() == tree
    torch.testing.assert_close(loaded(ids), model(ids), rtol=0, atol=0)


# ---------------------------------------------------------------- tree softmax: ragged training path


def padded_nll(head: TreeSoftmaxHead, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The former ``nll``, kept as a reference: every target pays max_codes x max_depth padded steps."""
    h, t = hidden.reshape(-1, hidden.shape[-1]), target.reshape(-1)
    ignore = t == -100
    t = t.masked_fill(ignore, 0)
    nodes, bits, mask = head.tree_nodes[t], head.tree_bits[t].bool(), head.tree_mask[t].bool()  # (N, C, L)
    score = torch.einsum("ncld,nd->ncl", head.weight[nodes], h)
    if head.bias is not None:
        score = score + head.bias[nodes]
    log_p = (F.logsigmoid(torch.where(bits, score, -score)) * mask).sum(-1)
    log_p = log_p.masked_fill(~mask.any(-1), -math.inf).logsumexp(-1)
    return (-log_p).masked_fill(ignore, 0.0).view(target.shape)


def multi_code_tree() -> WordTree:
    """Word 0 has codes of lengths 2 and 3, word 3 two codes of length 3, words 1 and 2 one each."""
    return WordTree([[1, 2], [leaf(0), 3], [leaf(1), 4], [leaf(2), leaf(3)], [leaf(0), leaf(3)]], 4)


def steps_per_block(head: TreeSoftmaxHead, steps: int | None) -> None:
    """Make the CPU training path gather the rows ``steps`` path steps at a time (None: the sparse
    kernels)."""
    if steps is not None:
        head.sparse_kernel_dtypes = ()
        head.block_bytes = steps * head.in_features * head.weight.element_size()


@pytest.mark.parametrize("steps", [None, 1, 7])
@pytest.mark.parametrize("kind", list(TREES))
def test_tree_nll_equals_padded_and_brute_force(kind, steps):
    tree = TREES[kind]()
    head = make_head(f"tree_{kind}")
    steps_per_block(head, steps)
    torch.manual_seed(3)
    hidden = torch.randn(3, 17, D, dtype=torch.float64)
    target = torch.randint(0, V, (3, 17))
    target[0, :15], target[1, :15] = torch.arange(15), torch.arange(15, V)
    target[2, [1, 5, 6]] = -100
    with torch.no_grad():
        nll = head.nll(hidden, target)
        torch.testing.assert_close(nll, padded_nll(head, hidden, target))
        by_hand = -tree_by_hand(head, tree, hidden.reshape(-1, D)).log()
        expected = by_hand.gather(1, target.reshape(-1, 1).clamp_min(0)).view(target.shape)
        torch.testing.assert_close(nll, expected.masked_fill(target == -100, 0.0))


@pytest.mark.parametrize("steps", [None, 5])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kind", ["random", "huffman", "adaptive_eps"])
def test_tree_nll_gradients_equal_the_padded_ones(kind, sparse, steps):
    head = make_head(f"tree_{kind}")
    head.sparse = sparse
    steps_per_block(head, steps)
    torch.manual_seed(4)
    hidden = torch.randn(40, D, dtype=torch.float64)
    target = torch.randint(0, V, (40,))
    target[::9] = -100
    weights = torch.rand(40, dtype=torch.float64)  # distinct per-token weights in the loss
    grads = []
    for nll in (head.nll, lambda h, t: padded_nll(head, h, t)):
        head.zero_grad(set_to_none=True)
        h = hidden.clone().requires_grad_()
        (nll(h, target) * weights).sum().backward()
        grads.append((h.grad, head.weight.grad, head.bias.grad))
    (gh, gw, gb), (rh, rw, rb) = grads
    assert gw.is_sparse == sparse
    if sparse:  # one row per touched node, not one per path step
        assert gw._nnz() == gw.coalesce()._nnz()
    torch.testing.assert_close(gh, rh)
    torch.testing.assert_close(gw.to_dense(), rw)
    torch.testing.assert_close(gb, rb)


@pytest.mark.parametrize("steps", [None, 5])
@pytest.mark.parametrize("kind", ["random", "adaptive_eps"])
def test_tree_dense_gradient_accumulates_into_the_existing_one(kind, steps):
    """Dense mode, .grad kept: the node gradient is added into it in place, equal to autograd's sum."""
    head = make_head(f"tree_{kind}")
    steps_per_block(head, steps)
    torch.manual_seed(6)
    hidden = torch.randn(2, 30, D, dtype=torch.float64)
    target = torch.randint(0, V, (2, 30))
    ref = make_head(f"tree_{kind}")
    for h in hidden:
        head.nll(h, target[0]).sum().backward()
        padded_nll(ref, h, target[0]).sum().backward()
    assert head.weight.grad.layout == torch.strided
    torch.testing.assert_close(head.weight.grad, ref.weight.grad)
    torch.testing.assert_close(head.bias.grad, ref.bias.grad)


@pytest.mark.parametrize("steps", [None, 2])
def test_tree_nll_gradcheck_with_multiple_codes(steps):
    tree = multi_code_tree()
    assert tree.max_codes == 2 and sorted(map(len, tree.code_lengths())) == [1, 1, 2, 2]
    torch.manual_seed(5)
    head = TreeSoftmaxHead(3, tree).double()
    steps_per_block(head, steps)
    wrapper = _NLL(head)
    target = torch.tensor([0, 3, 1, -100, 2, 0, 3])
    hidden = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    weight = (torch.randn(tree.num_nodes, 3, dtype=torch.float64) * 0.7).requires_grad_()
    bias = (torch.randn(tree.num_nodes, dtype=torch.float64) * 0.7).requires_grad_()

    def f(h, w, b):
        return torch.func.functional_call(wrapper, {"head.weight": w, "head.bias": b}, (h, target))

    assert torch.autograd.gradcheck(f, (hidden, weight, bias))


def test_tree_nll_gathers_only_the_actual_path_steps(monkeypatch):
    """The training cost follows the targets' code lengths, not max_codes x max_depth; a node on several
    codes of one word costs one dot product."""
    from hf_nlm.heads import tree as tree_module

    seen = []
    original = tree_module._PathScores.apply

    def spy(weight, hidden, node, row, *rest):
        seen.append(node.numel())
        return original(weight, hidden, node, row, *rest)

    monkeypatch.setattr(tree_module._PathScores, "apply", spy)
    for kind in ("huffman", "adaptive_eps"):
        tree = TREES[kind]()
        head = TreeSoftmaxHead(D, tree)
        lengths = tree.code_lengths()
        several = [w for w, codes in enumerate(lengths) if len(codes) > 1][:1]  # a word with several codes
        assert len(several) == (kind == "adaptive_eps")
        target = torch.tensor([0, 1, 29, -100, 5, 5, *several])
        head.nll(torch.randn(len(target), D), target)
        words = [w for w in target.tolist() if w != -100]
        steps = sum(sum(lengths[w]) for w in words)
        distinct = sum(len(set(head.tree_nodes[w][head.tree_mask[w].bool()].tolist())) for w in words)
        assert seen[-1] == distinct and (distinct < steps) == bool(several)
        assert seen[-1] < 5 * tree.max_codes * tree.max_depth


def test_tree_nll_with_code_slots_in_any_order():
    """Buffers loaded from elsewhere may leave a word's first code slots empty; nll must not care."""
    head = make_head("tree_adaptive_eps")
    assert head.tree_nodes.shape[1] >= 2
    h = torch.randn(8, D, dtype=torch.float64)
    t = torch.tensor([0, 3, 7, 11, 15, 20, 26, 29])
    with torch.no_grad():
        before_nll, before_lp = head.nll(h, t), head.log_probs(h)
        for buf in (head.tree_nodes, head.tree_bits, head.tree_mask):
            buf.copy_(buf.flip(1))  # a one-code word now sits in its last slot
        assert not head.tree_mask[:, 0].all()
        torch.testing.assert_close(head.nll(h, t), before_nll)
        torch.testing.assert_close(head.log_probs(h), before_lp)


def test_tree_nll_follows_a_newly_loaded_tree():
    a, b = make_head("tree_balanced"), make_head("tree_random")
    h, t = torch.randn(6, D, dtype=torch.float64), torch.arange(6)
    with torch.no_grad():
        expected = a.nll(h, t)
        assert not torch.allclose(b.nll(h, t), expected)  # b's flat paths are now cached
        b.load_state_dict(a.state_dict())
        torch.testing.assert_close(b.nll(h, t), expected)


def test_tree_nll_needs_a_tree():
    fresh = TreeSoftmaxHead(D, **TreeSoftmaxHead.tree_shape(balanced_tree(V)))
    with pytest.raises(ValueError, match="holds no tree yet"):
        fresh.nll(torch.randn(2, D), torch.tensor([0, 1]))


def test_split_softmax_refuses_a_vocabulary_not_sorted_by_frequency():
    from hf_nlm.heads import check_frequency_order

    counts = torch.tensor([50.0, 40, 30, 20, 10, 5, 5, 1])
    check_frequency_order([3, 6], counts)  # sorted
    check_frequency_order([3], torch.tensor([50.0, 40, 29, 30, 10]))  # a near-tie at the cut is fine
    with pytest.raises(ValueError, match="not sorted by decreasing frequency"):
        check_frequency_order([3, 6], counts.flip(0))
    check_frequency_order([], counts.flip(0))  # no split: nothing to check


def test_frequency_order_check_leaves_special_tokens_out():
    from hf_nlm.heads import check_frequency_order

    # <unk> (id 0) never occurs in training, yet sits in the head cluster: not a reason to refuse.
    counts = torch.tensor([0.0, 30, 20, 10, 9, 8, 1])
    with pytest.raises(ValueError):
        check_frequency_order([4], counts, min_coverage=0.99)  # counted as a word, <unk> costs coverage
    check_frequency_order([4], counts, special_ids=[0, 1], min_coverage=0.99)


def test_default_cutoffs_near_the_cheapest_single_split_for_zipfian_words():
    """A run's split head without cutoffs takes ``default_cutoffs``; with Zipfian frequencies its expected
    cost per token, s_1 + 1 + p(tail) (|V| - s_1), is within 5% of the cheapest single split (brute force)."""
    from hf_nlm.heads.split import default_cutoffs

    assert default_cutoffs(2) == [1] and default_cutoffs(35) == [3]
    V = 10_000
    share = 1.0 / torch.arange(1, V + 1, dtype=torch.float64)
    head_mass = torch.cumsum(share / share.sum(), 0)  # head_mass[s - 1]: p(id < s)
    cost = torch.tensor([s + 1 + (1 - head_mass[s - 1]) * (V - s) for s in range(1, V)])
    (s1,) = default_cutoffs(V)
    assert cost[s1 - 1] <= 1.05 * cost.min()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tree_nll_of_words_whose_codes_share_nodes(dtype):
    """Word 3's two codes share their first five nodes (every word's codes share the root): the default
    training path, with no blocks set, gives -log P of the full distribution."""
    down = [(0, 1), (1, 1), (2, 0), (3, 1)]
    tree = WordTree.from_codes([
        [[(0, 0)], [(0, 1), (1, 1), (2, 1)]],
        [[(0, 1), (1, 0)]],
        [[(0, 1), (1, 1), (2, 0), (3, 0)]],
        [[*down, (4, 0), (5, 0)], [*down, (4, 0), (5, 1)]],
        [[*down, (4, 1)]],
    ])
    torch.manual_seed(0)
    head = TreeSoftmaxHead(3, tree).to(dtype)
    hidden = torch.randn(6, 3, dtype=dtype)
    target = torch.tensor([3, 0, 3, 1, 4, 2])
    expected = -head.log_probs(hidden).gather(1, target[:, None]).squeeze(1)
    torch.testing.assert_close(head.nll(hidden, target), expected)
