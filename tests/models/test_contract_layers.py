"""transformers' per-layer contract, for every registered model type (hf_nlm.models.MODEL_TYPES):

* activation checkpointing goes through transformers' own ``GradientCheckpointingLayer``: the model's
  recurrent layers are such layers, so ``activation_checkpointing_enable(every_n_layers=n)`` recomputes
  exactly every n-th one in the backward pass, with the gradients of plain training (the recomputation draws
  the same dropout masks), and ``activation_checkpointing_disable()`` stops it;
* ``hidden_states`` (and attention weights) are the tensors the output is computed from: ``retain_grad()`` on
  each returned tensor gives the loss's gradient there, as interpretability code expects.

The small models and their inputs are those of tests/models/test_model_contract.py."""

from __future__ import annotations

import inspect

import pytest
import torch
from test_model_contract import CASES, IDS, batch, inputs, tiny
from transformers import GradientCheckpointingLayer

from hf_nlm.models import MODEL_TYPES

CHECKPOINTING = [name for name in MODEL_TYPES if MODEL_TYPES[name].lm_class.supports_gradient_checkpointing]
DROPOUTS = ("dropout", "dropout_hidden", "dropout_input", "dropout_embedding", "weight_drop")


def test_the_recurrent_models_take_part():
    """The checkpointing tests below are not vacuous: the AWD-LSTM and the numeracy LM, which reuses its
    body."""
    assert {"awd_lstm", "numeracy_lm"} <= set(CHECKPOINTING)


def stacked(name: str, layers: int = 4, dropout: bool = True):
    """A small ``name`` model with ``layers`` recurrent layers, every dropout of the config on (weight drop
    included, which is drawn inside each layer) or all off; in training mode."""
    config = tiny(name).config
    config.num_hidden_layers = layers
    for field in DROPOUTS:
        if hasattr(config, field):
            setattr(config, field, (0.5 if field == "weight_drop" else 0.3) if dropout else 0.0)
    torch.manual_seed(0)
    return MODEL_TYPES[name].lm_class(config).train()


def checkpointing_layers(model) -> list[torch.nn.Module]:
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def gradients(model, ids: torch.LongTensor, seed: int = 1) -> tuple[list[torch.Tensor], list[bool]]:
    """The parameters' gradients of one training step from RNG seed ``seed``, and for each checkpointing layer
    whether the backward pass ran it again: a submodule's forward pre-hook fires during ``backward()`` (a
    forward hook might not: the recomputation stops once it has every tensor the backward pass needs)."""
    layers = checkpointing_layers(model)
    calls = [0] * len(layers)
    handles = []
    for i, layer in enumerate(layers):
        for sub in list(layer.modules())[1:]:
            handles.append(sub.register_forward_pre_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1)))
    try:
        torch.manual_seed(seed)
        model.zero_grad()
        loss = model(**inputs(model, ids), labels=ids).loss
        after_forward = list(calls)
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return grads, [after > before for before, after in zip(after_forward, calls, strict=True)]


@pytest.mark.parametrize("name", CHECKPOINTING)
def test_each_recurrent_layer_is_a_transformers_checkpointing_layer(name):
    """transformers finds the layers to checkpoint by their class; no other module keeps an on/off flag of its
    own."""
    model = stacked(name)
    layers = checkpointing_layers(model)
    assert len(layers) == model.config.num_hidden_layers
    flagged = [m for m in model.modules() if hasattr(m, "gradient_checkpointing")]
    assert flagged == layers


