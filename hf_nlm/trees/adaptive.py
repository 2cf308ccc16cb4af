"""Mnih & Hinton's (2008) data-built word trees: recursive EM splits of the words' feature vectors.

A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008, sec. 4:

1. train a model with a random tree; 2. represent each word by the average predicted vector r_hat
over the contexts in which it occurs (:func:`word_vectors_from_predictions`); 3. split the words
recursively: fit a mixture of two *spherical* Gaussians to the words' vectors by EM and split by
the responsibilities r_i = P(component 1 | x_i):

* BALANCED: sort the words by responsibility and cut the list in half;
* ADAPTIVE: each word goes to the component with the larger responsibility;
* ADAPTIVE(eps): as ADAPTIVE, but a word with |r_i - 1/2| < eps goes down BOTH branches, so it
  ends at several leaves (several codes);

until a node holds one word. 4. train the model on the new tree.

The EM is batched over all the nodes of one tree level (segment sums with ``index_add_``), so the
whole build costs O(depth x EM iterations x |V| x D) tensor work and one Python loop per level.
"""

from __future__ import annotations

import numpy as np
import torch

from .word_tree import WordTree

TREE_MODES = ("adaptive", "balanced")  # the split rules of Mnih & Hinton's (2008) EM tree, sec. 4


def check_tree_mode(mode: str, eps: float, flags: bool = False) -> None:
    """Raise ``ValueError`` unless ``mode`` is a split rule and ``eps`` in [0, 0.5) fits it (``eps`` > 0,
    words down both branches, needs the adaptive rule). ``flags``: name them as the command-line flags."""
    mode_is, eps_name = ("--tree-mode {}", "--eps") if flags else ("mode={!r}", "eps")
    if mode not in TREE_MODES:
        name = "--tree-mode" if flags else "mode"
        raise ValueError(f"{name} must be one of {', '.join(TREE_MODES)}, got {mode!r}")
    if not (isinstance(eps, (int, float)) and 0.0 <= eps < 0.5):
        raise ValueError(f"{eps_name} must lie in [0, 0.5), got {eps!r}")
    if eps > 0 and mode != "adaptive":
        raise ValueError(
            f"{eps_name} applies to {mode_is.format('adaptive')} only (words down both branches), not "
            f"{mode_is.format(mode)}"
        )


def adaptive_tree(
    word_vectors: torch.Tensor | np.ndarray,
    mode: str = "balanced",
    eps: float = 0.0,
    max_iter: int = 50,
    tol: float = 1e-4,
    max_codes: int = 8,
    seed: int = 0,
) -> WordTree:
    """Build a word tree by recursive two-component spherical-Gaussian EM (Mnih & Hinton 2008, sec. 4).

    Args:
        word_vectors: (|V|, D) feature vector of each word (e.g. from :func:`word_vectors_from_predictions`).
        mode: ``"balanced"`` (sort by responsibility, cut in half) or ``"adaptive"`` (more responsible
            component wins).
        eps: with ``mode="adaptive"``, words whose responsibility is within ``eps`` of 0.5 go down both
            branches (multiple codes). Must lie in [0, 0.5); 0 gives one code per word.
        max_iter, tol: EM stops after ``max_iter`` iterations or when no responsibility moves by ``tol``.
        max_codes: a word is not duplicated once it would exceed this many codes (bounds the tree size).
        seed: seeds the initial projection directions (the result is deterministic given the seed).

    A split that leaves one side empty (EM put every word on one side, e.g. identical vectors) falls
    back to a balanced split, so every node strictly shrinks and the recursion ends at one word.
    """
    check_tree_mode(mode, eps)
    if max_codes < 1:
        raise ValueError(f"max_codes must be >= 1, got {max_codes}")
    X = torch.as_tensor(np.asarray(word_vectors) if not torch.is_tensor(word_vectors) else word_vectors)
    X = X.detach().to(torch.float64).cpu()
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"word_vectors must have shape (vocab_size >= 2, D), got {tuple(X.shape)}")
    if not torch.isfinite(X).all():
        bad = int(torch.nonzero(~torch.isfinite(X).all(1))[0])
        raise ValueError(f"word_vectors has a non-finite entry in the row of word {bad}")
    V = X.shape[0]
    gen = torch.Generator().manual_seed(seed)

    children: list[np.ndarray] = []  # one (G, 2) block per level, in breadth-first node order
    # The rows of the current level: which word, in which segment (= internal node of this level).
    word = torch.arange(V)
    seg = torch.zeros(V, dtype=torch.int64)
    G, next_id = 1, 1
    codes_of = torch.ones(V, dtype=torch.int64)  # number of leaves/branches each word currently occupies
    while G:
        r, score = _em_responsibilities(X[word], seg, G, max_iter, tol, gen)
        go_left, go_right = _split(r, score, word, seg, G, mode, eps, codes_of, max_codes)
        codes_of += torch.bincount(word[go_left & go_right], minlength=V)
        # Children of segment g: side 0 = left (component 1), side 1 = right.
        child_seg = torch.cat([seg[go_left] * 2, seg[go_right] * 2 + 1])
        child_word = torch.cat([word[go_left], word[go_right]])
        size = torch.bincount(child_seg, minlength=2 * G)  # (2G,)
        internal = size >= 2
        entry = torch.empty(2 * G, dtype=torch.int64)
        # A child holding one word is a leaf; sort children by (seg, side) so new ids are breadth-first.
        singles = ~internal[child_seg]
        entry.index_put_((child_seg[singles],), -child_word[singles] - 1)
        n_new = int(internal.sum())
        entry[internal] = torch.arange(next_id, next_id + n_new)
        children.append(entry.view(G, 2).numpy())
        # Next level: the internal children, renumbered 0..n_new-1 in (seg, side) order.
        new_index = torch.cumsum(internal.long(), 0) - 1
        keep = internal[child_seg]
        seg, word = new_index[child_seg[keep]], child_word[keep]
        G, next_id = n_new, next_id + n_new
    return WordTree(np.concatenate(children), V)


