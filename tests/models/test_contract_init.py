"""What transformers' common model tests (``ModelTesterMixin.test_can_init_all_missing_weights``,
``test_init_weights_can_init_buffers``) check about initialisation, for every registered model type with every
head its config accepts (:func:`test_model_contract.registry_cases`), the body and the LM class each:
``_init_weights`` reaches every parameter and buffer, and ``from_pretrained`` of no weights at all initialises
the model exactly as ``__init__`` does, reporting every key missing.

"Exactly" under transformers' seeding of initialisation in its tests: the seed again before each module's
initialisation (``PreTrainedModel._initialize_weights``), so that a module's values do not depend on the
draws made before it (``__init__`` builds on the CPU, where ``nn.Linear`` and the others draw their default
values first; ``from_pretrained`` builds on the meta device, where nothing is drawn)."""

from __future__ import annotations

import copy

import pytest
import torch
from test_model_contract import registry_cases, tiny_config, tree_for
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.utils import logging

from hf_nlm.models import MODEL_TYPES

CASES = registry_cases()
IDS = [f"{name}-{head}" for name, head in CASES]


@pytest.fixture
def seeded_init(monkeypatch):
    """transformers' ``seeded_weight_init``: ``torch.manual_seed`` before each module is initialised."""
    original = PreTrainedModel._initialize_weights

    def seeded(*args, **kwargs):
        torch.manual_seed(0)
        original(*args, **kwargs)

    monkeypatch.setattr(PreTrainedModel, "_initialize_weights", seeded)


@pytest.fixture(autouse=True)
def quiet_load_reports():
    """from_pretrained of no weights: transformers' load report lists every key."""
    level = logging.get_verbosity()
    logging.set_verbosity_error()
    yield
    logging.set_verbosity(level)


def model_classes(name: str, config) -> list[tuple[type, dict]]:
    """The body and the LM class of model type ``name``, each with what it takes besides the config."""
    t = MODEL_TYPES[name]
    return [(t.base_model_class, {}), (t.lm_class, {"tree": tree_for(config)})]


def assert_same_tensors(got: torch.nn.Module, expected: torch.nn.Module) -> None:
    got, expected = got.state_dict(), expected.state_dict()
    assert sorted(got) == sorted(expected)
    different = [key for key in expected if not torch.equal(got[key], expected[key])]
    assert different == []


def test_the_cases_cover_every_model_type_and_head():
    """Not vacuous: every model type, every head some body takes, and several heads per body."""
    assert {name for name, _ in CASES} == set(MODEL_TYPES)
    assert {"softmax", "split", "tree", "mog", "drnn"} <= {head for _, head in CASES}
    assert len(CASES) > len(MODEL_TYPES)


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_from_pretrained_of_no_weights_initialises_the_model_as_init_does(name, head, seeded_init):
    """transformers' ``test_can_init_all_missing_weights``: ``from_pretrained(None, config=...,
    state_dict={})`` (built on the meta device, every tensor missing) gives exactly the tensors of
    ``Model(config)``, none left on the meta device, and reports every key of the model missing (the tree
    buffers too where a tree is given: it fills them, but they are state the checkpoint lacks)."""
    config = tiny_config(name, head)
    for cls, kwargs in model_classes(name, config):
        from_init = cls(copy.deepcopy(config), **kwargs)
        loaded, info = cls.from_pretrained(None, config=copy.deepcopy(config), state_dict={},
                                           output_loading_info=True, **kwargs)
        on_meta = [k for k, t in [*loaded.named_parameters(), *loaded.named_buffers()] if t.is_meta]
        assert on_meta == [], cls.__name__
        assert_same_tensors(loaded, from_init)
        assert info["missing_keys"] == set(from_init.state_dict()), cls.__name__
        assert not info["unexpected_keys"]


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_init_weights_reaches_every_parameter_and_buffer(name, head, seeded_init):
    """Every tensor filled with garbage and marked uninitialised, ``init_weights`` writes each of them again,
    as ``__init__`` had: nothing keeps a value only its construction wrote."""
    config = tiny_config(name, head)
    for cls, kwargs in model_classes(name, config):
        fresh = cls(copy.deepcopy(config), **kwargs)
        with init.no_tie_weights():  # as from_pretrained builds it: a tied weight follows its source
            model = cls(copy.deepcopy(config), **kwargs)
        with torch.no_grad():
            for t in [*model.parameters(), *model.buffers()]:
                t.fill_(float("nan") if t.is_floating_point() else True if t.dtype == torch.bool else -7)
                t._is_hf_initialized = False
        for module in model.modules():
            module._is_hf_initialized = False
        model.init_weights()
        assert_same_tensors(model, fresh)
