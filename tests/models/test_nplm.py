"""NPLM (Bengio et al. 2003) against an independent re-computation of its equations."""

import itertools
import json
import math

import pytest
import torch
from plain_search import plain_search
from transformers import AutoConfig, AutoModelForCausalLM, pipeline

import hf_nlm
from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.tokenization import train_word_level_tokenizer


def tiny(**kw) -> NPLMForCausalLM:
    torch.manual_seed(0)
    cfg = dict(vocab_size=7, context_size=3, embedding_size=4, hidden_size=5, initializer_range=0.5,
               eos_token_id=None)
    cfg.update(kw)
    return plain_search(NPLMForCausalLM(NPLMConfig(**cfg)).eval())


def bengio_logits(model: NPLMForCausalLM, context: list[int]) -> torch.Tensor:
    """y = b + W x + U tanh(d + H x) for one context given oldest-first, written from the paper."""
    cfg = model.config
    C = model.model.C.weight
    # x = (C(w_{t-1}), ..., C(w_{t-n+1})): most recent word first.
    x = torch.cat([C[w] for w in reversed(context)])
    b = model.lm_head.bias
    out_w = model.lm_head.weight
    y = b.clone()
    h = cfg.hidden_size
    if h:
        H, d = model.model.H.weight, model.model.H.bias
        U = out_w[:, :h]
        y = y + U @ torch.tanh(d + H @ x)
    if cfg.direct_connections:
        W = out_w[:, h:]
        y = y + W @ x
    return y


@pytest.mark.parametrize("kw", [{}, {"hidden_size": 0}, {"direct_connections": False}, {"context_size": 1}])
def test_forward_equals_paper_formula(kw):
    model = tiny(**kw)
    bos = model.config.bos_token_id
    n_1 = model.config.context_size
    ids = torch.tensor([[3, 0, 6, 2, 5, 4, 1], [2, 2, 4, 6, 0, 3, 5]])
    with torch.no_grad():
        logits = model(ids).logits
        for b in range(ids.shape[0]):
            padded = [bos] * (n_1 - 1) + ids[b].tolist()
            for t in range(ids.shape[1]):
                context = padded[t : t + n_1]  # w_{t-n+2} .. w_t, oldest first
                torch.testing.assert_close(logits[b, t], bengio_logits(model, context), rtol=1e-5, atol=1e-5)


def test_dropout_acts_on_z_in_training_only():
    """Evaluation ignores dropout (the paper's formula holds); training zeroes entries of z = [tanh(d + H x);
    x] with probability p and scales the rest by 1 / (1 - p), seen through the output layer's gradient."""
    model = tiny(dropout=0.5)
    ids = torch.tensor([[3, 0, 6, 2, 5, 4, 1]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits[0, 2], bengio_logits(model, [3, 0, 6]),
                                   rtol=1e-5, atol=1e-5)
    model.train()
    z = model.model(ids).last_hidden_state
    model.eval()
    z_eval = model.model(ids).last_hidden_state
    dropped = z == 0
    assert 0 < dropped.float().mean() < 1
    torch.testing.assert_close(z[~dropped], 2 * z_eval[~dropped])


def test_parameter_count_matches_paper():
    V, n, m, h = 11, 5, 6, 3
    model = NPLMForCausalLM(NPLMConfig(vocab_size=V, context_size=n - 1, embedding_size=m, hidden_size=h))
    assert model.num_parameters() == V * (1 + n * m + h) + h * (1 + (n - 1) * m)


def test_loss_is_mean_nll_of_shifted_labels():
    model = tiny()
    ids = torch.tensor([[3, 0, 6, 2, 5, 4, 1], [2, 2, 4, 6, 0, 3, 5]])
    labels = ids.clone()
    labels[0, :3] = -100
    labels[1, 5] = -100
    with torch.no_grad():
        out = model(ids, labels=labels)
        logp = torch.log_softmax(out.logits, -1)
    nlls = [
        -logp[b, t - 1, labels[b, t]].item()
        for b in range(2)
        for t in range(1, ids.shape[1])
        if labels[b, t] != -100
    ]
    assert out.loss.item() == pytest.approx(sum(nlls) / len(nlls), rel=1e-6)
    # Training mode computes the same loss through the head, without |V|-wide logits.
    model.train()
    train_out = model(ids, labels=labels)
    assert train_out.logits is None
    assert train_out.loss.item() == pytest.approx(out.loss.item(), rel=1e-6)


def test_gradients_flow_to_every_parameter():
    model = tiny().train()
    ids = torch.randint(0, 7, (3, 9))
    model(ids, labels=ids).loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def sequence_logprob(model, prompt: list[int], continuation: list[int]) -> float:
    ids = torch.tensor([prompt + continuation])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0], -1)
    return sum(logp[len(prompt) - 1 + i, tok].item() for i, tok in enumerate(continuation))


