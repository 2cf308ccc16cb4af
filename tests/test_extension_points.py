"""The three extension points, each added at run time from a temporary directory and taken end to end:

* a model type as one folder (config, model, card text), registered with ``register_model_package`` exactly as
  ``hf_nlm.models`` registers its own folders;
* a head as one file, its setting (``unigram_floor``) declared beside it and offered by the new model's
config;
* a metric as one folder, found by ``discover_metrics`` and loaded by ``evaluate.load`` from its path.

The model trains through ``hf-nlm train`` (the generated flags include the head's setting), is evaluated
through ``hf-nlm evaluate`` and scored by the metric, and its run folder's card carries the new model type's
text. The head ignores its input, so every perplexity here has a closed form to check against: exp of the
mean -log p(w) of the split's targets under p = (1 - floor) softmax(b) + floor / |V|."""

from __future__ import annotations

import importlib
import json
import math
import sys
import textwrap
import uuid

import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import hf_nlm.models
from hf_nlm.configuration_utils import config_field_docs
from hf_nlm.heads import HEAD_REGISTRY
from hf_nlm_cli import main  # the hf-nlm console script

HEAD_FILE = '''
"""A head that ignores h: p(w) = (1 - floor) softmax(b)_w + floor / |V|."""

from __future__ import annotations

import torch
from torch import nn

from hf_nlm.heads import OutputHead, Targets, head_options, register_head
from hf_nlm.heads.base import refuse_arguments


@head_options
class FlooredUnigramOptions:
    r"""
    Args:
        unigram_floor (`float`, defaults to 0.0):
            The share of the uniform distribution in p(w), in [0, 1).
    """

    unigram_floor: float = 0.0

    def validate_unigram_floor(self):
        if not 0.0 <= self.unigram_floor < 1.0:
            raise ValueError(
                f"{type(self).__name__}.unigram_floor must be in [0, 1), got {self.unigram_floor}"
            )


@register_head("floored_unigram")
class FlooredUnigramHead(OutputHead):
    returns_log_probs = True

    def __init__(self, in_features, vocab_size, floor):
        super().__init__()
        self.in_features, self.vocab_size, self.floor = in_features, vocab_size, floor
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    @classmethod
    def from_config(cls, config, in_features, **kwargs):
        refuse_arguments(config, kwargs)
        return cls(in_features, config.vocab_size, config.unigram_floor)

    def log_p(self):
        return torch.log((1 - self.floor) * torch.softmax(self.bias, -1) + self.floor / self.vocab_size)

    def forward(self, hidden):
        return self.log_p().expand(*hidden.shape[:-1], self.vocab_size)

    def nll(self, hidden, targets):
        ids = Targets.of(targets).ids
        return torch.where(ids == -100, 0.0, -self.log_p()[ids.clamp_min(0)])
'''

CARD_FILE = """
title = "Bag-of-words LM"
summary = "A test model: the mean of the previous words' vectors, then any head."
extra_tags = ["bag-of-words"]

[paper]
short = "Nobody, *A Bag of Words*, nowhere (2024)"
bibtex = "@misc{nobody2024bag, title = {A Bag of Words}}"
"""

CONFIG_FILE = '''
from __future__ import annotations

from pathlib import Path

from huggingface_hub.dataclasses import strict

from hf_nlm.configuration_utils import NLMConfig
from hf_nlm.hub.model_card import CardText
from {head_module} import FlooredUnigramOptions


@strict
class BagLMConfig(NLMConfig, FlooredUnigramOptions):
    r"""
    Args:
        context_size (`int`, defaults to 2):
            The number of previous words averaged.
        embedding_size (`int`, defaults to 8):
            The size of the word vectors.
    """

    model_type = "bag_lm"
    card_text = CardText.from_toml(Path(__file__).with_name("card.toml"))

    context_size: int = 2
    embedding_size: int = 8
'''

MODELING_FILE = '''
from torch import nn
from transformers import GenerationMixin
from transformers.modeling_outputs import BaseModelOutput

from hf_nlm.modeling_utils import NLMPreTrainedModel
from hf_nlm.models.window import WindowCausalLMMixin, WindowModelMixin

from .configuration_bag_lm import BagLMConfig


class BagLMPreTrainedModel(NLMPreTrainedModel):
    config_class = BagLMConfig
    base_model_prefix = "model"


class BagLMModel(WindowModelMixin, BagLMPreTrainedModel):
    embedding_attr = "embed"

    def __init__(self, config):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.embedding_size)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, return_dict=None, output_hidden_states=None, **kwargs):
        _, windows = self.context_vectors(input_ids, attention_mask)
        # the vector the head reads: last of the hidden states, as the scoring expects
        h = windows.mean(dim=2)
        hidden_states = (h,) if self._hidden_states(output_hidden_states) else None
        return self._output(BaseModelOutput(last_hidden_state=h, hidden_states=hidden_states), return_dict)


class BagLMForCausalLM(WindowCausalLMMixin, BagLMPreTrainedModel, GenerationMixin):
    def __init__(self, config, tree=None):  # a tree head's word tree (every body takes every head)
        super().__init__(config)
        self.model = BagLMModel(config)
        self.lm_head = self._build_head(config.embedding_size, tree=tree)
        self.post_init()
'''

