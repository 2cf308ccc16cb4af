"""transformers' model contract, checked for every registered model type (hf_nlm.models.MODEL_TYPES):
a new model joins these tests by registering, not by copying them.

An encoder-decoder model (``config.is_encoder_decoder``, the story seq2seq) reads a test batch as its source
and, shifted right behind ``decoder_start_token_id``, as its target (:func:`inputs`); where the contract
differs for it (labels already aligned with the decoder positions, AutoModelForSeq2SeqLM) the test says so."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from datasets import Dataset
from transformers import Trainer, TrainingArguments

from hf_nlm.heads import HEAD_REGISTRY, tree_config_fields
from hf_nlm.models import MODEL_TYPES
from hf_nlm.trees import random_tree

V = 23
# The numerals of the tiny vocabulary, for the numeracy LM's numeral-aware heads.
NUMERAL_VOCAB = {"<unk_num>": 2, "1": 5, "12": 9, "3.5": 14, "-0.25": 20}


def tiny_config(model_type: str, head: str | None = None):
    """The config of a small model of the given type: the config's defaults with every size shrunk."""
    t = MODEL_TYPES[model_type]
    fields = {f.name: f.default for f in dataclasses.fields(t.config_class)}
    values = t.tiny_config_values(V)
    if head is not None:
        values["head"] = head
        tie = fields["tie_word_embeddings"]  # None ties where the head can
        values["tie_word_embeddings"] = tie if tie is None else tie and HEAD_REGISTRY[head].tieable
    if head == "split":
        values["cutoffs"] = [5, 12]
    if "numeral_vocab" in fields:
        values["numeral_vocab"] = NUMERAL_VOCAB
    return t.config_class(**values)


def test_tiny_config_values_shrink_the_sizes_by_hand():
    # NPLMConfig's defaults: m = 60, h = 50, n - 1 = 4; the flag direct_connections stays as it is.
    expected = {"vocab_size": V, "embedding_size": 6, "hidden_size": 6, "context_size": 2}
    assert MODEL_TYPES["nplm"].tiny_config_values(V) == expected


def tree_for(config):
    """The word tree a small model with a tree head is built over (None for other heads)."""
    return random_tree(V, seed=0) if config.head == "tree" else None


def tiny(model_type: str, head: str | None = None):
    """A small model of the given type (:func:`tiny_config`)."""
    config = tiny_config(model_type, head)
    torch.manual_seed(0)
    return MODEL_TYPES[model_type].lm_class(config, tree=tree_for(config))


def registry_cases() -> list[tuple[str, str]]:
    """(model type, head) for every registered model type with every registered head its config accepts
    (the numeracy LM's numeral strategies are heads): a new type or head is a case by registering."""
    cases = []
    for name in MODEL_TYPES:
        for head in HEAD_REGISTRY:
            try:
                tiny_config(name, head)
            except ValueError:
                continue  # a head this body does not take
            cases.append((name, head))
    return cases


CASES = [(name, None) for name in MODEL_TYPES] + [
    ("nplm", "split"), ("nplm", "tree"), ("awd_lstm", "tree"),
    ("numeracy_lm", "softmax_digits"), ("numeracy_lm", "hsoftmax"), ("numeracy_lm", "drnn"),
    ("numeracy_lm", "mog"), ("numeracy_lm", "combination"), ("numeracy_lm", "dexp"),
    ("story_seq2seq", "tree"),
]
IDS = [f"{name}-{head or 'default'}" for name, head in CASES]


@pytest.fixture(params=CASES, ids=IDS)
def model(request):
    return tiny(*request.param).eval()


def batch(seed: int = 0, B: int = 3, T: int = 7) -> torch.LongTensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def inputs(model, ids: torch.LongTensor) -> dict[str, torch.LongTensor]:
    """What forward() reads for ``ids``: a causal LM the ids; an encoder-decoder model the ids as its source
    and as its target (shifted right behind the decoder start, as its own labels are)."""
    if not model.config.is_encoder_decoder:
        return {"input_ids": ids}
    from hf_nlm.models.story_seq2seq import shift_tokens_right

    start = model.config.decoder_start_token_id
    return {"input_ids": ids, "decoder_input_ids": shift_tokens_right(ids, model.config.pad_token_id, start)}


def decoder_hidden_states(out):
    return out.decoder_hidden_states if hasattr(out, "decoder_hidden_states") else out.hidden_states


