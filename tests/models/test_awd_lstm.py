"""AWD-LSTM (Merity, Keskar & Socher 2018) and the recurrent-state cache for generate()."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM

from hf_nlm.cache_utils import RecurrentCache
from hf_nlm.models.awd_lstm import AWDLSTMConfig, AWDLSTMForCausalLM
from hf_nlm.models.awd_lstm.modeling_awd_lstm import WeightDropLSTM, embedding_dropout, locked_dropout

V = 23


def tiny_config(**kwargs) -> AWDLSTMConfig:
    fields = dict(
        vocab_size=V,
        embedding_size=8,
        hidden_size=12,
        num_hidden_layers=2,
        eos_token_id=None,  # generate the full length so that every step is compared
        pad_token_id=0,
        bos_token_id=0,
    )
    fields.update(kwargs)
    return AWDLSTMConfig(**fields)


def tiny_model(**kwargs) -> AWDLSTMForCausalLM:
    torch.manual_seed(0)
    return AWDLSTMForCausalLM(tiny_config(**kwargs)).eval()


def prompts(batch: int = 2, length: int = 5) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(1, V, (batch, length), generator=g)


# --- RecurrentCache ---------------------------------------------------------------------------------


def test_cache_reorder_repeat_select():
    h = [torch.arange(6.0).view(3, 2)]
    c = [-torch.arange(6.0).view(3, 2)]
    cache = RecurrentCache(h, c, seq_length=4)
    assert cache.get_seq_length() == 4 and cache.batch_size == 3 and len(cache) == 1
    assert not cache.is_compileable and not cache.is_croppable
    cache.reorder_cache(torch.tensor([2, 0, 0]))
    assert torch.equal(cache.hidden[0], torch.tensor([[4.0, 5.0], [0.0, 1.0], [0.0, 1.0]]))
    assert torch.equal(cache.cell[0], -cache.hidden[0])
    cache.batch_repeat_interleave(2)
    assert cache.batch_size == 6 and torch.equal(cache.hidden[0][0], cache.hidden[0][1])
    cache.batch_select_indices(torch.tensor([0, 2]))
    assert torch.equal(cache.hidden[0], torch.tensor([[4.0, 5.0], [0.0, 1.0]]))
    cache.crop(4)  # keeping everything is a no-op
    assert cache.get_seq_length() == 4
    with pytest.raises(ValueError, match="cannot be cropped"):
        cache.crop(-1)
    cache.crop(0)
    assert cache.get_seq_length() == 0 and not cache.has_previous_state()


def test_cache_rejects_mismatched_states():
    with pytest.raises(ValueError, match="same shape"):
        RecurrentCache([torch.zeros(2, 3)], [torch.zeros(2, 4)])


# --- regularisers -----------------------------------------------------------------------------------


def test_locked_dropout_one_mask_over_time():
    torch.manual_seed(0)
    x = torch.ones(4, 9, 16)
    y = locked_dropout(x, 0.5, training=True)
    assert torch.equal(y, y[:, :1].expand_as(y))  # the same mask at every step
    assert set(y.unique().tolist()) == {0.0, 2.0}  # dropped or rescaled by 1 / (1 - p)
    assert not torch.equal(y[0], y[1])  # but a different mask per sequence
    assert torch.equal(locked_dropout(x, 0.5, training=False), x)


def test_embedding_dropout_drops_whole_rows():
    embedding = nn.Embedding(50, 6)
    nn.init.ones_(embedding.weight)
    ids = torch.arange(50).repeat(3)[None]  # every word type three times
    torch.manual_seed(0)
    d = embedding_dropout(embedding, ids, 0.5, training=True)[0]
    assert {tuple(r.tolist()) for r in d.unique(dim=0)} == {(0.0,) * 6, (2.0,) * 6}
    torch.testing.assert_close(d[:50], d[50:100], rtol=0, atol=0)  # one mask per word type, not per position
    torch.testing.assert_close(d[:50], d[100:], rtol=0, atol=0)
    # The same numbers as looking the ids up in the masked matrix.
    torch.manual_seed(0)
    masked = embedding.weight * (embedding.weight.new_empty(50, 1).bernoulli_(0.5) / 0.5)
    torch.testing.assert_close(d, masked[ids[0]], rtol=0, atol=0)
    assert torch.equal(embedding_dropout(embedding, ids, 0.5, training=False), embedding(ids))


def test_input_embedding_hooks_see_the_lookup():
    # transformers' enable_input_require_grads (adapters with frozen weights, gradient checkpointing) hooks
    # the input embedding module: the body must call it, in training with embedding dropout too.
    model = AWDLSTMForCausalLM(tiny_config(dropout_embedding=0.1)).train()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    model.enable_input_require_grads()
    out = model(prompts(), labels=prompts(), output_hidden_states=True)
    assert out.hidden_states[0].requires_grad and out.loss.requires_grad


def test_weight_drop_masks_only_hidden_to_hidden_with_one_mask():
    torch.manual_seed(0)
    layer = WeightDropLSTM(5, 7, weight_drop=0.5).train()
    seen = []
    original = layer.dropped_weights

    def record():
        weights = original()
        seen.append(weights)
        return weights

    layer.dropped_weights = record
    x = torch.randn(3, 6, 5)
    zeros = torch.zeros(3, 7)
    out, (h, c) = layer(x, (zeros, zeros))
    assert len(seen) == 1 and set(seen[0]) == {"weight_hh_l0"}  # W_ih and biases untouched
    w_hh = seen[0]["weight_hh_l0"]
    dropped = w_hh == 0
    assert 0.3 < dropped.float().mean() < 0.7
    kept = ~dropped
    assert torch.allclose(w_hh[kept], 2 * layer.lstm.weight_hh_l0[kept])
    # One mask for the whole sequence: a plain LSTM with that one masked matrix gives the same outputs.
    ref = nn.LSTM(5, 7, batch_first=True)
    ref.load_state_dict({**layer.lstm.state_dict(), "weight_hh_l0": w_hh.detach()})
    ref_out, _ = ref(x)
    assert torch.allclose(out, ref_out, atol=1e-6)
    # Gradients reach the stored parameter through the mask, and only where it kept entries.
    out.sum().backward()
    grad = layer.lstm.weight_hh_l0.grad
    assert torch.all(grad[dropped] == 0) and grad[kept].abs().sum() > 0
    # Eval: no mask at all.
    layer.eval()
    layer.dropped_weights = original
    assert layer.dropped_weights() == {}
    a, _ = layer(x, (zeros, zeros))
    b, _ = nn.LSTM.forward(layer.lstm, x)
    assert torch.allclose(a, b, atol=1e-6)


def test_training_forward_raises_no_warnings(recwarn):
    model = tiny_model().train()
    x = prompts(3, 8)
    out = model(x, labels=x)
    out.loss.backward()
    assert len(recwarn) == 0, [str(w.message) for w in recwarn]
    assert model.model.layers[0].lstm.weight_hh_l0.grad is not None


def test_loss_adds_ar_tar_in_training_only():
    model = tiny_model(alpha=2.0, beta=1.0).train()
    x = prompts(2, 8)
    out = model(x, labels=x)
    assert out.logits is None  # no |V|-wide scores in training
    assert out.activation_regularization > 0 and out.temporal_activation_regularization > 0
    assert torch.allclose(
        out.loss, out.nll + out.activation_regularization + out.temporal_activation_regularization
    )
    model.eval()
    out = model(x, labels=x)
    assert torch.equal(out.loss, out.nll) and out.activation_regularization is None
    assert out.logits.shape == (2, 8, V)


def test_eval_is_deterministic():
    model = tiny_model()
    x = prompts()
    assert torch.equal(model(x).logits, model(x).logits)


# --- recurrent state --------------------------------------------------------------------------------


def test_state_carried_across_calls_equals_one_call():
    model = tiny_model()
    x = prompts(2, 9)
    full = model(x).logits
    first = model(x[:, :4])
    second = model(x[:, 4:], cache=first.cache)
    assert second.cache.get_seq_length() == 9
    assert torch.allclose(torch.cat([first.logits, second.logits], dim=1), full, atol=1e-5)



@pytest.mark.allow_deprecated
def test_the_old_past_key_values_argument_still_carries_the_state_with_a_future_warning():
    # transformers 5.24 renamed past_key_values to cache; code written for older releases must not have its
    # state silently dropped into **kwargs.
    model = tiny_model()
    x = prompts(2, 9)
    first = model(x[:, :4])
    expected = model(x[:, 4:], cache=first.cache.detach()).logits
    with pytest.warns(FutureWarning, match="past_key_values.*cache"):
        old = model(x[:, 4:], past_key_values=first.cache.detach())
    assert old.cache.get_seq_length() == 9
    torch.testing.assert_close(old.logits, expected)


def test_left_padding_leaves_state_unchanged():
    model = tiny_model()
    x = prompts(1, 5)
    alone = model(x).logits[:, -1]
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])
    assert torch.allclose(model(padded, attention_mask=mask).logits[:, -1], alone, atol=1e-5)


@pytest.mark.parametrize(
    "gen_kwargs",
    [
        dict(do_sample=False),
        dict(do_sample=False, num_beams=3),
        dict(do_sample=False, num_beams=3, num_return_sequences=2),
        dict(do_sample=True, top_k=0),
        dict(do_sample=True, top_k=0, num_return_sequences=2),
    ],
    ids=["greedy", "beam3", "beam3_return2", "sample", "sample_return2"],
)
def test_cached_generation_equals_uncached(gen_kwargs):
    model = tiny_model()
    x = prompts(2, 5)
    results = []
    for use_cache in (True, False):
        torch.manual_seed(123)
        results.append(model.generate(x, max_new_tokens=6, use_cache=use_cache, **gen_kwargs))
    assert results[0].shape[1] == 11
    assert torch.equal(results[0], results[1])


def test_left_padded_batch_generation():
    model = tiny_model()
    short, long = prompts(1, 3), prompts(1, 6)[:, 1:]
    x = torch.cat([torch.cat([torch.zeros(1, 2, dtype=torch.long), short], dim=1), long])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    for kwargs in (dict(do_sample=False), dict(do_sample=False, num_beams=3)):
        cached = model.generate(x, attention_mask=mask, max_new_tokens=5, **kwargs)
        uncached = model.generate(x, attention_mask=mask, max_new_tokens=5, use_cache=False, **kwargs)
        assert torch.equal(cached, uncached)
        # The padded row generates what the prompt generates alone.
        alone = model.generate(short, max_new_tokens=5, **kwargs)
        assert torch.equal(cached[0, 2:], alone[0])


def test_split_head_tied_generates():
    model = tiny_model(head="split", cutoffs=[5, 12])
    assert model.lm_head.weight is model.model.embed_tokens.weight
    x = prompts()
    a = model.generate(x, max_new_tokens=4, num_beams=2, do_sample=False)
    b = model.generate(x, max_new_tokens=4, num_beams=2, do_sample=False, use_cache=False)
    assert torch.equal(a, b)


# --- save / load ------------------------------------------------------------------------------------


def test_save_load_keeps_tied_weights(tmp_path):
    model = tiny_model()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    model.save_pretrained(tmp_path)
    loaded = AWDLSTMForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()
    x = prompts()
    assert torch.equal(loaded(x).logits, model(x).logits)


def test_auto_round_trip(tmp_path):
    AutoConfig.register("awd_lstm", AWDLSTMConfig, exist_ok=True)
    AutoModelForCausalLM.register(AWDLSTMConfig, AWDLSTMForCausalLM, exist_ok=True)
    model = tiny_model(tie_word_embeddings=False, last_hidden_size=10)
    assert model.lm_head.in_features == 10
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, AWDLSTMForCausalLM) and loaded.config.last_hidden_size == 10
    x = prompts()
    assert torch.equal(loaded(x).logits, model(x).logits)


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field", ["dropout", "dropout_hidden", "dropout_input", "dropout_embedding", "weight_drop"]
)
def test_dropout_out_of_range(field):
    with pytest.raises(ValueError, match=f"{field} is a dropout probability"):
        tiny_config(**{field: 1.0})
    with pytest.raises(ValueError, match=field):
        tiny_config(**{field: -0.1})


def test_tied_sizes_must_match():
    with pytest.raises(ValueError, match=r"last_hidden_size \(10\) must equal embedding_size \(8\)"):
        tiny_config(last_hidden_size=10)
    assert tiny_config().layer_sizes == [12, 8]  # tied: the last layer is embedding_size, as in the paper
    assert tiny_config(tie_word_embeddings=False).layer_sizes == [12, 12]


def test_bad_head_config():
    with pytest.raises(ValueError, match="cutoff"):
        tiny_config(head="split", cutoffs=[5, 40])
    with pytest.raises(ValueError, match="tree"):
        tiny_config(head="tree", tie_word_embeddings=True)
    assert tiny_config(head="tree").tie_word_embeddings is False  # unset, it ties only where the head can


def test_wrong_cache_type():
    from transformers import DynamicCache

    model = tiny_model()
    with pytest.raises(TypeError, match="RecurrentCache"):
        model(prompts(), cache=DynamicCache())


def test_cached_generation_feeds_one_token_per_step():
    model = tiny_model()
    lengths = []
    hook = model.model.register_forward_pre_hook(
        lambda module, args, kwargs: lengths.append(args[0].shape[1]), with_kwargs=True
    )
    try:
        model.generate(prompts(2, 5), max_new_tokens=4, do_sample=False, num_beams=2)
    finally:
        hook.remove()
    assert lengths == [5, 1, 1, 1]  # the prompt (read after the sentence boundary), then one token a step


def test_a_new_sequence_is_read_after_the_sentence_boundary():
    """One definition of where a sequence starts, for forward(), evaluation and generate(): the state
    after <bos>. forward(x) equals reading <bos> + x from the zero state (an empty RecurrentCache) and
    dropping the boundary's position; generate()'s first-step logits are forward()'s."""
    model = tiny_model()
    x = prompts(2, 5)
    bos = torch.full((2, 1), model.config.bos_token_id)
    with torch.no_grad():
        forward = model(x).logits
        from_zero = model(torch.cat([bos, x], 1), cache=RecurrentCache()).logits[:, 1:]
        without_boundary = model(x, cache=RecurrentCache()).logits
    torch.testing.assert_close(forward, from_zero)
    assert not torch.allclose(forward[:, -1], without_boundary[:, -1])  # the boundary changes the prediction
    for use_cache in (True, False):
        out = model.generate(x, max_new_tokens=1, do_sample=False, use_cache=use_cache, output_logits=True,
                             return_dict_in_generate=True)
        torch.testing.assert_close(out.logits[0], forward[:, -1])