@pytest.mark.parametrize(
    "enable",
    ["activation_checkpointing_enable",
     pytest.param("gradient_checkpointing_enable", marks=pytest.mark.allow_deprecated)],
)
@pytest.mark.parametrize("every_n_layers", [1, 2, 3])
@pytest.mark.parametrize("name", CHECKPOINTING)
def test_every_n_layers_recomputes_exactly_those_layers(name, every_n_layers, enable):
    model = stacked(name, layers=4)
    ids = batch(T=12)
    plain, recomputed = gradients(model, ids)
    assert len(recomputed) == 4 and not any(recomputed)
    if enable == "gradient_checkpointing_enable":  # transformers' deprecated spelling, still in use
        with pytest.warns(FutureWarning):
            model.gradient_checkpointing_enable(every_n_layers=every_n_layers)
    else:
        model.activation_checkpointing_enable(every_n_layers=every_n_layers)
    assert model.is_activation_checkpointing
    checkpointed, recomputed = gradients(model, ids)
    assert recomputed == [i % every_n_layers == 0 for i in range(4)]
    for a, b in zip(plain, checkpointed, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dropout", [True, False], ids=["dropout", "no-dropout"])
@pytest.mark.parametrize("name", CHECKPOINTING)
def test_checkpointed_training_gives_the_plain_gradients(name, dropout):
    """The recomputation restores the RNG state, so weight drop (drawn inside each layer) draws the forward
    pass's mask again. With dropout on, another seed gives other gradients: the equality is not that of a
    model without randomness."""
    model = stacked(name, layers=2, dropout=dropout)
    ids = batch(T=12)
    plain, _ = gradients(model, ids)
    model.activation_checkpointing_enable()
    checkpointed, recomputed = gradients(model, ids)
    assert all(recomputed)
    assert len(plain) == len(checkpointed) == len(list(model.parameters()))
    for a, b in zip(plain, checkpointed, strict=True):
        torch.testing.assert_close(a, b)
    other, _ = gradients(model, ids, seed=2)
    differs = any(not torch.allclose(a, b) for a, b in zip(plain, other, strict=True))
    assert differs == dropout


@pytest.mark.parametrize("name", CHECKPOINTING)
def test_disabling_checkpointing_stops_the_recomputation(name):
    model = stacked(name)
    ids = batch(T=12)
    model.activation_checkpointing_enable()
    _, recomputed = gradients(model, ids)
    assert all(recomputed)
    model.activation_checkpointing_disable()
    assert not model.is_activation_checkpointing
    assert not any(layer.gradient_checkpointing for layer in checkpointing_layers(model))
    _, recomputed = gradients(model, ids)
    assert recomputed and not any(recomputed)


def returned_tensors(out) -> dict[str, torch.Tensor]:
    """Every hidden state and attention tensor of a model output, by field name and index."""
    found = {}
    for field, value in out.items():
        if "hidden_state" not in field and "attentions" not in field:
            continue
        for i, tensor in enumerate(value if isinstance(value, tuple) else (value,)):
            found[f"{field}[{i}]"] = tensor
    return found


def forward_with_everything(model, ids, mask=None, **kwargs):
    """forward() returning its hidden states and, where the model has attentions, its attention weights."""
    extra = {"output_hidden_states": True}
    if "output_attentions" in inspect.signature(model.forward).parameters:
        extra["output_attentions"] = True
    if mask is not None:
        extra["attention_mask"] = mask
        if model.config.is_encoder_decoder:
            extra["decoder_attention_mask"] = mask
    return model(**inputs(model, ids), **extra, **kwargs)


@pytest.mark.parametrize("padded", [False, True], ids=["full", "left-padded"])
@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_returned_states_and_attentions_get_the_loss_gradient(name, head, padded):
    model = tiny(name, head).eval()  # no dropout: a zero gradient would mean a tensor off the path
    ids = batch()
    mask = None
    if padded:
        mask = torch.ones_like(ids)
        mask[0, :2] = 0
    out = forward_with_everything(model, ids, mask, labels=ids)
    tensors = returned_tensors(out)
    assert any(key.startswith(("hidden_states", "decoder_hidden_states")) for key in tensors)
    if model.config.is_encoder_decoder:
        assert any(key.startswith("cross_attentions") for key in tensors)
    for tensor in tensors.values():
        tensor.retain_grad()
    out.loss.backward()
    missing = [key for key, tensor in tensors.items() if tensor.grad is None]
    assert not missing, f"not on the loss's gradient path: {missing}"
    zero = [key for key, tensor in tensors.items() if not tensor.grad.any()]
    assert not zero, f"a zero gradient: {zero}"


@pytest.mark.parametrize("name", CHECKPOINTING)
def test_states_continued_from_a_cache_get_the_loss_gradient(name):
    """A state given back (no sentence boundary read first): the returned states are on the path too."""
    model = tiny(name).eval()
    ids = batch()
    with torch.no_grad():
        cache = model(ids[:, :3], use_cache=True).cache
    out = model(ids[:, 3:], cache=cache, labels=ids[:, 3:], output_hidden_states=True)
    for tensor in out.hidden_states:
        tensor.retain_grad()
    out.loss.backward()
    assert all(tensor.grad is not None and tensor.grad.any() for tensor in out.hidden_states)


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_the_head_reads_the_last_returned_state_itself(name, head):
    """``hidden_states[-1]`` (``decoder_hidden_states[-1]``) is the very tensor the head is called with, not a
    copy."""
    model = tiny(name, head).eval()
    seen = []
    handle = model.lm_head.register_forward_hook(lambda module, args, output: seen.append(args[0]))
    try:
        out = forward_with_everything(model, batch())
    finally:
        handle.remove()
    states = out.decoder_hidden_states if model.config.is_encoder_decoder else out.hidden_states
    assert len(seen) == 1 and seen[0] is states[-1]


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_attention_outputs_have_transformers_shapes(name, head):
    """Every attention output is a tuple with one (batch, heads, target, source) tensor per attention layer,
    each row a distribution over the source; a model without attention returns none rather than a tensor of
    its own shape."""
    model = tiny(name, head).eval()
    ids = batch()
    with torch.no_grad():
        out = forward_with_everything(model, ids)
    fields = [f for f in ("attentions", "cross_attentions", "encoder_attentions", "decoder_attentions")
              if f in out]
    if not model.config.is_encoder_decoder:
        assert fields == [], f"{name} has no attention but returned {fields}"
        return
    assert "cross_attentions" in fields
    source_length = inputs(model, ids)["input_ids"].shape[1]
    target_length = out.logits.shape[1]
    for field in fields:
        value = getattr(out, field)
        assert isinstance(value, tuple) and len(value) >= 1, field
        for weights in value:
            assert weights.dim() == 4 and weights.shape[0] == ids.shape[0], (field, tuple(weights.shape))
            assert weights.shape[2:] == (target_length, source_length), (field, tuple(weights.shape))
            torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:3]))


@pytest.mark.parametrize(("name", "head"), CASES, ids=IDS)
def test_enable_input_require_grads_reaches_the_loss_with_every_weight_frozen(name, head):
    """transformers' ``enable_input_require_grads`` (adapters over frozen weights, gradient checkpointing)
    hooks the input embedding module: every body calls that module, so the loss depends on a tensor needing a
    gradient."""
    model = tiny(name, head).train()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    model.enable_input_require_grads()
    ids = batch()
    out = model(**inputs(model, ids), labels=ids)
    assert out.loss.requires_grad