def test_shift_labels_are_taken_and_win_over_labels(model):
    ids = batch()
    if model.config.is_encoder_decoder:
        # labels[:, t] is the target of decoder position t already: no shift, and shift_labels are refused.
        labels = ids.clone()
        labels[0, 3] = -100
        out = model(ids, labels=labels)
        log_p = torch.log_softmax(out.logits, dim=-1).gather(-1, labels.clamp(min=0)[..., None]).squeeze(-1)
        torch.testing.assert_close(out.loss, -log_p[labels != -100].mean())
        with pytest.raises(ValueError, match="not shift_labels"):
            model(ids, shift_labels=labels)
        return
    labels = ids.clone()
    labels[0, 3] = -100
    shifted = torch.cat([labels[:, 1:], labels.new_full((labels.shape[0], 1), -100)], dim=1)
    by_labels = model(ids, labels=labels).loss
    assert torch.allclose(model(ids, shift_labels=shifted).loss, by_labels)
    # Both given: shift_labels wins (transformers' losses), here targets that differ from labels.
    other = torch.randint(0, V, shifted.shape, generator=torch.Generator().manual_seed(5))
    expected = model(ids, shift_labels=other).loss
    assert torch.allclose(model(ids, labels=labels, shift_labels=other).loss, expected)
    assert not torch.allclose(expected, by_labels)


def test_return_dict_false_and_hidden_states(model):
    ids = batch()
    out = model(**inputs(model, ids), labels=ids, output_hidden_states=True)
    as_tuple = model(**inputs(model, ids), labels=ids, return_dict=False)
    assert isinstance(as_tuple, tuple) and torch.equal(as_tuple[0], out.loss)
    hidden = decoder_hidden_states(out)
    assert isinstance(hidden, tuple) and len(hidden) >= 2
    assert all(h.shape[:2] == ids.shape for h in hidden)
    # The last hidden state is what the head reads: scoring it gives the model's logits.
    torch.testing.assert_close(model.lm_head(hidden[-1]), out.logits)
    # off by default (config.output_hidden_states)
    assert decoder_hidden_states(model(**inputs(model, ids))) is None


def test_trainer_trains_and_evaluates(model, tmp_path):
    """transformers' Trainer: train() lowers the loss, evaluate() reports eval_loss equal to the
    model's own mean loss over the evaluation set."""
    rows = [batch(seed, B=1, T=9)[0].tolist() for seed in range(8)]
    data = Dataset.from_dict({"input_ids": rows, "labels": rows})
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4,
                             per_device_eval_batch_size=4, max_steps=6, learning_rate=0.05, report_to=[],
                             use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True,
                             seed=0)
    model.train()
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    metrics = trainer.evaluate()
    assert metrics["eval_loss"] < before
    model.eval()
    ids = torch.tensor(rows)
    with torch.no_grad():
        own = torch.stack([model(ids[i : i + 4], labels=ids[i : i + 4]).loss for i in (0, 4)]).mean()
    assert metrics["eval_loss"] == pytest.approx(own.item(), rel=1e-5)


@pytest.mark.parametrize("name", [n for n in MODEL_TYPES])
def test_built_on_the_meta_device_then_initialised_and_loaded(name):
    """What from_pretrained does: build empty (meta), initialise what no checkpoint holds, load."""
    real = tiny(name).eval()
    config = real.config
    with torch.device("meta"):
        empty = MODEL_TYPES[name].lm_class(config)
    empty = empty.to_empty(device="cpu")
    empty.init_weights()
    ids = batch()
    if config.head == "tree":
        assert ({k: getattr(config, k) for k in tree_config_fields(real.lm_head.tree())}
                == real.lm_head.config_values())
        with pytest.raises(ValueError, match="holds no tree yet"):
            empty.eval()(**inputs(real, ids))
    else:
        assert torch.isfinite(empty.eval()(**inputs(real, ids)).logits).all()
    empty.load_state_dict(real.state_dict())
    torch.testing.assert_close(empty.eval()(**inputs(real, ids)).logits, real(**inputs(real, ids)).logits)


def test_torch_export_gives_the_eager_logits(model):
    """torch.export traces every model (left padding included; AWD-LSTM without its cache)."""
    ids = batch()
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding in one row
    kwargs = {"attention_mask": mask, **({"use_cache": False} if model.config.use_cache else {})}
    kwargs.update({k: v for k, v in inputs(model, ids).items() if k != "input_ids"})
    exported = torch.export.export(model, (ids,), kwargs=kwargs)
    out = exported.module()(ids, **kwargs)
    logits = out["logits"] if isinstance(out, dict) else out.logits
    torch.testing.assert_close(logits, model(ids, **kwargs).logits)


@pytest.mark.parametrize("name", [n for n in MODEL_TYPES])
def test_gradient_checkpointing_where_it_cuts_memory(name):
    """Recurrent models recompute each layer's activations in the backward pass (long BPTT), with the
    same gradients (weight drop redraws the same mask); feed-forward models have one small hidden layer
    and the |V|-wide head, which checkpointing cannot shrink: they say they do not support it."""
    model = tiny(name).train()
    if not model.supports_gradient_checkpointing:
        # The seq2seq model reads sentence pairs, not long BPTT chunks: nothing long to recompute either.
        assert not model.is_stateful or model.config.is_encoder_decoder
        with pytest.raises(ValueError):
            model.activation_checkpointing_enable()
        return
    ids = batch(T=12)

    def grads():
        torch.manual_seed(1)
        model.zero_grad()
        model(**inputs(model, ids), labels=ids).loss.backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    plain = grads()
    model.activation_checkpointing_enable()
    checkpointed = grads()
    assert model.is_activation_checkpointing
    for a, b in zip(plain, checkpointed, strict=True):
        torch.testing.assert_close(a, b)