def test_sequence_scores_equal_forward_log_probs():
    """A greedy continuation's score from generate() is the log-probability forward() gives it."""
    model = tiny_model()
    x = prompts(1, 4)
    out = model.generate(x, max_new_tokens=3, do_sample=False, num_beams=2, length_penalty=0.0,
                         return_dict_in_generate=True, output_scores=True)
    seq = out.sequences
    with torch.no_grad():
        logp = torch.log_softmax(model(seq).logits[:, :-1].float(), -1)
    new = seq[:, x.shape[1]:]
    total = logp[:, x.shape[1] - 1 :].gather(-1, new[..., None]).sum()
    assert out.sequences_scores[0].item() == pytest.approx(total.item(), abs=1e-4)


def test_tree_head_untied(tmp_path):
    from hf_nlm.trees import random_tree

    torch.manual_seed(0)
    model = AWDLSTMForCausalLM(
        tiny_config(head="tree", tie_word_embeddings=False), tree=random_tree(V)
    ).eval()
    x = prompts()
    logp = torch.log_softmax(model(x).logits, dim=-1)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(2, 5), atol=1e-4)
    model.save_pretrained(tmp_path)
    loaded = AWDLSTMForCausalLM.from_pretrained(tmp_path).eval()
    assert torch.allclose(loaded(x).logits, model(x).logits)


def test_right_padding_freezes_state():
    model = tiny_model()
    full, short = prompts(1, 6), prompts(1, 4)
    x = torch.cat([full, torch.cat([short, torch.zeros(1, 2, dtype=torch.long)], dim=1)])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    batch = model(x, attention_mask=mask)
    alone_full, alone_short = model(full), model(short)
    assert torch.allclose(batch.logits[0], alone_full.logits[0], atol=1e-5)
    assert torch.allclose(batch.logits[1, :4], alone_short.logits[0], atol=1e-5)
    for layer in range(2):
        h_batch, c_batch = batch.cache.get_state(layer)
        h_short, c_short = alone_short.cache.get_state(layer)
        assert torch.allclose(h_batch[1], h_short[0], atol=1e-6) and torch.allclose(
            c_batch[1], c_short[0], atol=1e-6
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_beams=0), "num_beams must be an integer >= 1"),
        (dict(num_beams=2, num_return_sequences=0), "num_return_sequences must be an integer >= 1"),
        (dict(num_beams=2, num_return_sequences=3), "num_return_sequences"),  # more sequences than beams
    ],
)
def test_generation_refuses_bad_beam_counts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        tiny_model().generate(prompts(), max_new_tokens=2, do_sample=False, **kwargs)
