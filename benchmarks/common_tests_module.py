"""transformers' own common model tests (``ModelTesterMixin``, ``GenerationTesterMixin``, ``ConfigTester``
from the ``tests/`` of transformers' sdist) over every hf_nlm model type x head x variant.

Not run from here: ``benchmarks/common_tests.py`` copies this file into the extracted ``tests/`` folder as
``test_hf_nlm_common.py`` (its relative imports are transformers' test modules beside it) and runs pytest on
it.

The cases come from the registries: every model type of ``hf_nlm.models.MODEL_TYPES`` with every head of
``HEAD_REGISTRY`` a run of it builds (``hf_nlm.training.run.run_heads``; the numeracy LM's numeral
strategies are its heads), plus the :data:`VARIANTS` of a model type (other settings of its own, tried with
the softmax head). Each case is one test class, ``Test_<model_type>_<head>`` or
``Test_<model_type>_<variant>``, testing the body (``AutoModel``) and the LM class. The generation and export
mixins are empty stand-ins (the sdist does not ship their folders; see ``common_tests.py``)."""

import copy
import dataclasses
import unittest

import torch
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    MODEL_MAPPING_NAMES,
)

import hf_nlm  # noqa: F401  (registers the Auto classes)
from hf_nlm.heads import HEAD_REGISTRY
from hf_nlm.heads.split import default_cutoffs
from hf_nlm.models import MODEL_TYPES
from hf_nlm.training.run import run_heads
from hf_nlm.trees import random_tree

from .generation.test_utils import GenerationTesterMixin
from .test_configuration_common import ConfigTester
from .test_modeling_common import ModelTesterMixin, ids_tensor, torch_device

V = 23
#: The numerals of the numeracy LM's cases, at ids 2 and 3: transformers' resize test also builds the model
#: after setting ``config.vocab_size = 4`` (leaving the other fields as they are), and a numeral vocabulary
#: must lie inside the vocabulary. (Resizing that cuts numerals is tested in tests/models/.)
NUMERAL_VOCAB = {"<unk_num>": 2, "1": 3}

#: Settings of a model type other than its head that change its network, each a case of its own (with the
#: softmax head): ``{model_type: {variant name: config values}}``.
VARIANTS = {
    "story_seq2seq": {
        **{f"attention_{a}": {"attention": a} for a in ("dot", "additive", "concat", "none")},
        "no_input_feeding": {"input_feeding": False},
        "unidirectional": {"bidirectional_encoder": False},
    },
}


#: Sizes that keep transformers' hidden-state test's assumption (``hidden_states[0]`` is ``hidden_size`` wide)
#: true of the model: the NPLM's first hidden state is its context window x, (n - 1) m wide (Bengio et al.
#: 2003, eq. 1), so m = 6 / 2 with a context of 2.
TINY_SIZES = {"nplm": {"embedding_size": 3}}


def tiny_values(model_type, head, variant=None):
    """Config values of a tiny model of ``model_type`` with ``head``: ``ModelType.tiny_config_values`` over a
    23-word vocabulary (:data:`TINY_SIZES` where a model needs other sizes), with a numeral vocabulary where
    the config has one and a split head's default cut-offs, then the variant's values."""
    t = MODEL_TYPES[model_type]
    fields = {f.name: f.default for f in dataclasses.fields(t.config_class)}
    values = {**t.tiny_config_values(V), "head": head}
    values.update(TINY_SIZES.get(model_type, {}))
    values["tie_word_embeddings"] = bool(fields["tie_word_embeddings"]) and HEAD_REGISTRY[head].tieable
    if head == "split":
        values["cutoffs"] = default_cutoffs(V)  # what a run gives a split head
    if "numeral_vocab" in fields:
        values["numeral_vocab"] = NUMERAL_VOCAB
    values.update(VARIANTS.get(model_type, {}).get(variant, {}))
    return values


def cases():
    """``(model_type, head, variant, case name)`` of every case: each head a run of the model type builds
    (``run_heads``), then each variant with the softmax head."""
    for name in MODEL_TYPES:
        for head in run_heads(name):
            yield name, head, None, head
        for variant in VARIANTS.get(name, {}):
            yield name, "softmax", variant, variant


def with_tree(cls):
    """``cls`` building its tree head over a fixed random tree of the config's vocabulary when none is given
    (transformers' tests call ``model_class(config)``, and change ``config.vocab_size`` between calls)."""

    def __init__(self, config, tree=None, **kwargs):
        if tree is None:
            tree = random_tree(config.vocab_size, seed=0)
        cls.__init__(self, config, tree=tree, **kwargs)

    return type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})


class NLMModelTester:
    def __init__(self, parent, model_type, head, variant=None):
        self.parent, self.model_type, self.head = parent, model_type, head
        self.batch_size, self.seq_length, self.vocab_size = 2, 7, V
        self.is_training = True
        values = tiny_values(model_type, head, variant)
        self.config_values = values
        self.hidden_size = values.get("hidden_size", 6)
        self.num_hidden_layers = values.get("num_hidden_layers", 1)
        self.num_attention_heads = 1

    def get_config(self):
        return MODEL_TYPES[self.model_type].config_class(**self.config_values)

    def prepare_config_and_inputs_for_common(self):
        config = self.get_config()
        ids = ids_tensor([self.batch_size, self.seq_length], V)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if config.is_encoder_decoder:
            inputs["decoder_input_ids"] = ids_tensor([self.batch_size, self.seq_length], V)
            inputs["decoder_attention_mask"] = torch.ones_like(ids)
        return config, inputs


