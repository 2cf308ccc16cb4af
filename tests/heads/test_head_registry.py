"""The seams: a head registered from this file works with every body, with no edit in the package;
a config made inconsistent after construction refuses to save; the model registry drives the CLI."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from datasets import Dataset, DatasetDict
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

from hf_nlm import AWDLSTMConfig, LBLConfig, NPLMConfig
from hf_nlm.heads import HEAD_REGISTRY, OutputHead, Targets, register_head
from hf_nlm.models import MODEL_TYPES
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, train_lm


class UnigramHead(OutputHead):
    """A toy head: p(w | h) = softmax(b)_w whatever h is (a learned unigram distribution)."""

    def __init__(self, in_features: int, vocab_size: int) -> None:
        super().__init__()
        self.in_features, self.vocab_size = in_features, vocab_size
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.bias.expand(*hidden.shape[:-1], self.vocab_size)

    def nll(self, hidden: torch.Tensor, targets) -> torch.Tensor:
        ids = Targets.of(targets).ids
        log_p = torch.log_softmax(self.bias, dim=-1)
        return torch.where(ids == -100, 0.0, -log_p[ids.clamp_min(0)])


@pytest.fixture
def unigram_head():
    register_head("unigram")(UnigramHead)
    yield UnigramHead
    del HEAD_REGISTRY["unigram"]  # the other tests see the package's heads only


SENTENCES = ["the cat sat on the mat", "the dog sat", "a cat saw the dog", "the mat"] * 6


@pytest.fixture(scope="module")
def data() -> DatasetDict:
    return DatasetDict({"train": Dataset.from_dict({"text": SENTENCES}),
                        "validation": Dataset.from_dict({"text": SENTENCES[:4]})})


@pytest.fixture(scope="module")
def tokenizer(data):
    return train_word_level_tokenizer(data["train"]["text"])


BODIES = {
    "nplm": lambda V: NPLMConfig(vocab_size=V, context_size=2, embedding_size=4, hidden_size=5,
                                 head="unigram"),
    "lbl": lambda V: LBLConfig(vocab_size=V, context_size=2, hidden_size=4, head="unigram",
                               tie_word_embeddings=False),
    "awd_lstm": lambda V: AWDLSTMConfig(vocab_size=V, embedding_size=4, hidden_size=6, num_hidden_layers=2,
                                        head="unigram", tie_word_embeddings=False),
}


@pytest.mark.parametrize("body", list(BODIES))
def test_a_head_registered_in_a_test_works_with_every_body(body, unigram_head, tokenizer, data, tmp_path):
    V = len(tokenizer)
    torch.manual_seed(0)
    model = MODEL_TYPES[body].lm_class(BODIES[body](V))
    assert isinstance(model.lm_head, UnigramHead)

    # The loss is the head's: -mean log softmax(b)[target], whatever the body computes.
    ids = tokenizer(["the cat sat on the mat"], return_tensors="pt").input_ids
    with torch.no_grad():
        model.lm_head.bias.copy_(torch.randn(V))
    model.eval()
    expected = -torch.log_softmax(model.lm_head.bias, -1)[ids[0, 1:]].mean()
    assert model(ids, labels=ids).loss.item() == pytest.approx(expected.item(), rel=1e-6)

    # Training moves softmax(b) toward the training unigram frequencies.
    counts = Counter(t for s in SENTENCES for t in [*tokenizer(s).input_ids, tokenizer.eos_token_id])
    freq = torch.tensor([counts[i] for i in range(V)], dtype=torch.float) / sum(counts.values())

    def kl() -> float:
        log_q = torch.log_softmax(model.lm_head.bias.detach(), -1)
        keep = freq > 0
        return float((freq[keep] * (freq[keep].log() - log_q[keep])).sum())

    before = kl()
    config = TrainingConfig(output_dir=str(tmp_path / "run"), block_size=6, batch_size=2, num_epochs=3,
                            optimizer="adam", learning_rate=0.1, progress_bar=False,
                            early_stopping_patience=None)
    train_lm(model, tokenizer, data, config)
    assert kl() < 0.5 * before

    # generate(): the distribution ignores the context, so plain greedy search (no_repeat_ngram_size=0: the
    # package's setting would refuse the third repeat) repeats argmax b.
    model.eval()
    out = model.generate(ids[:, :3], attention_mask=torch.ones_like(ids[:, :3]), max_new_tokens=4,
                         do_sample=False, pad_token_id=tokenizer.pad_token_id, eos_token_id=None,
                         no_repeat_ngram_size=0)
    assert out[0, 3:].tolist() == [int(model.lm_head.bias.argmax())] * 4

    # save / load through the Auto classes: the head comes back by its registered name.
    model.save_pretrained(tmp_path / "saved")
    assert AutoConfig.from_pretrained(tmp_path / "saved").head == "unigram"
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "saved")
    assert isinstance(loaded.lm_head, UnigramHead)
    torch.testing.assert_close(loaded.lm_head.bias, model.lm_head.bias)
    assert loaded(ids, labels=ids).loss.item() == pytest.approx(model(ids, labels=ids).loss.item(), rel=1e-6)


def test_unknown_and_clashing_head_names_are_refused(unigram_head):
    registered = ", ".join(HEAD_REGISTRY)
    assert registered.endswith("unigram")
    with pytest.raises(ValueError, match=f"head must be one of {registered}; got 'uniform'"):
        NPLMConfig(vocab_size=9, head="uniform")

    class Other(OutputHead):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_head("unigram")(Other)
    with pytest.raises(TypeError, match="OutputHead subclasses"):
        register_head("plain")(nn.Linear)
    # A tied head needs a word matrix: the unigram head has none.
    with pytest.raises(ValueError,
                       match="tie_word_embeddings=True needs a head whose weight is a word matrix"):
        LBLConfig(vocab_size=9, head="unigram", tie_word_embeddings=True)
    assert LBLConfig(vocab_size=9, head="unigram").tie_word_embeddings is False  # unset: ties where it can


@pytest.mark.parametrize(
    ("make", "spoil", "message"),
    [
        (lambda: NPLMConfig(vocab_size=9), {"head": "split"}, "needs cutoffs"),
        (lambda: NPLMConfig(vocab_size=9, head="split", cutoffs=[3]), {"cutoffs": [3, 12]},
         "cutoff 12 is outside"),
        (lambda: NPLMConfig(vocab_size=9), {"context_size": 0}, r"context_size \(n - 1\) must be >= 1"),
        (lambda: LBLConfig(vocab_size=9), {"head": "tree"}, "tie_word_embeddings=False"),
        (lambda: AWDLSTMConfig(vocab_size=9, embedding_size=4, hidden_size=4), {"last_hidden_size": 6},
         r"last_hidden_size \(6\) must equal embedding_size \(4\)"),
    ],
)
def test_a_config_spoiled_after_construction_refuses_to_save(make, spoil, message, tmp_path):
    config = make()
    config.save_pretrained(tmp_path / "good")  # sound: saves and loads back
    reloaded = AutoConfig.from_pretrained(tmp_path / "good").to_dict()
    assert {**reloaded, "_name_or_path": ""} == {**config.to_dict(), "_name_or_path": ""}
    for name, value in spoil.items():
        setattr(config, name, value)
    with pytest.raises(ValueError, match=message) as info:
        config.save_pretrained(tmp_path / "bad")
    assert "would not load back" in str(info.value) and type(config).__name__ in str(info.value)
    assert not (tmp_path / "bad" / "config.json").exists()


def test_a_model_with_a_spoiled_config_writes_nothing(tmp_path):
    model = MODEL_TYPES["nplm"].lm_class(NPLMConfig(vocab_size=9, context_size=2, embedding_size=3,
                                                    hidden_size=3))
    model.config.head = "tree"  # no tree shape, no tree: from_pretrained could not rebuild the head
    with pytest.raises(ValueError, match="would not load back"):
        model.save_pretrained(tmp_path / "m")
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())


def test_return_dict_false_gives_tuples():
    model = MODEL_TYPES["nplm"].lm_class(NPLMConfig(vocab_size=9, context_size=2, embedding_size=3,
                                                    hidden_size=3))
    ids = torch.tensor([[1, 2, 3, 4]])
    out = model(ids, labels=ids)
    tup = model(ids, labels=ids, return_dict=False)
    assert isinstance(tup, tuple) and torch.equal(tup[0], out.loss)
    assert isinstance(model.model(ids, return_dict=False), tuple)
    # A body's output can be turned off in the config too (transformers' convention).
    model.config.return_dict = False
    assert isinstance(model(ids), tuple)


def test_the_model_registry_drives_auto_classes_and_cli():
    from hf_nlm.training.spec import model_settings
    from hf_nlm_cli import build_parser

    for name, model_type in MODEL_TYPES.items():
        assert AutoConfig.for_model(name).__class__ is model_type.config_class
        auto = AutoModelForCausalLM if model_type.causal_lm_class is not None else AutoModelForSeq2SeqLM
        assert auto._model_mapping[model_type.config_class] is model_type.lm_class
    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions[0].choices.values()
                 if a.prog.endswith(" train"))
    assert list(next(a for a in train._actions if a.dest == "model_type").choices) == list(MODEL_TYPES)
    flags = model_settings(MODEL_TYPES)
    # Each model's flags are exactly its config's own fields (the LBL's D under its attribute_map name).
    assert flags["embedding_size"] == {"nplm": "embedding_size", "lbl": "hidden_size", "hlbl": "hidden_size",
                                       "awd_lstm": "embedding_size", "numeracy_lm": "embedding_size",
                                       "story_seq2seq": "embedding_size"}
    assert set(flags["diagonal_context"]) == {"lbl", "hlbl"}
    # The numeracy LM's head is its numeral strategy (the paper's name, through its attribute_map).
    assert flags["numeral_strategy"] == {"numeracy_lm": "head"}
    assert flags["head"].keys() == MODEL_TYPES.keys() - {"numeracy_lm"}
    for dest in flags:
        assert any(a.dest == dest for a in train._actions), dest


def test_generated_model_flags_reach_the_config(tmp_path):
    """Every flag sets the config field it names; unset flags leave the config's defaults."""
    import argparse

    from hf_nlm.training.arguments import add_train_arguments, spec_from_arguments
    from hf_nlm.training.run import build_config

    parser = add_train_arguments(argparse.ArgumentParser())
    tokenizer = train_word_level_tokenizer(SENTENCES)

    (tmp_path / "t.txt").write_text("\n".join(SENTENCES) + "\n")

    def config_of(*argv):
        args = parser.parse_args(["--output-dir", str(tmp_path / "run"),
                                  "--train-file", str(tmp_path / "t.txt"), *argv])
        return build_config(spec_from_arguments(args), tokenizer)

    config = config_of("--model", "awd_lstm", "--dropout", "0.2", "--num-hidden-layers", "2",
                       "--head", "tree")
    assert (config.dropout, config.num_hidden_layers, config.head) == (0.2, 2, "tree")
    assert config.tie_word_embeddings is False  # a tree head cannot be tied
    # an unset flag: the default recipe's value, else the config's default
    from hf_nlm.models import MODEL_TYPES

    recipe = MODEL_TYPES["awd_lstm"].recipes["default"].model
    assert config.dropout_input == recipe.get("dropout_input", AWDLSTMConfig().dropout_input)
    assert config.initializer_range == recipe.get("initializer_range", AWDLSTMConfig().initializer_range)
    config = config_of("--model", "nplm", "--no-direct")
    assert config.direct_connections is False and config.context_size == NPLMConfig().context_size
    assert math.isclose(config.initializer_range, NPLMConfig().initializer_range)


