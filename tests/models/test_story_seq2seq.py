"""The attention seq2seq model (model_type="story_seq2seq"): decoding against exhaustive search, the cache
against recomputation, padding against one-by-one, attention weights against a hand computation, save /
load."""

from __future__ import annotations

import itertools

import pytest
import torch
from plain_search import plain_search
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

import hf_nlm  # noqa: F401  (registers the model types)
from hf_nlm.cache_utils import Seq2SeqRecurrentCache
from hf_nlm.models.story_seq2seq import (
    ATTENTION_TYPES,
    StorySeq2SeqConfig,
    StorySeq2SeqForConditionalGeneration,
    StorySeq2SeqModel,
    shift_tokens_right,
)
from hf_nlm.trees import random_tree

PAD, START, EOS = 0, 1, 2
V = 7


def tiny(attention: str = "general", input_feeding: bool = True, seed: int = 0,
         **kwargs) -> StorySeq2SeqForConditionalGeneration:
    values = dict(vocab_size=V, embedding_size=8, hidden_size=8, attention=attention,
                  input_feeding=input_feeding, dropout=0.0, pad_token_id=PAD, bos_token_id=START,
                  eos_token_id=EOS, decoder_start_token_id=START, initializer_range=0.5)
    values.update(kwargs)
    torch.manual_seed(seed)
    tree = random_tree(V, seed=0) if values.get("head") == "tree" else None
    return plain_search(StorySeq2SeqForConditionalGeneration(StorySeq2SeqConfig(**values), tree=tree).eval())


#: The config values each head needs in a tiny model (the split head's cut-offs; a tree head is not tied).
HEAD_VALUES = {"softmax": {}, "split": {"cutoffs": [3, 5]}, "tree": {"tie_word_embeddings": False}}

VARIANTS = [(a, f) for a in ATTENTION_TYPES for f in (True, False)]
VARIANT_IDS = [f"{a}-{'feed' if f else 'nofeed'}" for a, f in VARIANTS]


def sources(seed: int = 0, B: int = 3, S: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded sources of lengths S, S-2, S-3 ... and their mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, V, (B, S), generator=g)
    mask = torch.ones_like(ids)
    for b in range(1, B):
        mask[b, S - 1 - b :] = 0
    return ids.masked_fill(mask == 0, PAD), mask


def target_log_probs(model, src, mask, labels) -> torch.Tensor:
    """log p(labels[:, t] | ...) of every position by one teacher-forced forward: (B, T), 0 where labels
    are -100."""
    with torch.no_grad():
        logits = model(src, attention_mask=mask, decoder_input_ids=shift_tokens_right(labels, PAD, START),
                       use_cache=False).logits
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.clamp(min=0)[..., None]).squeeze(-1)
    return logp.masked_fill(labels == -100, 0.0)


# ---------------------------------------------------------------------------------------------- beam search
def all_hypotheses(max_new: int) -> list[tuple[int, ...]]:
    """Every output of at most ``max_new`` tokens: ending in EOS (none before), or ``max_new`` tokens without
    EOS."""
    words = [w for w in range(V) if w != EOS]
    hyps = [(*prefix, EOS) for n in range(max_new) for prefix in itertools.product(words, repeat=n)]
    return hyps + list(itertools.product(words, repeat=max_new))


def exhaustive_scores(model, src, mask, hyps, length_penalty: float) -> list[float]:
    """sum_t log p(y_t) / len(y) ** length_penalty of each hypothesis, each scored by a teacher-forced
    forward."""
    T = max(map(len, hyps))
    labels = torch.tensor([list(h) + [-100] * (T - len(h)) for h in hyps])
    total = target_log_probs(model, src.expand(len(hyps), -1), mask.expand(len(hyps), -1), labels).sum(-1)
    return [(s / len(h) ** length_penalty).item() for s, h in zip(total, hyps, strict=True)]