#: The upstream tests the story seq2seq's cases replace, and the function of this module that replaces each
#: (``common_tests.py`` reports them beside its counts): as transformers' RWKV tests override
#: test_attention_outputs for a layout of their own (Mamba's and xLSTM's set has_attentions = False), the
#: story seq2seq's LSTMs have no self-attention to return, its one attention layer is the cross-attention.
REPLACED_IN_SEQ2SEQ = {
    "test_attention_outputs": "seq2seq_attention_outputs",
    "test_retain_grad_hidden_states_attentions": "seq2seq_retain_grad_hidden_states_attentions",
}


def seq2seq_attention_outputs(self):
    """The story seq2seq's encoder and decoder are LSTMs: no self-attention, so encoder_attentions and
    decoder_attentions are None; its one Luong attention layer (one head) gives cross_attentions, a tuple of
    one (B, 1, T_target, T_source) tensor of distributions over the source (none with attention="none"),
    from the argument and from config.output_attentions alike, and output_hidden_states adds the two
    hidden-state fields."""
    config, inputs_dict = self.model_tester.prepare_config_and_inputs_for_common()
    B, S = inputs_dict["input_ids"].shape
    T = inputs_dict["decoder_input_ids"].shape[1]
    attends = config.attention != "none"
    for model_class in self.all_model_classes:
        for by_config in (False, True):
            cfg = copy.deepcopy(config)
            cfg.output_attentions = by_config
            model = model_class(cfg).to(torch_device).eval()
            inputs = self._prepare_for_class(inputs_dict, model_class)
            kwargs = {} if by_config else {"output_attentions": True}
            with torch.no_grad():
                outputs = model(**inputs, **kwargs)
                with_states = model(**inputs, **kwargs, output_hidden_states=True)
            self.assertIsNone(outputs.encoder_attentions)
            self.assertIsNone(outputs.decoder_attentions)
            if not attends:
                self.assertIsNone(outputs.cross_attentions)
                continue
            self.assertEqual(len(outputs.cross_attentions), 1)
            weights = outputs.cross_attentions[0]
            self.assertListEqual(list(weights.shape), [B, 1, T, S])
            torch.testing.assert_close(weights.sum(-1), torch.ones(B, 1, T))
            self.assertEqual(len(with_states), len(outputs) + 2)


def seq2seq_retain_grad_hidden_states_attentions(self):
    """transformers' check with the cross-attention in place of the self-attentions the LSTMs do not have."""
    config, inputs_dict = self.model_tester.prepare_config_and_inputs_for_common()
    config.output_hidden_states = True
    config.output_attentions = True
    model = self.all_model_classes[0](config).to(torch_device)
    outputs = model(**self._prepare_for_class(inputs_dict, self.all_model_classes[0]))
    tensors = [outputs.encoder_hidden_states[0], outputs.decoder_hidden_states[0]]
    if config.attention != "none":
        tensors.append(outputs.cross_attentions[0])
    for tensor in tensors:
        tensor.retain_grad()
    outputs[0].flatten()[0].backward(retain_graph=True)
    for tensor in tensors:
        self.assertIsNotNone(tensor.grad)


def make_case(model_type, head, variant, case):
    t = MODEL_TYPES[model_type]
    lm = with_tree(t.lm_class) if head == "tree" else t.lm_class
    bases = (ModelTesterMixin, *((GenerationTesterMixin,) if lm.can_generate() else ()), unittest.TestCase)

    def setUp(self):
        self.model_tester = NLMModelTester(self, model_type, head, variant)
        # The common properties minus num_attention_heads: no attention in these bodies (the seq2seq's one
        # Luong attention has no heads setting).
        self.config_tester = ConfigTester(self, config_class=t.config_class, has_text_modality=True,
                                          common_properties=["hidden_size", "num_hidden_layers"]
                                          if "num_hidden_layers" in self.model_tester.config_values
                                          else ["hidden_size"],
                                          **self.model_tester.config_values)

    def test_config(self):
        self.config_tester.run_common_tests()

    attrs = {
        "all_model_classes": (t.base_model_class, lm),
        "is_encoder_decoder": bool(t.seq2seq_lm_class),
        "has_attentions": bool(t.seq2seq_lm_class),
        "test_can_init_all_missing_weights_before_2023": True,
        "setUp": setUp,
        "test_config": test_config,
    }
    if t.seq2seq_lm_class:
        attrs.update({name: globals()[ours] for name, ours in REPLACED_IN_SEQ2SEQ.items()})
    return type(f"Test_{model_type}_{case}", bases, attrs)


# transformers lists its own models by name in its Auto mappings, and its tests read those lists (which
# classes are bodies, which get labels); ours are registered with the Auto classes instead: name them there.
for _t in MODEL_TYPES.values():
    MODEL_MAPPING_NAMES[_t.name] = _t.base_model_class.__name__
    if _t.causal_lm_class is not None:
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[_t.name] = _t.causal_lm_class.__name__
    if _t.seq2seq_lm_class is not None:
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES[_t.name] = _t.seq2seq_lm_class.__name__

for _case in cases():
    _cls = make_case(*_case)
    globals()[_cls.__name__] = _cls
del _cls, _case, _t