def test_a_tree_head_with_garbage_buffers_says_so():
    """Uninitialised memory in the tree buffers (to_empty without init) is refused, not indexed."""
    head = tiny("hlbl").lm_head
    with torch.no_grad():
        head.tree_nodes.fill_(10**9)
        head.tree_mask.fill_(True)
    with pytest.raises(ValueError, match="outside"):
        head.log_probs(torch.zeros(2, head.in_features))


def test_generate_scores_equal_forward_log_probs(model):
    """A beam-search continuation's score (length_penalty 0: the summed log-probability) is what forward()
    gives the same tokens: generation and evaluation describe one model."""
    prompt = batch(B=1, T=4)
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=3, num_beams=2,
                         do_sample=False, length_penalty=0.0, eos_token_id=None, pad_token_id=1,
                         return_dict_in_generate=True, output_scores=True)
    seq = out.sequences
    # the prompt is the source; the sequence is the decoder's, from its start token
    if model.config.is_encoder_decoder:
        with torch.no_grad():
            log_p = torch.log_softmax(model(prompt, decoder_input_ids=seq).logits[:, :-1].float(), dim=-1)
        expected = log_p.gather(-1, seq[:, 1:, None]).sum()
        assert out.sequences_scores[0].item() == pytest.approx(expected.item(), abs=1e-4)
        return
    with torch.no_grad():
        log_p = torch.log_softmax(model(seq).logits[:, :-1].float(), dim=-1)
    new = seq[:, prompt.shape[1] :]
    expected = log_p[:, prompt.shape[1] - 1 :].gather(-1, new[..., None]).sum()
    assert out.sequences_scores[0].item() == pytest.approx(expected.item(), abs=1e-4)


def test_save_and_load_through_the_auto_classes(model, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    model.save_pretrained(tmp_path)
    assert type(AutoConfig.from_pretrained(tmp_path)) is type(model.config)
    auto = AutoModelForSeq2SeqLM if model.config.is_encoder_decoder else AutoModelForCausalLM
    loaded = auto.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model)
    ids = batch()
    torch.testing.assert_close(loaded(**inputs(model, ids)).logits, model(**inputs(model, ids)).logits)


def test_generate_checks_the_prompt_once_and_forward_checks_again_afterwards(model):
    """generate() refuses a prompt id outside the vocabulary with the message forward() gives (its steps then
    skip the check: they read only tokens chosen from the model's own scores), and after it forward() checks
    every call again."""
    bad = batch(B=1, T=4)
    bad[0, 1] = V
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        model.generate(bad, attention_mask=torch.ones_like(bad), max_new_tokens=2, do_sample=False)
    prompt = batch(B=1, T=4)
    model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=2, do_sample=False)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        model(**inputs(model, bad))


@pytest.mark.parametrize(
    ("mode", "how"),
    [
        ("assisted_generation", dict(assistant_model="same type")),
        ("assisted_generation", dict(prompt_lookup_num_tokens=2)),
        ("assisted_generation", dict(do_sample=True, prompt_lookup_num_tokens=2)),
        ("contrastive_search", dict(penalty_alpha=0.6, top_k=4)),
    ],
)
@pytest.mark.parametrize("name", [n for n in MODEL_TYPES])
def test_decoding_that_rolls_a_cache_back_is_refused_naming_the_mode(name, mode, how):
    """Assisted decoding and contrastive search score a draft, then cut the cache back to the accepted tokens:
    a recurrent state cannot be cut back and a window model keeps no cache, so each model refuses them with
    one message naming the mode and the reason, not with whatever transformers' generate() would raise."""
    model = tiny(name).eval()
    how = {k: tiny(name).eval() if v == "same type" else v for k, v in how.items()}
    prompt = batch(B=1, T=3)
    kept = "recurrent state" if model.is_stateful else "keeps no cache"
    with pytest.raises(ValueError, match=f"{mode} .*{type(model).__name__} .*{kept}"):
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=3, **how)


@pytest.mark.parametrize("name", [n for n in MODEL_TYPES])
def test_the_mode_is_read_from_the_saved_generation_config_and_the_call(name):
    model = tiny(name).eval()
    prompt = batch(B=1, T=3)
    model.generation_config.prompt_lookup_num_tokens = 2
    with pytest.raises(ValueError, match="assisted_generation"):
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=3, do_sample=False)
    # The caller switching the saved mode off generates, as transformers reads a call over the saved config.
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=3, do_sample=False,
                         prompt_lookup_num_tokens=None, eos_token_id=None, pad_token_id=1)
    assert out.shape[-1] > (1 if model.config.is_encoder_decoder else 3)