def beam_outputs(model, src, mask, max_new: int, num_beams: int, length_penalty: float, n: int):
    out = model.generate(src, attention_mask=mask, max_new_tokens=max_new, num_beams=num_beams,
                         num_return_sequences=n, length_penalty=length_penalty, early_stopping="never",
                         do_sample=False, eos_token_id=EOS, pad_token_id=PAD, return_dict_in_generate=True,
                         output_scores=True)
    hyps = []
    for row in out.sequences[:, 1:].tolist():  # drop decoder_start_token_id
        hyps.append(tuple(row[: row.index(EOS) + 1]) if EOS in row else tuple(row))
    return hyps, out.sequences_scores.tolist()


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_beam_search_with_enough_beams_is_exhaustive_search(length_penalty):
    """With as many beams as there are hypotheses, beam search ranks every possible output exactly as scoring
    each one with a teacher-forced forward does (its best first), with the same scores."""
    model = tiny("additive", seed=3)
    src, mask = sources(B=1)
    hyps = all_hypotheses(3)
    scores = exhaustive_scores(model, src, mask, hyps, length_penalty)
    ranked = sorted(zip(scores, hyps, strict=True), reverse=True)[:5]
    found, found_scores = beam_outputs(model, src, mask, 3, num_beams=len(hyps),
                                       length_penalty=length_penalty, n=5)
    assert found == [h for _, h in ranked]
    assert found_scores == pytest.approx([s for s, _ in ranked], abs=1e-4)


def test_length_penalty_ranks_by_length_normalised_log_probability():
    """The length-normalised (1/t) sum log p is length_penalty=1: here it picks another winner than the summed
    log-probability (length_penalty=0), and beam search follows each ranking."""
    model = tiny("additive", seed=3)
    src, mask = sources(B=1)
    hyps = all_hypotheses(3)
    best = {lp: max(zip(exhaustive_scores(model, src, mask, hyps, lp), hyps, strict=True))[1]
            for lp in (0.0, 1.0, 2.0)}
    assert best[0.0] != best[1.0]  # the case is one where the length normalisation matters
    assert len(best[0.0]) < len(best[1.0]) <= len(best[2.0])
    for lp, winner in best.items():
        assert beam_outputs(model, src, mask, 3, num_beams=len(hyps), length_penalty=lp, n=1)[0] == [winner]
    # A hand check of the definition on the winner: the score divides the summed log-probability by t ** lp.
    labels = torch.tensor([list(best[1.0])])
    total = target_log_probs(model, src, mask, labels).sum().item()
    _, (score,) = beam_outputs(model, src, mask, 3, num_beams=len(hyps), length_penalty=1.0, n=1)
    assert score == pytest.approx(total / len(best[1.0]), abs=1e-4)


# ---------------------------------------------------------------------------------------------- the cache
@pytest.mark.parametrize(("attention", "input_feeding"), VARIANTS, ids=VARIANT_IDS)
def test_cached_step_by_step_decoding_equals_the_full_forward(attention, input_feeding):
    model = tiny(attention, input_feeding, decoder_layers=2, encoder_layers=2)
    src, mask = sources()
    labels = torch.randint(3, V, (3, 5), generator=torch.Generator().manual_seed(1))
    dec = shift_tokens_right(labels, PAD, START)
    with torch.no_grad():
        full = model(src, attention_mask=mask, decoder_input_ids=dec, use_cache=False).logits
        encoder_outputs = model.get_encoder()(src, mask)
        state, steps = None, []
        for t in range(dec.shape[1]):
            out = model(attention_mask=mask, decoder_input_ids=dec[:, t : t + 1],
                        encoder_outputs=encoder_outputs, cache=state, use_cache=True)
            state = out.cache
            steps.append(out.logits)
    assert isinstance(state, Seq2SeqRecurrentCache) and state.get_seq_length() == dec.shape[1]
    assert (state.input_feed is not None) == input_feeding
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("input_feeding", [True, False])
def test_generate_with_the_cache_equals_generate_without(input_feeding):
    model = tiny("general", input_feeding)
    src, mask = sources()
    kwargs = dict(attention_mask=mask, max_new_tokens=6, num_beams=3, num_return_sequences=2,
                  eos_token_id=EOS, pad_token_id=PAD, return_dict_in_generate=True, output_scores=True)
    cached = model.generate(src, use_cache=True, **kwargs)
    uncached = model.generate(src, use_cache=False, **kwargs)
    assert isinstance(cached.cache, Seq2SeqRecurrentCache)
    assert torch.equal(cached.sequences, uncached.sequences)
    torch.testing.assert_close(cached.sequences_scores, uncached.sequences_scores)