def test_beam_search_with_enough_beams_equals_exhaustive_search():
    model = tiny(vocab_size=4, bos_token_id=0, eos_token_id=None, pad_token_id=0)
    prompt, steps = [1, 3], 3
    best = max(itertools.product(range(4), repeat=steps),
               key=lambda c: sequence_logprob(model, prompt, list(c)))
    out = model.generate(
        torch.tensor([prompt]), num_beams=4 ** (steps - 1), max_new_tokens=steps, do_sample=False,
        length_penalty=0.0, early_stopping=True,
    )
    assert out[0, len(prompt):].tolist() == list(best)


def test_greedy_picks_argmax_of_last_n_minus_1_tokens():
    model = tiny()
    prompt = [4, 2, 6, 1, 3]
    out = model.generate(torch.tensor([prompt]), max_new_tokens=4, do_sample=False)[0].tolist()
    seq = list(prompt)
    for _ in range(4):
        seq.append(int(bengio_logits(model, seq[-3:]).argmax()))
    assert out == seq
    # Only the last n - 1 tokens matter: a different distant past gives the same continuation.
    other = model.generate(torch.tensor([[0, 0] + prompt[2:]]), max_new_tokens=4, do_sample=False)[0].tolist()
    assert other[len(prompt):] == out[len(prompt):]


def test_short_prompt_and_left_padding_read_as_sentence_start():
    model = tiny(bos_token_id=1, pad_token_id=0)
    bos = model.config.bos_token_id
    short = model.generate(torch.tensor([[5]]), max_new_tokens=3, do_sample=False)
    filled = model.generate(torch.tensor([[bos, bos, 5]]), max_new_tokens=3, do_sample=False)
    assert short[0, 1:].tolist() == filled[0, 3:].tolist()
    # A left-padded batch generates what each prompt generates alone.
    batch = torch.tensor([[0, 0, 5], [4, 2, 6]])
    mask = torch.tensor([[0, 0, 1], [1, 1, 1]])
    together = model.generate(batch, attention_mask=mask, max_new_tokens=3, do_sample=False)
    alone = model.generate(torch.tensor([[4, 2, 6]]), max_new_tokens=3, do_sample=False)
    assert together[0, 3:].tolist() == short[0, 1:].tolist()
    assert together[1, 3:].tolist() == alone[0, 3:].tolist()


def test_sampling_is_reproducible_with_a_seed():
    model = tiny()
    prompt = torch.tensor([[4, 2, 6]])
    torch.manual_seed(3)
    a = model.generate(prompt, max_new_tokens=8, do_sample=True, num_return_sequences=2)
    torch.manual_seed(3)
    b = model.generate(prompt, max_new_tokens=8, do_sample=True, num_return_sequences=2)
    assert a.shape == (2, 11) and torch.equal(a, b)


def test_save_and_load_give_identical_logits(tmp_path):
    model = tiny()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "nplm"
    assert isinstance(AutoConfig.from_pretrained(tmp_path), NPLMConfig)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(loaded, NPLMForCausalLM)
    ids = torch.randint(0, 7, (2, 6))
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_loading_another_model_type_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match=r"config.json.*model_type='gpt2'.*'nplm'"):
        NPLMForCausalLM.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"context_size": 0}, "context_size"),
        ({"hidden_size": 0, "direct_connections": False}, "hidden_size=0"),
        ({"embedding_size": 0}, "embedding_size"),
        ({"hidden_size": -1}, "hidden_size"),
        ({"tie_word_embeddings": True}, "tie_word_embeddings"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
    ],
)
def test_bad_config_is_rejected(kw, field):
    with pytest.raises(ValueError, match=field):
        NPLMConfig(**kw)


def test_missing_bos_with_short_input_is_a_clear_error():
    model = tiny(bos_token_id=None)
    with pytest.raises(ValueError, match="bos_token_id"):
        model(torch.tensor([[1]]))


def test_pipeline_text_generation(tmp_path, toy_texts):
    tok = train_word_level_tokenizer(toy_texts)
    torch.manual_seed(0)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tok), context_size=2, embedding_size=4, hidden_size=4))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    gen = pipeline("text-generation", model=str(tmp_path), tokenizer=str(tmp_path))
    out = gen("the cat", max_new_tokens=4, min_new_tokens=4, num_beams=2, do_sample=False,
              skip_special_tokens=False)[0]["generated_text"]
    assert out.startswith("the cat ")
    assert len(out.split()) == 6 and all(w in tok.get_vocab() for w in out.split())


def test_import_registers_with_auto_classes():
    assert hf_nlm.NPLMConfig.model_type == "nplm"
    cfg = AutoConfig.for_model("nplm", vocab_size=9)
    model = AutoModelForCausalLM.from_config(cfg)
    assert isinstance(model, NPLMForCausalLM)
    assert math.isclose(cfg.vocab_size, 9)
