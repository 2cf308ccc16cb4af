"""What transformers expects of every tensor of a model, checked for every registered model type and head (the
cases of tests/models/test_model_contract.py): each is a parameter or a buffer that ``init_weights`` can write
again, so that a model built on the meta device (as ``from_pretrained`` builds it) and a checkpoint that lacks
a key both give a working model; and ``resize_token_embeddings`` follows with every head."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from test_model_contract import CASES, IDS, NUMERAL_VOCAB, V, batch, inputs, tiny

from hf_nlm.heads import TREE_FIELDS
from hf_nlm.models import MODEL_TYPES
from hf_nlm.trees import WordTree, balanced_tree, huffman_tree, random_tree

TREE_BUFFERS = ("tree_nodes", "tree_bits", "tree_mask")


@pytest.fixture(autouse=True)
def quiet_load_reports():
    """A checkpoint with a key removed on purpose: transformers' load report would fill the test log."""
    from transformers.utils import logging

    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    yield
    logging.set_verbosity(level)
    if bars:
        logging.enable_progress_bar()


def same_tree(model) -> WordTree | None:
    """The tree ``tiny`` builds its tree head over (None for other heads)."""
    return random_tree(V, seed=0) if model.config.head == "tree" else None


def log_probs(model, ids: torch.LongTensor) -> torch.Tensor:
    with torch.no_grad():
        logits = model(**inputs(model, ids)).logits
    return logits if model.lm_head.returns_log_probs else torch.log_softmax(logits, dim=-1)


def fill_with_garbage(model) -> None:
    """What uninitialised memory may hold: NaN, or integers and flags that name nothing."""
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            t.fill_(float("nan") if t.is_floating_point() else True if t.dtype == torch.bool else -7)


# ----------------------------------------------------------------------------- every tensor is restorable


def plain_tensors(module: torch.nn.Module, prefix: str) -> list[str]:
    """Tensors that ``module`` holds outside its parameters and buffers (in attributes, lists, dicts), other
    than aliases of those (nn.LSTM keeps its weights in a list too) and the caches it declares as derived."""
    own = {id(t) for t in (*module._parameters.values(), *module._buffers.values()) if t is not None}
    allowed = set(getattr(type(module), "derived_caches", ()))
    found = []

    def walk(value, path: str) -> None:
        if isinstance(value, torch.Tensor):
            if id(value) not in own:
                found.append(path)
        elif isinstance(value, (list, tuple, set)):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}[{key!r}]")

    for name, value in vars(module).items():
        if name not in ("_parameters", "_buffers", "_modules") and name not in allowed:
            walk(value, f"{prefix}{name}")
    return found


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_no_module_holds_a_plain_tensor(name, head):
    """State in a plain tensor attribute is lost on the meta device (and missed by ``.to()`` and the state
    dict)."""
    model = tiny(name, head)
    ids = batch()
    model.train()
    model(**inputs(model, ids), labels=ids).loss.backward()
    model.eval()
    log_probs(model, ids)
    found = [path for prefix, module in model.named_modules() for path in plain_tensors(module, f"{prefix}.")]
    assert found == []


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_built_on_the_meta_device_then_init_weights_writes_every_buffer(name, head):
    """transformers' own path: build on meta, materialise (``to_empty``: whatever the memory holds),
    initialise. Every buffer comes back as the model built on the CPU has it (a tree given at construction
    included), every parameter is drawn, and with the CPU model's parameters the two give the same
    distribution."""
    real = tiny(name, head).eval()
    with torch.device("meta"):
        empty = MODEL_TYPES[name].lm_class(real.config, tree=same_tree(real))
    empty = empty.to_empty(device="cpu")
    fill_with_garbage(empty)
    empty.init_weights()
    buffers = dict(real.named_buffers())
    for key, buffer in empty.named_buffers():
        torch.testing.assert_close(buffer, buffers[key], rtol=0, atol=0, msg=key)
    for key, param in empty.named_parameters():
        assert torch.isfinite(param).all(), key
    empty.eval()
    assert torch.isfinite(log_probs(empty, batch())).all()
    with torch.no_grad():
        for key, param in empty.named_parameters():
            param.copy_(real.get_parameter(key))
    torch.testing.assert_close(log_probs(empty, batch()), log_probs(real, batch()))