def test_greedy_sampling_and_beams_through_generate():
    model = tiny("dot")
    src, mask = sources()
    greedy = model.generate(src, attention_mask=mask, max_new_tokens=5, do_sample=False)
    # Greedy = the argmax of a teacher-forced forward over greedy's own output, at every step.
    with torch.no_grad():
        logits = model(src, attention_mask=mask, decoder_input_ids=greedy[:, :-1]).logits
    # after an EOS: padding
    done = torch.cumsum(greedy[:, 1:] == EOS, dim=1) - (greedy[:, 1:] == EOS).long() > 0
    assert torch.equal(logits.argmax(-1)[~done], greedy[:, 1:][~done])
    torch.manual_seed(0)
    sampled = model.generate(src, attention_mask=mask, max_new_tokens=5, do_sample=True,
                             num_return_sequences=4)
    assert sampled.shape[0] == 12 and (sampled[:, 0] == START).all()
    beams = model.generate(src, attention_mask=mask, max_new_tokens=5, num_beams=4, num_return_sequences=3)
    assert beams.shape[0] == 9


# ---------------------------------------------------------------------------------------------- padding
@pytest.mark.parametrize(("attention", "input_feeding"),
                         [("general", True), ("concat", False), ("none", True)])
def test_a_padded_batch_equals_the_examples_one_by_one(attention, input_feeding):
    model = tiny(attention, input_feeding, bidirectional_encoder=True, encoder_layers=2)
    src, mask = sources()
    labels = torch.randint(3, V, (3, 5), generator=torch.Generator().manual_seed(2))
    labels[1, 3:] = -100  # targets of different lengths: right-padded
    labels[2, 2:] = -100
    batch = target_log_probs(model, src, mask, labels)
    for b in range(3):
        n, t = int(mask[b].sum()), int((labels[b] != -100).sum())
        alone = target_log_probs(model, src[b : b + 1, :n], mask[b : b + 1, :n], labels[b : b + 1, :t])
        torch.testing.assert_close(batch[b, :t], alone[0])
        one = model.generate(src[b : b + 1, :n], max_new_tokens=4, num_beams=2, eos_token_id=EOS,
                             pad_token_id=PAD)
        many = model.generate(src, attention_mask=mask, max_new_tokens=4, num_beams=2, eos_token_id=EOS,
                              pad_token_id=PAD)
        assert many[b, : one.shape[1]].tolist() == one[0].tolist()