def test_config_for_tree_describes_the_tree():
    from hf_nlm import HLBLConfig, HLBLForCausalLM
    from hf_nlm.heads import tree_config_fields
    from hf_nlm.training import config_for_tree
    from hf_nlm.trees import huffman_tree, random_tree

    config = HLBLConfig(vocab_size=12, context_size=2, hidden_size=3, **tree_config_fields(random_tree(12)))
    tree = huffman_tree(list(range(12, 0, -1)))
    fresh = config_for_tree(config, tree)
    assert {k: getattr(fresh, k) for k in tree_config_fields(tree)} == tree_config_fields(tree)
    assert (fresh.hidden_size, fresh.context_size) == (3, 2) and config.tree_max_depth != fresh.tree_max_depth
    HLBLForCausalLM(fresh, tree=tree)  # the shapes agree: no "tree shape mismatch"


def test_a_field_of_the_wrong_type_is_refused_by_the_config(tmp_path):
    """Through AutoConfig too: the config names the field and the type it expected."""
    import json

    with pytest.raises(ValueError, match="NPLMConfig: field 'hidden_size' must be int, got 'abc'"):
        NPLMConfig(hidden_size="abc")
    with pytest.raises(ValueError, match=r"field 'cutoffs' must be list\[int\] or None"):
        AWDLSTMConfig(head="split", cutoffs=["a"])
    assert AWDLSTMConfig(dropout=0).dropout == 0  # an int where a float is expected is fine
    NPLMConfig(vocab_size=10).save_pretrained(tmp_path)
    values = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**values, "hidden_size": "abc"}))
    with pytest.raises(ValueError, match="field 'hidden_size' must be int"):
        AutoModelForCausalLM.from_pretrained(tmp_path)