def checkpoints_each_without_one_key(model, folder: Path) -> dict[str, Path]:
    """``model`` saved once per key of its head (and once for the body's first key), each time without that
    key in its weights file: {key: folder}."""
    model.save_pretrained(folder / "full")
    weights = load_file(folder / "full" / "model.safetensors")
    keys = ([k for k in weights if k.startswith("lm_head.")]
            + [next(k for k in weights if not k.startswith("lm_head."))])
    out = {}
    for i, key in enumerate(keys):
        model.save_pretrained(folder / str(i))
        save_file({k: v for k, v in weights.items() if k != key}, folder / str(i) / "model.safetensors",
                  metadata={"format": "pt"})
        out[key] = folder / str(i)
    return out


@pytest.fixture
def garbage_memory(monkeypatch):
    """``torch.empty_like`` (how from_pretrained materialises a key the checkpoint lacks) filled with garbage,
    so that a tensor nothing initialises shows, whatever the allocator happens to return."""
    empty_like = torch.empty_like

    def filled(*args, **kwargs):
        t = empty_like(*args, **kwargs)
        return t.fill_(float("nan") if t.is_floating_point() else True if t.dtype == torch.bool else -7)

    monkeypatch.setattr(torch, "empty_like", filled)


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_from_pretrained_initialises_the_key_a_checkpoint_lacks(name, head, tmp_path, garbage_memory):
    """A checkpoint missing one key loads, as in transformers: the key's tensor is initialised (a buffer
    written as the model builds it, a lost tree buffer rebuilt from the two others), never left on meta,
    empty or garbage, and the key is reported missing."""
    real = tiny(name, head).eval()
    saved = real.state_dict()
    ids = batch()
    expected = log_probs(real, ids)
    for key, folder in checkpoints_each_without_one_key(real, tmp_path).items():
        loaded, info = type(real).from_pretrained(folder, output_loading_info=True)
        loaded.eval()
        # the key, and a weight tied to it (transformers reports both)
        assert key in info["missing_keys"] <= {key, *loaded.all_tied_weights_keys}, key
        state = loaded.state_dict()
        assert all(t.device.type == "cpu" for t in state.values()), key
        assert all(torch.isfinite(t).all() for t in state.values() if t.is_floating_point()), key
        for other, value in saved.items():  # what was in the checkpoint is what loaded (ties aside)
            if state[other].data_ptr() != state[key].data_ptr():
                torch.testing.assert_close(state[other], value, rtol=0, atol=0,
                                           msg=f"{other} (without {key})")
        got = log_probs(loaded, ids)
        assert torch.isfinite(got).all(), key
        # A proper distribution over the vocabulary, whatever was lost.
        torch.testing.assert_close(got.logsumexp(-1), torch.zeros(got.shape[:-1]), msg=key)
        if key.endswith(".tree_bits"):
            # Which branch is bit 1 is lost with it: the same words under each node, maybe mirrored.
            assert loaded.lm_head.tree().code_lengths() == real.lm_head.tree().code_lengths()
        elif key not in dict(real.named_parameters()):
            # A buffer follows from the config (or, for a tree, from the two others): the model is the saved
            # one.
            torch.testing.assert_close(state[key], saved[key], rtol=0, atol=0, msg=key)
            torch.testing.assert_close(got, expected, msg=key)


TREE_CASES = [case for case in CASES if case[1] == "tree" or case[0] == "hlbl"]


@pytest.mark.parametrize(("name", "head"), TREE_CASES,
                         ids=[f"{name}-{head or 'default'}" for name, head in TREE_CASES])
def test_a_tree_the_checkpoint_lacks_comes_from_the_tree_given(name, head, tmp_path):
    """Without any tree buffer, the tree comes from ``tree=`` (passed on to the model); without one either,
    using the model says what to do."""
    real = tiny(name, head).eval()
    real.save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    weights = {k: v for k, v in load_file(path).items() if k.split(".")[-1] not in TREE_BUFFERS}
    save_file(weights, path, metadata={"format": "pt"})
    given = type(real).from_pretrained(tmp_path, tree=same_tree(real)).eval()
    torch.testing.assert_close(log_probs(given, batch()), log_probs(real, batch()))
    treeless = type(real).from_pretrained(tmp_path).eval()
    with pytest.raises(ValueError, match="holds no tree yet.*tree="):
        log_probs(treeless, batch())


@pytest.mark.parametrize(("name", "head"), TREE_CASES,
                         ids=[f"{name}-{head or 'default'}" for name, head in TREE_CASES])