def test_left_padding_reads_the_same_source():
    model = tiny("additive", bidirectional_encoder=True)
    src, mask = sources()
    lengths = mask.sum(1)
    left = torch.full_like(src, PAD)
    left_mask = torch.zeros_like(mask)
    for b, n in enumerate(lengths.tolist()):
        left[b, src.shape[1] - n :], left_mask[b, src.shape[1] - n :] = src[b, :n], 1
    labels = torch.randint(3, V, (3, 4), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(target_log_probs(model, left, left_mask, labels),
                               target_log_probs(model, src, mask, labels))


# ---------------------------------------------------------------------------------------------- attention
@pytest.mark.parametrize("attention", [a for a in ATTENTION_TYPES if a != "none"])
def test_attention_weights_sum_to_one_and_skip_source_padding(attention):
    model = tiny(attention, input_feeding=True)
    src, mask = sources()
    dec = torch.randint(3, V, (3, 4), generator=torch.Generator().manual_seed(4))
    queries = []  # the decoder states s_t the attention is asked with; its last call scores every position
    hook = model.model.decoder.attention.register_forward_hook(lambda m, args, out: queries.append(args[0]))
    try:
        with torch.no_grad():
            out = model(src, attention_mask=mask, decoder_input_ids=dec, output_attentions=True)
    finally:
        hook.remove()
    assert isinstance(out.cross_attentions, tuple) and len(out.cross_attentions) == 1  # one attention layer
    assert out.cross_attentions[0].shape == (3, 1, 4, src.shape[1])  # (B, heads, T_target, T_source)
    a = out.cross_attentions[0][:, 0]
    assert (a[~mask.bool()[:, None, :].expand_as(a)] == 0).all()
    torch.testing.assert_close(a.sum(-1), torch.ones(3, 4))
    assert (a[mask.bool()[:, None, :].expand_as(a)] > 0).all()
    # By hand from the annotations h_j and the decoder states s_t (dot / general: Luong's eq. 8).
    h, s = out.encoder_last_hidden_state, queries[-1]
    assert s.shape == (3, 4, 8)
    if attention in ("dot", "general"):
        keys = h if attention == "dot" else h @ model.model.decoder.attention.W_a.weight.T
        scores = torch.einsum("btd,bsd->bts", s, keys).masked_fill(~mask.bool()[:, None, :], float("-inf"))
        torch.testing.assert_close(a, torch.softmax(scores, dim=-1))


def test_no_attention_returns_no_weights_and_ignores_the_annotations_after_the_start():
    """attention="none": the decoder sees the source only through the encoder's final state."""
    model = tiny("none", bidirectional_encoder=False)
    src, mask = sources(B=1)
    dec = torch.tensor([[START, 3, 4]])
    with torch.no_grad():
        out = model(src, decoder_input_ids=dec, output_attentions=True)
        enc = model.get_encoder()(src)
        enc.last_hidden_state = torch.randn_like(enc.last_hidden_state)  # other annotations, same final state
        other = model(decoder_input_ids=dec, encoder_outputs=enc)
    assert out.cross_attentions is None
    torch.testing.assert_close(other.logits, out.logits)


# ------------------------------------------------------------------------------ transformers' output layout
@pytest.mark.parametrize("input_feeding", [True, False], ids=["feed", "nofeed"])
@pytest.mark.parametrize(("encoder_layers", "decoder_layers"), [(1, 1), (2, 3), (3, 2)])
def test_hidden_states_are_the_embeddings_then_each_layers_output(encoder_layers, decoder_layers,
                                                                   input_feeding):
    """encoder_hidden_states / decoder_hidden_states hold layers + 1 tensors: the embedded inputs, then each
    layer's output; the decoder's last is h~ (what the head reads), its lower ones the LSTM layers' states,
    checked against a separate one-layer nn.LSTM with the same weights."""
    model = tiny("general", input_feeding, embedding_size=6, hidden_size=8, tie_word_embeddings=False,
                 encoder_layers=encoder_layers, decoder_layers=decoder_layers)
    src, mask = sources()
    dec = torch.randint(3, V, (3, 4), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        out = model(src, attention_mask=mask, decoder_input_ids=dec, output_hidden_states=True)
        plain = model(src, attention_mask=mask, decoder_input_ids=dec)
    enc, hid = out.encoder_hidden_states, out.decoder_hidden_states
    assert isinstance(enc, tuple) and isinstance(hid, tuple)
    assert len(enc) == encoder_layers + 1 and len(hid) == decoder_layers + 1
    assert [tuple(h.shape) for h in enc] == [(3, 6, 6)] + [(3, 6, 8)] * encoder_layers
    assert [tuple(h.shape) for h in hid] == [(3, 4, 6)] + [(3, 4, 8)] * decoder_layers
    torch.testing.assert_close(enc[0], model.model.encoder.embed_tokens(src))
    torch.testing.assert_close(enc[-1], out.encoder_last_hidden_state)
    torch.testing.assert_close(hid[0], model.model.decoder.embed_tokens(dec))
    torch.testing.assert_close(model.lm_head(hid[-1]), out.logits)
    torch.testing.assert_close(out.logits, plain.logits)  # asking for the states changes no result
    assert plain.encoder_hidden_states is None and plain.decoder_hidden_states is None
    if not input_feeding and decoder_layers > 1:
        # The first decoder layer alone: an LSTM over E y from the encoder's first layer's final state.
        lstm = model.model.decoder.lstm
        first = torch.nn.LSTM(6, 8, batch_first=True)
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(first, f"{name}_l0").data.copy_(getattr(lstm, f"{name}_l0"))
        with torch.no_grad():
            encoded = model.get_encoder()(src, mask)
            h0, c0 = encoded.final_hidden[:, 0], encoded.final_cell[:, 0]
            expected, _ = first(hid[0], (h0[None], c0[None]))
        torch.testing.assert_close(hid[1], expected)


@pytest.mark.parametrize("attention", ATTENTION_TYPES)
def test_attention_outputs_are_the_cross_attention_alone(attention):
    """An LSTM encoder and decoder have no self-attention: encoder_attentions and decoder_attentions stay
    None, and cross_attentions holds the one attention layer's weights (none without attention)."""
    model = tiny(attention)
    src, mask = sources()
    dec = torch.randint(3, V, (3, 4), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        out = model(src, attention_mask=mask, decoder_input_ids=dec, output_attentions=True,
                    output_hidden_states=True)
        body = model.model(src, attention_mask=mask, decoder_input_ids=dec, output_attentions=True)
    for output in (out, body):
        assert output.encoder_attentions is None and output.decoder_attentions is None
        if attention == "none":
            assert output.cross_attentions is None
        else:
            assert len(output.cross_attentions) == 1
            assert output.cross_attentions[0].shape == (3, 1, 4, src.shape[1])


@pytest.mark.parametrize("head", ["softmax", "split", "tree"])
def test_the_loss_is_the_cross_entropy_of_the_returned_logits_and_the_labels(head):
    """With the logits of every position returned, the loss is F.cross_entropy(logits, labels) (-100 ignored),
    labels not shifted again: its value, and its gradient with respect to the logits, which a loss computed
    beside the logits would not have."""
    model = tiny("general", head=head, **HEAD_VALUES[head])
    src, mask = sources()
    labels = torch.randint(3, V, (3, 5), generator=torch.Generator().manual_seed(10))
    labels[1, 3:] = -100
    out = model(src, attention_mask=mask, decoder_input_ids=shift_tokens_right(labels, PAD, START),
                labels=labels)
    logits = out.logits
    aligned = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    shifted = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(),
                                                ignore_index=-100)
    torch.testing.assert_close(out.loss, aligned)
    (grad,) = torch.autograd.grad(out.loss, logits, retain_graph=True)
    (grad_aligned,) = torch.autograd.grad(aligned, logits, retain_graph=True)
    (grad_shifted,) = torch.autograd.grad(shifted, logits)
    torch.testing.assert_close(grad, grad_aligned)
    assert not torch.allclose(grad, grad_shifted)
    # Fewer logits returned (logits_to_keep): the loss is still the mean NLL of every label, from the head.
    with torch.no_grad():
        last = model(src, attention_mask=mask, labels=labels, logits_to_keep=1)
    assert last.logits.shape[1] == 1
    torch.testing.assert_close(last.loss, out.loss.detach())


# ---------------------------------------------------------------------------------------------- training
@pytest.mark.parametrize(("attention", "input_feeding"), VARIANTS, ids=VARIANT_IDS)
def test_forward_and_backward_give_finite_gradients_to_every_parameter(attention, input_feeding):
    model = tiny(attention, input_feeding, dropout=0.3, encoder_layers=2, decoder_layers=2).train()
    src, mask = sources()
    labels = torch.randint(3, V, (3, 5), generator=torch.Generator().manual_seed(5))
    labels[2, 3:] = -100
    out = model(src, attention_mask=mask, labels=labels)
    assert out.logits is None and torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} gets no gradient"
        assert torch.isfinite(p.grad).all(), name


def test_loss_is_the_mean_nll_of_the_labels_and_the_head_reads_the_last_decoder_hidden_state():
    """The training seam's contract: -lm_head.nll(decoder_hidden_states[-1], labels) is log p of each
    label."""
    model = tiny("concat")
    src, mask = sources()
    labels = torch.randint(3, V, (3, 5), generator=torch.Generator().manual_seed(6))
    labels[1, 2:] = -100
    with torch.no_grad():
        out = model(src, attention_mask=mask, labels=labels, output_hidden_states=True)
        per_token = -model.lm_head.nll(out.decoder_hidden_states[-1], labels.clamp(min=0))
    logp = target_log_probs(model, src, mask, labels)
    keep = labels != -100
    torch.testing.assert_close(per_token[keep], logp[keep])
    torch.testing.assert_close(out.loss, -logp[keep].mean())
    torch.testing.assert_close(model.lm_head(out.decoder_hidden_states[-1]), out.logits)


@pytest.mark.parametrize("head", ["tree", "split"])
def test_a_non_softmax_head_works_with_the_seq2seq_body(head):
    model = tiny("general", head=head, **HEAD_VALUES[head])
    src, mask = sources()
    labels = torch.randint(3, V, (3, 4), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        out = model(src, attention_mask=mask, labels=labels)
        trained = model.train()(src, attention_mask=mask, labels=labels)  # dropout 0: the same function
    # The loss (eval: of the logits; training: through the head's fast nll) equals the exact log-probabilities
    # the head gives generate().
    torch.testing.assert_close(out.loss, -target_log_probs(model.eval(), src, mask, labels).mean())
    assert trained.logits is None
    torch.testing.assert_close(trained.loss, out.loss)
    hyps, scores = beam_outputs(model, src[:1, :5], mask[:1, :5], 3, num_beams=3, length_penalty=0.0, n=1)
    labels = torch.tensor([list(hyps[0])])
    assert scores[0] == pytest.approx(target_log_probs(model, src[:1, :5], mask[:1, :5], labels).sum().item(),
                                      abs=1e-4)


# ------------------------------------------------------------------------------------------- saving, registry
@pytest.mark.parametrize("tie", [True, False])
def test_save_and_load_keep_the_outputs(tmp_path, tie):
    model = tiny("additive", tie_word_embeddings=tie, input_feeding=not tie)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file() and not list(tmp_path.glob("*.bin"))
    assert type(AutoConfig.from_pretrained(tmp_path)) is StorySeq2SeqConfig
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is StorySeq2SeqForConditionalGeneration
    src, mask = sources()
    labels = torch.randint(3, V, (3, 4), generator=torch.Generator().manual_seed(8))
    torch.testing.assert_close(target_log_probs(loaded, src, mask, labels),
                               target_log_probs(model, src, mask, labels))
    kwargs = dict(attention_mask=mask, max_new_tokens=5, num_beams=2)
    assert torch.equal(loaded.generate(src, **kwargs), model.generate(src, **kwargs))
    emb = loaded.model.encoder.embed_tokens.weight
    tied = [loaded.model.decoder.embed_tokens.weight, loaded.lm_head.weight]
    assert all((w is emb) == tie for w in tied)
    assert type(AutoModel.from_pretrained(tmp_path)) is StorySeq2SeqModel


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"attention": "bilinear"},
         r"attention must be one of 'dot', 'general', 'additive', 'concat', 'none'; got 'bilinear'"),
        ({"hidden_size": 7, "embedding_size": 7},
         r"hidden_size must be even with bidirectional_encoder=True"),
        ({"embedding_size": 6},
         r"tie_word_embeddings=True scores .*\(embedding_size=6\): the two must be equal"),
        ({"dropout": 1.0}, r"dropout is a probability and must be in \[0, 1\), got 1.0"),
        ({"decoder_layers": 0}, r"decoder_layers must be >= 1, got 0"),
        ({"is_encoder_decoder": False}, r"is_encoder_decoder must be True"),
        ({"decoder_start_token_id": 9},
         r"decoder_start_token_id must be a token id in \[0, vocab_size=7\), got 9"),
        ({"head": "nope"}, r"head must be one of"),
        ({"input_feeding": "yes"}, r"field 'input_feeding' must be bool, got 'yes'"),
    ],
)
def test_bad_config_values_are_refused_with_the_field_named(fields, message):
    values = dict(vocab_size=V, embedding_size=8, hidden_size=8)
    values.update(fields)
    with pytest.raises(ValueError, match=message):
        StorySeq2SeqConfig(**values)