def _em_responsibilities(
    X: torch.Tensor, seg: torch.Tensor, G: int, max_iter: int, tol: float, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """EM for a mixture of two spherical Gaussians in each of G segments of the rows of X, batched.

    Component k of segment g: N(mu_gk, var_gk I) with weight pi_gk. Returns the responsibility of
    component 1 for every row, and the rows' projection on their segment's principal direction
    (a tie-breaker for the balanced split).
    """
    R, D = X.shape

    def segsum(v: torch.Tensor) -> torch.Tensor:
        return torch.zeros((G,) + v.shape[1:], dtype=v.dtype).index_add_(0, seg, v)

    n = segsum(torch.ones(R, dtype=X.dtype))
    mean = segsum(X) / n[:, None]
    Xc = X - mean[seg]
    # Initialise along each segment's first principal direction (a few power iterations): the
    # first split of the data's largest spread, deterministic given the seed.
    v = torch.randn(G, D, generator=gen, dtype=X.dtype)
    for _ in range(10):
        p = (Xc * v[seg]).sum(1)
        v = segsum(Xc * p[:, None])
        v = v / v.norm(dim=1, keepdim=True).clamp_min(1e-300)
    score = (Xc * v[seg]).sum(1)
    r = (score > 0).to(X.dtype)
    # A variance floor relative to the data's spread keeps a one-word component from collapsing to 0.
    floor = max(float((Xc**2).sum()) / (R * D), 1e-12) * 1e-6
    # Squared distances by expansion, ||x - mu||^2 = ||x||^2 - 2 x.mu + ||mu||^2: one batched product
    # against both components' means instead of two (R, D) differences per iteration.
    # EM runs on the per-segment centred rows (translation-invariant, and keeps the expansion exact).
    X = Xc
    xx = (X * X).sum(1)
    sum_x = segsum(X)
    for _ in range(max_iter):
        # M-step: weights, means, one variance per component (spherical).
        n1 = segsum(r)
        n0 = n - n1
        sum1 = segsum(r[:, None] * X)
        mu = torch.stack(
            [sum1 / n1.clamp_min(1e-300)[:, None], (sum_x - sum1) / n0.clamp_min(1e-300)[:, None]], 1
        )
        xmu = torch.bmm(mu[seg], X[:, :, None]).squeeze(-1)  # (R, 2): x . mu_1, x . mu_0
        dist = (xx[:, None] - 2 * xmu + (mu * mu).sum(-1)[seg]).clamp_min(0)
        d1, d0 = dist[:, 0], dist[:, 1]
        var1 = (segsum(r * d1) / (D * n1.clamp_min(1e-300))).clamp_min(floor)
        var0 = (segsum((1 - r) * d0) / (D * n0.clamp_min(1e-300))).clamp_min(floor)
        # E-step: r = pi1 N1 / (pi1 N1 + pi0 N0), as a sigmoid of the log-odds (no overflow).
        lp1 = torch.log(n1 / n)[seg] - 0.5 * D * torch.log(var1)[seg] - d1 / (2 * var1[seg])
        lp0 = torch.log(n0 / n)[seg] - 0.5 * D * torch.log(var0)[seg] - d0 / (2 * var0[seg])
        new_r = torch.nan_to_num(torch.sigmoid(lp1 - lp0), nan=0.5)
        done = (new_r - r).abs().max() < tol
        r = new_r
        if done:
            break
    return r, score


def _split(
    r: torch.Tensor,
    score: torch.Tensor,
    word: torch.Tensor,
    seg: torch.Tensor,
    G: int,
    mode: str,
    eps: float,
    codes_of: torch.Tensor,
    max_codes: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which rows go to the left (component 1) and right child; a row may go to both (ADAPTIVE(eps))."""
    n = torch.bincount(seg, minlength=G)
    balanced_left = _balanced_left(r, score, word, seg, n)
    if mode == "balanced":
        return balanced_left, ~balanced_left
    left = r >= 0.5
    both = (r - 0.5).abs() < eps
    if eps > 0:
        # Bound the tree: a word may not take more than max_codes leaves.
        extra = torch.bincount(word[both], minlength=codes_of.numel())
        both &= (codes_of + extra)[word] <= max_codes
    n_left = torch.bincount(seg, weights=(left | both).double(), minlength=G)
    n_right = torch.bincount(seg, weights=(~left | both).double(), minlength=G)
    # Duplicating must still shrink both sides (else the recursion would not end): drop it where not.
    bad_dup = (n_left >= n) | (n_right >= n)
    both &= ~bad_dup[seg]
    n_left = torch.bincount(seg, weights=left.double(), minlength=G)
    degenerate = (n_left == 0) | (n_left == n)  # EM put everyone on one side
    left = torch.where(degenerate[seg], balanced_left, left)
    both &= ~degenerate[seg]
    return left | both, ~left | both


def _balanced_left(
    r: torch.Tensor, score: torch.Tensor, word: torch.Tensor, seg: torch.Tensor, n: torch.Tensor
) -> torch.Tensor:
    """BALANCED split: within each segment, the ceil(n/2) rows with the largest responsibility."""
    # Sort by segment, then responsibility (descending), then projection, then word id (determinism).
    order = np.lexsort((word.numpy(), -score.numpy(), -r.numpy(), seg.numpy()))
    order_t = torch.from_numpy(order)
    start = torch.cumsum(n, 0) - n
    rank = torch.empty_like(seg)
    rank[order_t] = torch.arange(seg.numel()) - start[seg[order_t]]
    return rank < (n[seg] + 1) // 2


def word_vectors_from_predictions(
    hidden: torch.Tensor, targets: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """Each word's average predicted vector over the contexts it occurs in (Mnih & Hinton 2008, sec. 4).

    ``hidden`` (N, D) are the predicted vectors r_hat (the head's input) at N positions and ``targets``
    (N,) the words that followed. A word never seen gets the mean of all vectors, so it sits in the
    middle of the split (and with ADAPTIVE(eps) may go down both branches).
    """
    hidden = hidden.detach().reshape(-1, hidden.shape[-1]).double()
    targets = targets.reshape(-1).long()
    if targets.numel() != hidden.shape[0]:
        raise ValueError(f"hidden has {hidden.shape[0]} positions but targets has {targets.numel()}")
    if targets.numel() and (targets.min() < 0 or targets.max() >= vocab_size):
        raise ValueError(f"targets must lie in 0..{vocab_size - 1}")
    sums = torch.zeros(vocab_size, hidden.shape[1], dtype=hidden.dtype).index_add_(0, targets, hidden)
    counts = torch.bincount(targets, minlength=vocab_size).to(hidden.dtype)
    mean_all = hidden.mean(0) if hidden.shape[0] else torch.zeros(hidden.shape[1], dtype=hidden.dtype)
    out = torch.where(counts[:, None] > 0, sums / counts.clamp_min(1)[:, None], mean_all)
    return out


__all__ = ["adaptive_tree", "word_vectors_from_predictions"]