def test_a_checkpoint_with_bool_tree_flags_loads_the_same_model(name, head, tmp_path):
    """The head stores tree_bits / tree_mask as uint8; a checkpoint holding them as bool tensors loads the
    same tree, reporting nothing missing or unexpected."""
    real = tiny(name, head).eval()
    real.save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    weights = load_file(path)
    assert {weights[f"lm_head.{k}"].dtype for k in ("tree_bits", "tree_mask")} == {torch.uint8}
    save_file({k: v.bool() if k.endswith((".tree_bits", ".tree_mask")) else v for k, v in weights.items()},
              path, metadata={"format": "pt"})
    loaded, info = type(real).from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert loaded.lm_head.tree() == real.lm_head.tree()
    torch.testing.assert_close(log_probs(loaded.eval(), batch()), log_probs(real, batch()), rtol=0, atol=0)


def multi_code_tree() -> WordTree:
    # Word 0 has two codes, one ending at the root; word 3 has both leaves of node 5.
    down = [(0, 1), (1, 1), (2, 0), (3, 1)]
    return WordTree.from_codes([
        [[(0, 0)], [(0, 1), (1, 1), (2, 1)]],
        [[(0, 1), (1, 0)]],
        [[(0, 1), (1, 1), (2, 0), (3, 0)]],
        [[*down, (4, 0), (5, 0)], [*down, (4, 0), (5, 1)]],
        [[*down, (4, 1)]],
    ])


@pytest.mark.parametrize("tree", [random_tree(23, seed=3), balanced_tree(2), huffman_tree(list(range(1, 40))),
                                  multi_code_tree()], ids=["random", "two-words", "huffman", "multi-code"])
@pytest.mark.parametrize("lost", ["nodes", "bits", "mask"])
def test_word_tree_from_two_of_its_three_arrays(tree, lost):
    stored = tree.renumbered_breadth_first().to_tensors()
    rebuilt = WordTree.from_partial_tensors(**{k: v for k, v in stored._asdict().items()
                                               if k != lost}).to_tensors()
    for name in ("nodes", "bits", "mask"):
        if name != "bits" or lost != "bits":
            torch.testing.assert_close(getattr(rebuilt, name), getattr(stored, name), rtol=0, atol=0)
    if lost == "bits":  # the same words below each node: equal after mirroring where the bits differ
        assert rebuilt.bits.shape == stored.bits.shape
        assert (WordTree.from_tensors(*rebuilt).code_lengths()
                == tree.renumbered_breadth_first().code_lengths())


def test_word_tree_from_arrays_that_hold_no_tree():
    zeros = torch.zeros(5, 1, 3, dtype=torch.long)
    for arrays in ({"nodes": zeros, "bits": zeros.bool()}, {"nodes": zeros, "mask": zeros.bool()},
                   {"bits": zeros.bool(), "mask": zeros.bool()}):
        with pytest.raises(ValueError):
            WordTree.from_partial_tensors(**arrays)
    with pytest.raises(ValueError, match="two of"):
        WordTree.from_partial_tensors(nodes=zeros)


# ----------------------------------------------------------------------------- resize_token_embeddings