INIT_FILE = '''
from hf_nlm.models.registry import ADAM_DEFAULT, ModelType

from .configuration_bag_lm import BagLMConfig
from .modeling_bag_lm import BagLMForCausalLM, BagLMModel

MODEL_TYPE = ModelType(BagLMConfig, BagLMModel, causal_lm_class=BagLMForCausalLM,
                       recipes={"default": ADAM_DEFAULT})
'''

METRIC_FILE = '''
import math

import datasets
import evaluate


class MeanSurprisal(evaluate.Metric):
    """Bits per token and perplexity of per-token natural-log probabilities."""

    def _info(self):
        return evaluate.MetricInfo(description=self.__doc__, citation="", inputs_description="log_probs",
                                   features=datasets.Features({"log_probs": datasets.Value("float64")}))

    def _compute(self, log_probs):
        mean = -sum(log_probs) / len(log_probs)
        return {"bits_per_token": mean / math.log(2), "perplexity": math.exp(mean)}
'''

LINES = ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog"] * 4


@pytest.fixture
def extension(tmp_path, monkeypatch):
    """The head file, the model package and the metric folder written under ``tmp_path``; the head and model
    registered; the package's registries as they were afterwards."""
    tag = uuid.uuid4().hex[:8]
    head_module, package = f"floored_unigram_{tag}", f"extra_models_{tag}"
    (tmp_path / f"{head_module}.py").write_text(HEAD_FILE)
    folder = tmp_path / package / "bag_lm"
    folder.mkdir(parents=True)
    files = {"__init__.py": INIT_FILE, "card.toml": CARD_FILE,
             "configuration_bag_lm.py": CONFIG_FILE.format(head_module=head_module),
             "modeling_bag_lm.py": MODELING_FILE}
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    (tmp_path / "metrics" / "mean_surprisal").mkdir(parents=True)
    (tmp_path / "metrics" / "mean_surprisal" / "mean_surprisal.py").write_text(METRIC_FILE)
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text("\n".join(LINES) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(hf_nlm.models.MODEL_TYPES)
    try:
        importlib.import_module(head_module)  # its @register_head runs
        found = hf_nlm.models.register_model_package(package)
        yield tmp_path, found
    finally:
        HEAD_REGISTRY.pop("floored_unigram", None)
        for name in set(hf_nlm.models.MODEL_TYPES) - set(before):
            del hf_nlm.models.MODEL_TYPES[name]
        for name in [m for m in sys.modules if m.startswith((head_module, package))]:
            del sys.modules[name]


def unigram_perplexity(model, tokenizer, lines: list[str]) -> float:
    """exp of the mean -log p(w) over the split's targets (every word and each line's <eos>): the head's p(w)
    ignores the context, so this is the model's perplexity, computed without running the model."""
    head = model.lm_head
    p = (1 - head.floor) * torch.softmax(head.bias.detach().double(), -1) + head.floor / head.vocab_size
    targets = [i for line in lines
               for i in [*tokenizer(line, add_special_tokens=False).input_ids, tokenizer.eos_token_id]]
    return math.exp(-sum(math.log(p[i]) for i in targets) / len(targets))


def test_a_model_folder_a_head_file_and_a_metric_folder_added_at_run_time(extension, capsys,
                                                                          offline_evaluate):
    root, found = extension
    assert list(found) == ["bag_lm"] and "bag_lm" in hf_nlm.models.MODEL_TYPES
    files = [f"--train-file={root / 'train.txt'}", f"--validation-file={root / 'valid.txt'}",
             f"--test-file={root / 'test.txt'}"]
    train = ["train", "--model", "bag_lm", "--head", "floored_unigram", "--context-size", "2",
             "--embedding-size", "4", *files, "--num-epochs", "1", "--max-steps", "3", "--batch-size", "2",
             "--block-size", "8", "--learning-rate", "0.1", "--no-progress-bar"]

    # The head's setting is a generated flag with its documentation, and the config checks it.
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "The share of the uniform distribution in p(w)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main([*train, "--unigram-floor", "1.5", "--output-dir", str(root / "refused")])
    assert refused.value.code == 2
    assert "--unigram-floor must be in [0, 1), got 1.5" in capsys.readouterr().err

    # Training: the config saves the setting flat, beside the new model type and head.
    run = root / "run"
    assert main([*train, "--unigram-floor", "0.25", "--output-dir", str(run)]) == 0
    capsys.readouterr()
    saved = json.loads((run / "config.json").read_text())
    assert (saved["model_type"], saved["head"], saved["unigram_floor"]) == ("bag_lm", "floored_unigram", 0.25)
    model = AutoModelForCausalLM.from_pretrained(run)
    tokenizer = AutoTokenizer.from_pretrained(run)
    assert type(model).__name__ == "BagLMForCausalLM" and model.lm_head.floor == 0.25
    assert type(AutoConfig.from_pretrained(run)).__name__ == "BagLMConfig"
    assert float(model.lm_head.bias.detach().abs().sum()) > 0  # trained: the bias left its zeros

    # Evaluation through the command line, against the closed form.
    expected = unigram_perplexity(model, tokenizer, LINES)
    assert main(["evaluate", str(run), f"--test-file={root / 'test.txt'}", "--split", "test"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["perplexity"] == pytest.approx(expected, rel=1e-5)

    # The metric folder: found like the package's own, loaded by path, fed the model's per-token
    # log-probabilities.
    import evaluate

    from hf_nlm.evaluation import token_log_probs
    from hf_nlm.metrics import discover_metrics

    assert discover_metrics(root / "metrics") == ("mean_surprisal",)
    metric = evaluate.load(str(root / "metrics" / "mean_surprisal" / "mean_surprisal.py"),
                           keep_in_memory=True)
    _, log_probs, _ = token_log_probs(model, LINES, tokenizer)
    scores = metric.compute(log_probs=log_probs.double().tolist())
    assert scores["perplexity"] == pytest.approx(expected, rel=1e-5)
    assert scores["bits_per_token"] == pytest.approx(math.log2(expected), rel=1e-5)

    # The run folder's card says what the new model type is, from its folder's card text.
    card = ModelCard.load(run / "README.md")
    assert {"hf-nlm", "bag_lm", "bag-of-words"} <= set(card.data.tags)
    assert "A test model: the mean of the previous words' vectors, then any head." in card.content
    assert "Paper: Nobody, *A Bag of Words*, nowhere (2024)." in card.content
    assert "@misc{nobody2024bag" in card.content
    assert card.data.to_dict()["model-index"][0]["results"][0]["metrics"][0]["value"] == pytest.approx(
        json.loads((run / "results.json").read_text())["test"]["perplexity"])


def test_a_model_package_cannot_take_a_registered_name(tmp_path, monkeypatch):
    package = f"clashing_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / package / "nplm").mkdir(parents=True)
    (tmp_path / package / "nplm" / "__init__.py").write_text(textwrap.dedent('''
        from hf_nlm.models.nplm import NPLMConfig, NPLMForCausalLM, NPLMModel
        from hf_nlm.models.registry import ModelType

        class OtherConfig(NPLMConfig):
            model_type = "nplm"

        MODEL_TYPE = ModelType(OtherConfig, NPLMModel, causal_lm_class=NPLMForCausalLM)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(hf_nlm.models.MODEL_TYPES)
    try:
        with pytest.raises(ValueError, match=f"{package}: model type 'nplm' is already registered by "
                                             "hf_nlm.models.nplm.configuration_nplm.NPLMConfig"):
            hf_nlm.models.register_model_package(package)
        assert hf_nlm.models.MODEL_TYPES == before
    finally:
        for name in [m for m in sys.modules if m.startswith(package)]:
            del sys.modules[name]


def test_every_config_field_of_every_model_type_is_documented():
    """Each field a flag is generated from has a description, wherever it is declared (the config, its bases,
    or the options class of a head the config offers)."""
    from dataclasses import fields

    from transformers import PreTrainedConfig

    inherited = {f.name for f in fields(PreTrainedConfig)}
    for name, model_type in hf_nlm.models.MODEL_TYPES.items():
        docs = config_field_docs(model_type.config_class)
        missing = [f.name for f in fields(model_type.config_class)
                   if f.name not in inherited and not docs.get(f.name)]
        assert not missing, f"{name}: undocumented config fields {missing}"


@pytest.fixture
def offline_evaluate(monkeypatch):
    """``evaluate.load`` of a local script, never asking the Hub."""
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
