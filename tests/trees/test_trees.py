"""Word trees: structure, builders (balanced, random, Huffman, EM-built), validation, save/load."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from hf_nlm.trees import (
    WordTree,
    adaptive_tree,
    balanced_tree,
    huffman_tree,
    leaf,
    random_tree,
    word_vectors_from_predictions,
)
from hf_nlm.trees.adaptive import _em_responsibilities


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny tensors gain nothing from threads, and on a busy 2-core machine the thread pool's barriers
    # make every small op wait for a descheduled thread (tests ran 5x slower under load).
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def words_under(tree: WordTree, node: int, bit: int) -> set[int]:
    """Words with a code passing through branch (node, bit), from the per-word codes."""
    return {w for w in range(tree.vocab_size) for code in tree.codes(w) if (node, bit) in code}


def check_is_proper_tree(tree: WordTree) -> None:
    codes = tree.all_codes()
    assert len(codes) == tree.vocab_size
    all_paths = [tuple(c) for word_codes in codes for c in word_codes]
    assert len(all_paths) == len(set(all_paths)) == tree.num_leaves == tree.num_nodes + 1
    # Prefix-free: no code is a prefix of another (a leaf is never an internal node).
    bitstrings = {tuple(b for _, b in p) for p in all_paths}
    for s in bitstrings:
        for k in range(1, len(s)):
            assert s[:k] not in bitstrings
    # Kraft equality for a full binary tree: sum over leaves 2^-depth = 1.
    assert math.isclose(sum(2.0 ** -len(p) for p in all_paths), 1.0)


# ---------------------------------------------------------------- builders


@pytest.mark.parametrize("V", [2, 3, 5, 8, 13, 100])
def test_balanced_tree_shape(V):
    tree = balanced_tree(V)
    check_is_proper_tree(tree)
    assert tree.num_nodes == V - 1
    assert tree.max_codes == 1
    assert tree.max_depth == math.ceil(math.log2(V))
    lengths = [ls[0] for ls in tree.code_lengths()]
    assert max(lengths) - min(lengths) <= 1
    # Leaves left to right are the words in order (the first half of the words under bit 0 of the root).
    assert words_under(tree, 0, 0) == set(range((V + 1) // 2))


def test_random_tree_is_a_seeded_permutation_of_the_balanced_shape():
    a, b, c = random_tree(50, seed=1), random_tree(50, seed=1), random_tree(50, seed=2)
    check_is_proper_tree(a)
    assert a == b and a != c
    assert sorted(ls[0] for ls in a.code_lengths()) == sorted(
        ls[0] for ls in balanced_tree(50).code_lengths()
    )
    assert words_under(a, 0, 0) != set(range(25))


def test_huffman_textbook_example():
    # Cormen et al., Introduction to Algorithms, sec. 16.3: a..f with frequencies 45 13 12 16 9 5
    # (thousands) give 224,000 bits, i.e. 2.24 bits per character; 'a' gets a 1-bit code.
    counts = [45, 13, 12, 16, 9, 5]
    tree = huffman_tree(counts)
    check_is_proper_tree(tree)
    assert tree.expected_code_length(counts) == pytest.approx(2.24)
    assert tree.code_lengths()[0] == [1]
    assert sorted(ls[0] for ls in tree.code_lengths()) == [1, 3, 3, 3, 4, 4]


def optimal_prefix_code_cost(p: np.ndarray) -> float:
    """Brute force: the least sum p_i l_i over code lengths with Kraft equality (full binary trees)."""
    V = len(p)
    best = math.inf
    for lengths in itertools.product(range(1, V), repeat=V):
        if sum(2.0**-x for x in lengths) == 1.0:
            best = min(best, float(np.dot(p, lengths)))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_huffman_is_optimal_by_brute_force(seed):
    counts = np.random.default_rng(seed).integers(1, 50, size=6).astype(float)
    p = counts / counts.sum()
    assert huffman_tree(counts).expected_code_length(counts) == pytest.approx(optimal_prefix_code_cost(p))


def test_huffman_within_entropy_bound_and_beats_balanced_on_zipf():
    counts = 1.0 / np.arange(1, 1001)
    p = counts / counts.sum()
    entropy = float(-(p * np.log2(p)).sum())
    tree = huffman_tree(counts)
    length = tree.expected_code_length(counts)
    assert entropy <= length < entropy + 1
    assert length < balanced_tree(1000).expected_code_length(counts)
    lengths = [ls[0] for ls in tree.code_lengths()]
    assert lengths[0] == min(lengths) and lengths[-1] == max(lengths)  # frequent words are shallow


def two_clusters(n_a: int, n_b: int, dim: int = 6, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centre = np.zeros(dim)
    centre[0] = 10.0
    return np.concatenate([rng.normal(size=(n_a, dim)) + centre, rng.normal(size=(n_b, dim)) - centre])


def ambiguous_vectors(n: int = 30) -> np.ndarray:
    """Two overlapping mirror-image clusters (+-2 on axis 0, unit spread) and 2 words at the origin.

    By symmetry EM gives the last two words responsibility 1/2 at the root.
    """
    A = np.random.default_rng(0).normal(size=(n, 2))
    A[:, 0] += 2.0
    return np.concatenate([A, -A, np.zeros((2, 2))])


def test_adaptive_split_separates_two_clusters():
    X = two_clusters(12, 20)
    tree = adaptive_tree(X, mode="adaptive")
    check_is_proper_tree(tree)
    sides = {frozenset(words_under(tree, 0, 0)), frozenset(words_under(tree, 0, 1))}
    assert sides == {frozenset(range(12)), frozenset(range(12, 32))}


def test_balanced_split_cuts_in_half_by_responsibility():
    X = two_clusters(12, 20)
    tree = adaptive_tree(X, mode="balanced")
    check_is_proper_tree(tree)
    left, right = words_under(tree, 0, 0), words_under(tree, 0, 1)
    assert len(left) == len(right) == 16
    # The 12 words of the small cluster all land on one side (they are the most responsible ones).
    small = set(range(12))
    assert small <= left or small <= right
    assert tree.max_depth == 5  # balanced all the way down


def test_adaptive_eps_gives_ambiguous_words_two_codes():
    X = ambiguous_vectors()
    tree = adaptive_tree(X, mode="adaptive", eps=0.3)
    check_is_proper_tree(tree)
    # At the root only the two middle words go down both branches; the clusters are split apart.
    left, right = words_under(tree, 0, 0), words_under(tree, 0, 1)
    assert left & right == {60, 61}
    # (the clusters overlap a little, so a few words near the middle may land on the other side)
    a_side = left if len(left & set(range(30))) > 15 else right
    assert len(a_side & set(range(30))) >= 27 and len(a_side & set(range(30, 60))) <= 3
    n_codes = tree.num_codes()
    assert n_codes[60] >= 2 and n_codes[61] >= 2
    assert tree.max_codes >= 2 and tree.num_leaves == n_codes.sum()
    assert adaptive_tree(X, mode="adaptive", eps=0.0).max_codes == 1


def test_adaptive_max_codes_bounds_duplication():
    tree = adaptive_tree(ambiguous_vectors(), mode="adaptive", eps=0.49, max_codes=2)
    check_is_proper_tree(tree)
    assert tree.max_codes <= 2


def test_degenerate_vectors_fall_back_to_balanced_splits():
    tree = adaptive_tree(np.ones((9, 3)), mode="adaptive")
    check_is_proper_tree(tree)
    assert tree.max_depth == math.ceil(math.log2(9))


def test_em_responsibilities_are_a_fixed_point_of_spherical_em():
    """Independent numpy EM step from the returned responsibilities reproduces them."""
    X = two_clusters(15, 25, dim=3, seed=3) * 0.3  # overlapping a little: soft responsibilities
    Xt = torch.tensor(X)
    r, _ = _em_responsibilities(Xt, torch.zeros(40, dtype=torch.int64), 1, 500, 1e-12, torch.Generator())
    r = r.numpy()
    D = X.shape[1]
    new = []
    for resp in (r, 1 - r):
        mu = (resp[:, None] * X).sum(0) / resp.sum()
        var = (resp * ((X - mu) ** 2).sum(1)).sum() / (D * resp.sum())
        log_pdf = -0.5 * D * np.log(2 * np.pi * var) - ((X - mu) ** 2).sum(1) / (2 * var)
        new.append(np.log(resp.mean()) + log_pdf)
    r_new = 1.0 / (1.0 + np.exp(new[1] - new[0]))
    np.testing.assert_allclose(r_new, r, atol=1e-6)
    assert ((r > 0.5) == (np.arange(40) < 15)).all() or ((r > 0.5) == (np.arange(40) >= 15)).all()


def test_word_vectors_from_predictions_averages_per_target():
    hidden = torch.tensor([[1.0, 0.0], [3.0, 2.0], [0.0, 4.0]])
    targets = torch.tensor([0, 0, 2])
    vecs = word_vectors_from_predictions(hidden, targets, vocab_size=4)
    torch.testing.assert_close(vecs[0], torch.tensor([2.0, 1.0], dtype=torch.float64))
    torch.testing.assert_close(vecs[2], torch.tensor([0.0, 4.0], dtype=torch.float64))
    torch.testing.assert_close(vecs[1], hidden.double().mean(0))  # unseen: overall mean


# ---------------------------------------------------------------- tensors, codes, save/load


def test_to_tensors_matches_codes_and_round_trips():
    X = ambiguous_vectors()
    for tree in (
        balanced_tree(7),
        huffman_tree([5, 1, 1, 2, 8, 3, 1]),
        adaptive_tree(X, mode="adaptive", eps=0.3),
    ):
        t = tree.to_tensors()
        V, C, L = t.nodes.shape
        assert (V, C, L) == (tree.vocab_size, tree.max_codes, tree.max_depth)
        assert t.nodes.dtype == torch.int64 and t.bits.dtype == torch.bool and t.mask.dtype == torch.bool
        for w in range(V):
            got = sorted(
                list(
                    zip(
                        t.nodes[w, c][t.mask[w, c]].tolist(),
                        t.bits[w, c][t.mask[w, c]].long().tolist(),
                        strict=True,
                    )
                )
                for c in range(C)
                if t.mask[w, c].any()
            )
            assert got == sorted(tree.codes(w))
        # A path's mask is a prefix of ones.
        assert (t.mask[..., 1:] <= t.mask[..., :-1]).all()
        assert WordTree.from_tensors(*t) == tree
        assert WordTree.from_codes(tree.all_codes()) == tree


def test_save_load_json(tmp_path):
    tree = adaptive_tree(ambiguous_vectors(), mode="adaptive", eps=0.3)
    assert tree.max_codes > 1
    path = tmp_path / "tree.json"
    tree.save(path)
    assert WordTree.load(path) == tree
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="bad.json.*not a word tree"):
        WordTree.load(tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ValueError, match="broken.json"):
        WordTree.load(tmp_path / "broken.json")
    (tmp_path / "missing.json").write_text(
        '{"format": "hf_nlm.word_tree", "version": 1, "vocab_size": 3, "children": [[-1, -2]]}'
    )
    with pytest.raises(ValueError, match="missing.json.*word 2 is missing"):
        WordTree.load(tmp_path / "missing.json")


def test_renumbered_breadth_first_keeps_the_codes_up_to_node_names():
    # Node 1 deeper than node 2 in this numbering: 0 -> (2, w0), 2 -> (1, w1), 1 -> (w2, w3)
    tree = WordTree([[2, leaf(0)], [leaf(2), leaf(3)], [1, leaf(1)]], 4)
    bfs = tree.renumbered_breadth_first()
    assert [len(c[0]) for c in bfs.all_codes()] == [len(c[0]) for c in tree.all_codes()]
    assert (np.diff(bfs.depth) >= 0).all()
    bits = [[tuple(b for _, b in code) for code in codes] for codes in tree.all_codes()]
    assert bits == [[tuple(b for _, b in code) for code in codes] for codes in bfs.all_codes()]


# ---------------------------------------------------------------- errors


def test_bad_trees_are_refused_with_clear_errors():
    with pytest.raises(ValueError, match="word 2 is missing"):
        WordTree([[leaf(0), leaf(1)]], 3)
    with pytest.raises(ValueError, match="word 1 has no code"):
        WordTree.from_codes([[[(0, 0)]], [], [[(0, 1)]]])
    with pytest.raises(ValueError, match="word 0 has the same code twice"):
        WordTree.from_codes([[[(0, 0)], [(0, 0)]], [[(0, 1)]]])
    with pytest.raises(ValueError, match="words 0 and 1 have the same code"):
        WordTree.from_codes([[[(0, 0)]], [[(0, 0)]], [[(0, 1)]]])
    with pytest.raises(ValueError, match="bit 2.*binary"):
        WordTree.from_codes([[[(0, 0)]], [[(0, 1)]], [[(0, 2)]]])
    with pytest.raises(ValueError, match="node 1 has only one child"):
        WordTree.from_codes([[[(0, 0), (1, 0)]], [[(0, 1)]]])
    with pytest.raises(ValueError, match="node 0 has 3 children.*binary"):
        WordTree([[leaf(0), leaf(1), leaf(2)]], 3)
    with pytest.raises(ValueError, match="node 2 has 2 parents"):
        WordTree([[1, 2], [2, leaf(0)], [leaf(1), leaf(2)]], 3)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        WordTree([[leaf(0), leaf(5)]], 2)
    with pytest.raises(ValueError, match="starts at node 1"):
        WordTree.from_codes([[[(1, 0)]], [[(1, 1)]]])


@pytest.mark.parametrize("eps", [-0.1, 0.5, 0.7])
def test_eps_outside_range_is_refused(eps):
    with pytest.raises(ValueError, match=r"eps must lie in \[0, 0.5\)"):
        adaptive_tree(np.zeros((4, 2)), mode="adaptive", eps=eps)


def test_adaptive_tree_argument_errors():
    with pytest.raises(ValueError, match="mode must be"):
        adaptive_tree(np.zeros((4, 2)), mode="random")
    with pytest.raises(ValueError, match="applies to mode='adaptive'"):
        adaptive_tree(np.zeros((4, 2)), mode="balanced", eps=0.1)
    with pytest.raises(ValueError, match="shape"):
        adaptive_tree(np.zeros(4))
    with pytest.raises(ValueError, match="non-finite.*word 1"):
        adaptive_tree(np.array([[0.0], [np.nan], [1.0]]))
    with pytest.raises(ValueError, match="word 2 has count -1"):
        huffman_tree([1, 2, -1])
    with pytest.raises(ValueError, match="at least 2 words"):
        balanced_tree(1)


def test_resized_tree_by_hand():
    """balanced_tree(4): root 0 -> nodes 1 (words 0, 1) and 2 (words 2, 3). Adding word 4 splits the first
    shallowest leaf (word 0's); cutting word 3 leaves node 2 with word 2 alone, which takes its place."""
    tree = balanced_tree(4)
    assert tree.children.tolist() == [[1, 2], [leaf(0), leaf(1)], [leaf(2), leaf(3)]]
    grown, origin = tree.resized(5)
    assert grown.children.tolist() == [[1, 2], [3, leaf(1)], [leaf(2), leaf(3)], [leaf(0), leaf(4)]]
    assert origin.tolist() == [0, 1, 2, -1]
    cut, origin = tree.resized(3)
    assert cut.children.tolist() == [[1, leaf(2)], [leaf(0), leaf(1)]]
    assert origin.tolist() == [0, 1]
    assert grown.resized(4)[0] == tree  # and back


@pytest.mark.parametrize("size", [2, 3, 9, 17, 40])
def test_resized_tree_keeps_each_kept_words_path_through_the_nodes_it_keeps(size):
    """Every word kept has its codes, through the nodes kept (in their new numbers) and the same bits, with
    the collapsed nodes left out (and new nodes added below it on bit 0 where a new word split its leaf); a
    new word has one leaf, below a new node; the tree is a valid word tree numbered breadth-first."""
    tree = huffman_tree(list(range(17, 0, -1)))
    new, origin = tree.resized(size)
    assert new.vocab_size == size and new == new.renumbered_breadth_first()
    renumber = {int(old): n for n, old in enumerate(origin) if old >= 0}
    for w in range(min(size, tree.vocab_size)):
        expected = [[(renumber[n], b) for n, b in code if n in renumber] for code in tree.codes(w)]
        # A word whose leaf a new word split continues through the new node(s), on bit 0.
        old_part = [[(n, b) for n, b in code if origin[n] >= 0] for code in new.codes(w)]
        assert old_part == expected, w
        assert all(b == 0 for code in new.codes(w) for n, b in code if origin[n] < 0), w
    for w in range(tree.vocab_size, size):
        (code,) = new.codes(w)  # one leaf, below a new node (bit 1 of it, or bit 0 of a later one)
        assert origin[code[-1][0]] == -1 and any(origin[n] == -1 and b == 1 for n, b in code)