def test_bad_inputs_are_refused_clearly():
    model = tiny()
    src, mask = sources()
    mask[1] = 0
    with pytest.raises(ValueError, match=r"source rows \[1\] have no token"):
        model(src, attention_mask=mask, decoder_input_ids=src[:, :2])
    with pytest.raises(ValueError, match="give decoder_input_ids"):
        model(src)
    for mode in (model.eval, model.train):  # the loss of the logits and the head's fast path alike
        mode()
        with pytest.raises(ValueError, match="every label is -100"):
            model(src, labels=torch.full((3, 2), -100))


# --------------------------------------------------------------------------------------------- attention plot
def test_plot_attention_writes_the_heatmap_of_the_weights_used_while_generating(tmp_path, toy_texts):
    from hf_nlm.plots.attention import plot_attention
    from hf_nlm.tokenization import train_word_level_tokenizer

    tokenizer = train_word_level_tokenizer(toy_texts)
    eos = tokenizer.eos_token_id
    torch.manual_seed(0)
    config = StorySeq2SeqConfig(vocab_size=len(tokenizer), embedding_size=8, hidden_size=8,
                                attention="general", dropout=0.0, pad_token_id=eos, bos_token_id=eos,
                                eos_token_id=eos, decoder_start_token_id=eos, initializer_range=0.5)
    model = StorySeq2SeqForConditionalGeneration(config).eval()
    source = "the cat sat on the mat"
    text, weights = plot_attention(model, tokenizer, source, tmp_path / "attention.png", max_new_tokens=5)
    assert (tmp_path / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert weights.shape[1] == len(source.split()) + 1  # the source's words, then <eos>, as in training
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[0]))
    # The same weights as generate() reports step by step for its greedy output of the source and <eos>.
    ids = torch.tensor([tokenizer(source, add_special_tokens=False).input_ids + [eos]])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, output_attentions=True,
                         return_dict_in_generate=True)
    steps = torch.cat([step[0][0, 0] for step in out.cross_attentions])[: weights.shape[0]]
    torch.testing.assert_close(weights, steps)
    assert text == tokenizer.decode(out.sequences[0, 1 : 1 + weights.shape[0]],
                                    skip_special_tokens=True).strip()
    _, beam_weights = plot_attention(model, tokenizer, source, tmp_path / "beam.png", max_new_tokens=5,
                                     num_beams=3)
    assert (tmp_path / "beam.png").is_file() and beam_weights.shape[1] == weights.shape[1]