def test_a_model_whose_config_is_spoiled_says_why_before_writing(tmp_path):
    model = MODEL_TYPES["nplm"].lm_class(NPLMConfig(vocab_size=9, context_size=2, embedding_size=3,
                                                    hidden_size=3))
    model.config.head = "split"  # no cut-offs
    with pytest.raises(ValueError, match="not saving NPLMConfig .* would not load back.*needs cutoffs"):
        model.save_pretrained(tmp_path / "m")
    assert not (tmp_path / "m" / "config.json").exists()


def test_an_architecture_folder_is_registered_by_being_there(tmp_path, monkeypatch):
    """A new model type is a folder under hf_nlm/models whose __init__ declares MODEL_TYPE: nothing else is
    edited."""
    import sys
    import textwrap

    import hf_nlm.models

    folder = tmp_path / "toy_nplm"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent("""
        from hf_nlm.models.nplm import NPLMConfig, NPLMForCausalLM, NPLMModel
        from hf_nlm.models.registry import ModelType

        class ToyNPLMConfig(NPLMConfig):
            model_type = "toy_nplm"

        MODEL_TYPE = ModelType(ToyNPLMConfig, NPLMModel, causal_lm_class=NPLMForCausalLM)
    """))
    monkeypatch.setattr(hf_nlm.models, "__path__", [*hf_nlm.models.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "hf_nlm.models.toy_nplm", raising=False)
    try:
        found = hf_nlm.models._architectures()
    finally:
        sys.modules.pop("hf_nlm.models.toy_nplm", None)
    assert list(found) == sorted([*MODEL_TYPES, "toy_nplm"])
    assert found["toy_nplm"].config_class.__name__ == "ToyNPLMConfig"
    # The package's own folders are exactly the registered types.
    folders = sorted(p.parent.name for p in Path(hf_nlm.models.__file__).parent.glob("*/__init__.py"))
    assert folders == sorted(MODEL_TYPES)


# ------------------------------------------------------------------- heads register by living in their folder


def test_every_module_of_the_heads_folder_is_imported_and_every_head_in_it_registered():
    import importlib
    import inspect
    import sys
    from pathlib import Path

    import hf_nlm.heads

    root = Path(hf_nlm.heads.__file__).parent
    modules = sorted(
        ".".join(("hf_nlm", "heads", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for path in root.rglob("*.py")
    )
    assert "hf_nlm.heads.numeral.drnn" in modules
    assert [name for name in modules if name not in sys.modules] == []
    defined = {
        cls for name in modules for cls in vars(importlib.import_module(name)).values()
        if inspect.isclass(cls) and issubclass(cls, OutputHead) and cls.__module__ == name
           and vars(cls).get("head_name")
    }
    assert {cls.head_name: cls for cls in defined} == {name: cls for name, cls in HEAD_REGISTRY.items()}
    assert sorted(HEAD_REGISTRY) == sorted(
        ["softmax", "split", "tree", "softmax_digits", "hsoftmax", "drnn", "mog", "combination", "dexp"]
    )


_PROBE_HEAD = '''
import torch
from torch import nn

from .base import OutputHead, register_head


@register_head("{name}")
class ProbeHead(OutputHead):
    def __init__(self, in_features, vocab_size):
        super().__init__()
        self.in_features, self.vocab_size = in_features, vocab_size
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden):
        return self.bias.expand(*hidden.shape[:-1], self.vocab_size)
'''


@pytest.mark.slow  # a fresh interpreter importing hf_nlm takes several seconds
def test_a_head_file_dropped_into_the_heads_folder_is_registered_with_no_other_edit():
    import os
    import subprocess
    import sys
    import uuid
    from pathlib import Path

    import hf_nlm.heads

    name = f"probe_{uuid.uuid4().hex[:8]}"
    path = Path(hf_nlm.heads.__file__).parent / f"{name}.py"
    path.write_text(_PROBE_HEAD.format(name=name))
    script = (
        "import sys, torch\nfrom hf_nlm import NPLMConfig\n"
        "from hf_nlm.heads import HEAD_REGISTRY, build_head\n"
        "config = NPLMConfig(vocab_size=7, head=sys.argv[1])\n"
        "head = build_head(config, 4)\n"
        "print(type(head).__module__, tuple(head.log_probs(torch.zeros(2, 4)).shape))"
    )
    try:
        completed = subprocess.run(
            [sys.executable, "-c", script, name], capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                 "PYTHONPATH": os.pathsep.join([str(path.parents[2]), os.environ.get("PYTHONPATH", "")])},
        )
    finally:
        path.unlink()
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == [f"hf_nlm.heads.{name}", "(2,", "7)"]
    assert name not in HEAD_REGISTRY  # this process imported the folder before the probe existed


class UnigramPriorHead(UnigramHead):
    """A head that sets itself up from a run's data: its bias starts at the log-frequencies of the training
    tokens, which it counts in :meth:`prepare_run`; ``built`` keeps each prior it was built with."""

    built: list = []

    @classmethod
    def prepare_run(cls, fields, tokenizer, run):
        counts = torch.ones(len(tokenizer))  # add-one, so that every id has a finite log-frequency
        for line in run.train_texts:
            for i in [*tokenizer(line, add_special_tokens=False).input_ids, tokenizer.eos_token_id]:
                counts[i] += 1
        return {"prior": (counts / counts.sum()).log()}

    @classmethod
    def from_config(cls, config, in_features, prior=None, **kwargs):
        from hf_nlm.heads.base import refuse_arguments

        refuse_arguments(config, kwargs)
        head = cls(in_features, config.vocab_size)
        if prior is not None:
            head.prior = prior
            cls.built.append(prior)
        return head

    def init_weights(self, initializer_range, init=nn.init):
        super().init_weights(initializer_range, init)
        if getattr(self, "prior", None) is not None:
            with torch.no_grad():
                self.bias.copy_(self.prior)


def test_a_head_registered_at_run_time_sets_itself_up_from_the_data_through_train_spec(tmp_path):
    """train(spec) names no head: a new head reads the run through its prepare_run hook (here, the training
    tokens' frequencies, counted again independently below) and trains like the package's own."""
    from hf_nlm.training import RunSpec, train
    from hf_nlm.training.run import build_model

    register_head("unigram_prior")(UnigramPriorHead)
    try:
        (tmp_path / "train.txt").write_text("\n".join(SENTENCES) + "\n")
        (tmp_path / "valid.txt").write_text("\n".join(SENTENCES[:4]) + "\n")
        spec = RunSpec.from_recipe(
            "nplm", train_file=str(tmp_path / "train.txt"), validation_file=str(tmp_path / "valid.txt"),
            output_dir=str(tmp_path / "run"), head="unigram_prior", min_frequency=1, context_size=2,
            embedding_size=4, hidden_size=4, max_steps=3, progress_bar=False)
        UnigramPriorHead.built.clear()
        result = train(spec)
        assert isinstance(result.model.lm_head, UnigramPriorHead)
        tokenizer = result.tokenizer
        counts = Counter(t for s in SENTENCES for t in [*tokenizer(s).input_ids, tokenizer.eos_token_id])
        expected = torch.tensor([counts[i] + 1.0 for i in range(len(tokenizer))])
        torch.testing.assert_close(UnigramPriorHead.built[0], (expected / expected.sum()).log())
        # The run's model starts from that prior (rebuilt from the spec as train() builds it), and three
        # updates move it; the loss is finite.
        fresh = build_model(result.spec, tokenizer, SENTENCES)
        torch.testing.assert_close(fresh.lm_head.bias.detach(), UnigramPriorHead.built[0])
        assert not torch.equal(result.model.lm_head.bias.detach(), UnigramPriorHead.built[0])
        assert math.isfinite(result.metrics["validation"]["perplexity"])
    finally:
        del HEAD_REGISTRY["unigram_prior"]