def old_tokens_moved_together(model, before: torch.Tensor, after: torch.Tensor) -> None:
    """Each old token's log-probability is unchanged or moved by the one constant of the row: the new
    normalisation of the part of the distribution that the new words joined. In a tree head, the words
    whose leaves the new words split move by log(V / (V + 1)) (b = -log V at the new nodes), the others
    not at all."""
    shift = after - before
    if model.config.head == "tree":
        split_leaf = torch.tensor(math.log(V / (V + 1)))
        assert ((shift.abs() < 1e-5) | ((shift - split_leaf).abs() < 1e-5)).all()
        return
    moved = shift[..., -1:]  # the last old token is a word, in the part that changed
    assert ((shift.abs() < 1e-5) | ((shift - moved).abs() < 1e-5)).all()


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
@pytest.mark.parametrize("mean_resizing", [True, False])
def test_resize_token_embeddings_follows(name, head, mean_resizing, tmp_path):
    """Every head follows: new words at the end, the old tokens' probabilities moved only by the new
    normalisation, saved and loaded back; cut again, the old distribution comes back."""
    model = tiny(name, head).eval()
    ids = batch()
    before = log_probs(model, ids)
    model.resize_token_embeddings(V + 3, mean_resizing=mean_resizing)
    assert model.config.vocab_size == V + 3
    after = log_probs(model, ids)
    assert after.shape[-1] == V + 3
    torch.testing.assert_close(after.logsumexp(-1), torch.zeros(after.shape[:-1]))
    if mean_resizing or model.config.head != "tree":
        old_tokens_moved_together(model, before, after[..., :V])
    head_module = model.lm_head
    if hasattr(head_module, "word_weight"):  # a hierarchical softmax: the numerals are untouched
        numerals = sorted(NUMERAL_VOCAB.values())
        torch.testing.assert_close(after[..., numerals], before[..., numerals])
        new_rows = head_module.word_weight[-3:]
        old_rows = head_module.word_weight[:-3]
        expected = old_rows.mean(0).expand_as(new_rows) if mean_resizing else torch.zeros_like(new_rows)
        torch.testing.assert_close(new_rows, expected)
    model.save_pretrained(tmp_path)
    # (A tree head's tree, resized with the model, comes from the checkpoint.)
    reloaded = type(model).from_pretrained(tmp_path).eval()
    torch.testing.assert_close(log_probs(reloaded, ids), after)
    # And back: the new words are cut again, the old tokens get their distribution back.
    model.resize_token_embeddings(V)
    torch.testing.assert_close(log_probs(model, ids), before)
    described = ("vocab_size", "cutoffs", "numeral_vocab", *TREE_FIELDS)
    fresh = tiny(name, head).config
    assert ({k: getattr(model.config, k, None) for k in described}
            == {k: getattr(fresh, k, None) for k in described})


NUMERAL_STRATEGIES = ["softmax", "softmax_digits", "hsoftmax", "drnn", "mog", "combination", "dexp"]


@pytest.mark.parametrize("strategy", NUMERAL_STRATEGIES)
def test_resize_cuts_numerals_with_their_ids(strategy, tmp_path):
    """A numeral whose id is cut leaves numeral_vocab and the head's numeral tables; the model is a
    distribution over the new vocabulary and loads back as it is."""
    model = tiny("numeracy_lm", strategy).eval()
    model.resize_token_embeddings(V - 9)  # ids 14 ("3.5") and 20 ("-0.25") go
    kept = {"<unk_num>": 2, "1": 5, "12": 9}
    assert model.config.numeral_vocab == kept
    assert getattr(model.lm_head, "numeral_vocab", kept) == kept
    ids = batch() % (V - 9)
    got = log_probs(model, ids)
    assert got.shape[-1] == V - 9
    torch.testing.assert_close(got.exp().sum(-1), torch.ones(got.shape[:-1]))  # brute force
    # One row per numeral kept: of the branch (<unk_num> included), or with digits or a value (not <unk_num>).
    branch = hasattr(model.lm_head, "word_ids")
    for name, rows in (("numeral_ids", 3 if branch else 2), ("numeral_digits", 2), ("known_values", 2),
                       ("numeral_weight", 3)):
        table = getattr(model.lm_head, name, None)
        if table is not None:
            assert table.shape[0] == rows, name
    model.train()
    fields = {"labels": ids}
    model(**inputs(model, ids), **fields).loss.backward()  # trains over the new vocabulary
    model.eval().save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path).eval()
    assert reloaded.config.numeral_vocab == kept
    torch.testing.assert_close(log_probs(reloaded, ids), got)


@pytest.mark.parametrize("strategy", NUMERAL_STRATEGIES)
def test_resize_refuses_to_cut_what_a_numeral_head_needs(strategy):
    """An open numeral branch needs <unk_num> (the mass of every numeral outside the vocabulary); every
    numeral head needs a numeral. The softmax has no numeral table: cutting every numeral empties
    numeral_vocab."""
    model = tiny("numeracy_lm", strategy)
    if strategy == "softmax":
        model.resize_token_embeddings(2)
        assert model.config.numeral_vocab is None
        return
    message = (r"cut '<unk_num>' \(id 2\), which it needs.*keep at least 3 tokens"
               if getattr(model.lm_head, "open_numeral_vocabulary", False)
               else r"cut every numeral of numeral_vocab.*keep at least 3 tokens")
    with pytest.raises(ValueError, match=message):
        model.resize_token_embeddings(2)
    assert model.get_input_embeddings().weight.shape[0] == model.config.vocab_size == V
    assert model.config.numeral_vocab == NUMERAL_VOCAB