def test_the_traceable_masked_encoder_layer_equals_the_packed_one():
    """torch.export reads padded sources position by position (masked_lstm_layer); eager packs them: same
    result."""
    from hf_nlm.models.story_seq2seq.modeling_story_seq2seq import masked_lstm_layer

    model = tiny("dot", bidirectional_encoder=True)
    layer = model.model.encoder.layers[0]
    src, mask = sources()
    mask[0, :2] = 0  # left padding in one row, right padding in the others
    packed = model.get_encoder()(src, mask)
    out, (h_n, c_n) = masked_lstm_layer(layer, model.model.encoder.embed_tokens(src), mask.bool())
    torch.testing.assert_close(out, packed.last_hidden_state)
    torch.testing.assert_close(torch.cat(list(h_n), -1), packed.final_hidden[:, 0])
    torch.testing.assert_close(torch.cat(list(c_n), -1), packed.final_cell[:, 0])


def test_encoder_outputs_given_as_a_tuple_read_back():
    model = tiny("general", encoder_layers=2)
    src, mask = sources()
    dec = torch.randint(3, V, (3, 4), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        expected = model(src, attention_mask=mask, decoder_input_ids=dec).logits
        for hidden in (False, True):
            as_tuple = model.get_encoder()(src, mask, output_hidden_states=hidden, return_dict=False)
            assert isinstance(as_tuple, tuple) and len(as_tuple) == 3 + hidden
            out = model(attention_mask=mask, decoder_input_ids=dec, encoder_outputs=as_tuple)
            torch.testing.assert_close(out.logits, expected)


@pytest.mark.parametrize("input_feeding", [True, False])
def test_decoder_padding_masked_by_decoder_attention_mask_leaves_the_state_alone(input_feeding):
    """Decoder inputs padded on the left (decoder_attention_mask 0 there) give the unpadded inputs' logits."""
    model = tiny("concat", input_feeding)
    src, mask = sources(B=1)
    dec = torch.tensor([[START, 3, 5, 4]])
    padded = torch.cat([torch.full((1, 2), PAD), dec], dim=1)
    dec_mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    with torch.no_grad():
        plain = model(src, attention_mask=mask, decoder_input_ids=dec).logits
        masked = model(src, attention_mask=mask, decoder_input_ids=padded,
                       decoder_attention_mask=dec_mask).logits
    torch.testing.assert_close(masked[:, 2:], plain)
    assert torch.equal(model.prepare_decoder_input_ids_from_labels(torch.tensor([[3, 4, -100]])),
                       torch.tensor([[START, 3, 4]]))


# ---------------------------------------------------------------------------------------------- the contract
def test_config_output_attentions_works_like_the_argument():
    model = tiny("general", input_feeding=True)
    src, mask = sources()
    dec = torch.randint(3, V, (3, 4), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        by_argument = model(src, attention_mask=mask, decoder_input_ids=dec,
                            output_attentions=True).cross_attentions
        model.config.output_attentions = True
        by_config = model(src, attention_mask=mask, decoder_input_ids=dec).cross_attentions
        overridden = model(src, attention_mask=mask, decoder_input_ids=dec,
                           output_attentions=False).cross_attentions
    assert len(by_config) == 1 and by_config[0].shape == (3, 1, 4, src.shape[1])
    torch.testing.assert_close(by_config[0], by_argument[0])
    assert overridden is None


@pytest.mark.parametrize("head", ["softmax", "split", "tree"])
def test_a_config_from_the_defaults_plus_the_head_is_valid(head):
    # Tying needs a head whose weight is a word matrix: unset, tie_word_embeddings follows the head.
    extra = {"cutoffs": [3]} if head == "split" else {}
    config = StorySeq2SeqConfig(vocab_size=V, head=head, **extra)
    assert config.tie_word_embeddings == (head != "tree")
    with pytest.raises(ValueError, match="tie_word_embeddings=True needs a head"):
        StorySeq2SeqConfig(vocab_size=V, head="tree", tie_word_embeddings=True)
