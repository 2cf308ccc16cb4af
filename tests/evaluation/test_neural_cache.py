"""The neural cache pointer (Grave, Joulin & Usunier 2017, eq. 2 + linear interpolation) on AWD-LSTM."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from hf_nlm.data.lm import tokenize_corpus
from hf_nlm.evaluation import perplexity_report
from hf_nlm.evaluation.neural_cache import (
    NeuralCache,
    evaluate_with_neural_cache,
    head_log_probs,
    head_target_log_probs,
    neural_cache_log_probs,
)
from hf_nlm.models.awd_lstm import AWDLSTMConfig, AWDLSTMForCausalLM
from hf_nlm.models.nplm import NPLMConfig, NPLMForCausalLM
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm_cli import main


def corpus(num_lines: int = 9, seed: int = 0) -> list[str]:
    """Short lines over 12 words, some repeated, so that the cache window holds the targets now and then."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(12)]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 6))) for _ in range(num_lines)]
    return lines + lines[:3]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return corpus()


@pytest.fixture(scope="module")
def tokenizer(texts):
    return train_word_level_tokenizer(texts)


def tiny_model(vocab_size: int, **kwargs) -> AWDLSTMForCausalLM:
    torch.manual_seed(0)
    fields = dict(vocab_size=vocab_size, embedding_size=8, hidden_size=12, num_hidden_layers=2)
    fields.update(kwargs)
    return AWDLSTMForCausalLM(AWDLSTMConfig(**fields)).eval()


@pytest.fixture(scope="module")
def model(tokenizer) -> AWDLSTMForCausalLM:
    return tiny_model(len(tokenizer))


def stream(texts, tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of the whole split: the boundary token then the stream, shifted by one."""
    ids, _ = tokenize_corpus(texts, tokenizer)
    inputs = torch.cat([ids.new_tensor([tokenizer.eos_token_id]), ids[:-1]])
    return inputs, ids


def whole_stream_hidden(model, inputs: torch.Tensor) -> torch.Tensor:
    """h_t of every position from one forward over the whole stream (batch 1, no chunking)."""
    with torch.no_grad():
        return model.model(inputs[None], use_cache=False).last_hidden_state[0]


def brute_force_log_probs(
    vocab_log_probs: torch.Tensor, hidden: torch.Tensor, targets: torch.Tensor, window: int, theta: float,
    lam: float
) -> list[float]:
    """Eq. 2 and the interpolation written token by token, in float64 Python arithmetic."""
    h = hidden.double().tolist()
    lp = vocab_log_probs.double()
    words = targets.tolist()
    out = []
    for t, w in enumerate(words):
        p_vocab = math.exp(float(lp[t, w]))
        history = range(max(0, t - window), t)
        if not history:
            out.append(math.log(p_vocab))
            continue
        weights = {i: math.exp(theta * sum(a * b for a, b in zip(h[t], h[i], strict=True))) for i in history}
        p_cache = sum(weight for i, weight in weights.items() if words[i] == w) / sum(weights.values())
        out.append(math.log((1 - lam) * p_vocab + lam * p_cache))
    return out


# --- (a) lambda = 0 is the plain carried-state perplexity ---------------------------------------------


@pytest.mark.parametrize("bptt", [1, 5, 1000])
def test_lambda_zero_is_the_carried_state_perplexity(model, texts, tokenizer, bptt):
    inputs, targets = stream(texts, tokenizer)
    whole = torch.cat([inputs[:1], targets])[None]  # <eos> w_1 ... w_N: N targets after the shift
    with torch.no_grad():  # the independent reference: one forward over the whole stream, the model's own NLL
        nll = model(whole, labels=whole, use_cache=False).nll
    result = evaluate_with_neural_cache(model, texts, tokenizer, window=10, theta=5.0, lambda_=0.0, bptt=bptt)
    n = targets.numel()
    assert result["num_tokens"] == n and result["num_words"] == sum(len(t.split()) + 1 for t in texts)
    assert result["total_nll"] == pytest.approx(float(nll) * n, rel=1e-6)
    assert result["perplexity"] == pytest.approx(math.exp(float(nll)), rel=1e-6)
    assert result["cache_lambda"] == 0.0 and result["cache_window"] == 10 and result["bptt"] == bptt
    with_cache = evaluate_with_neural_cache(model, texts, tokenizer, window=10, theta=5.0, lambda_=0.3,
                                            bptt=bptt)
    assert with_cache["total_nll"] != pytest.approx(result["total_nll"], rel=1e-4)
    # evaluate_lm's result format, plus the settings.
    settings = {"cache_window", "cache_theta", "cache_lambda", "bptt"}
    assert set(result) == set(perplexity_report(1.0, 1, 1, 0)) | settings


def test_counts_match_evaluate_lm(model, texts, tokenizer):
    from hf_nlm.evaluation import evaluate_lm

    plain = evaluate_lm(model, texts + ["w0 unseen_word w1"], tokenizer, block_size=8)
    cached = evaluate_with_neural_cache(model, texts + ["w0 unseen_word w1"], tokenizer)
    for key in ("num_tokens", "num_words", "num_unk"):
        assert cached[key] == plain[key], key
    assert cached["num_unk"] == 1


# --- (b) the vectorised cache equals a per-token reference ----------------------------------------------


@pytest.mark.parametrize(
    "window,theta,lam,bptt",
    [
        (1, 40.0, 0.5, 7),  # the previous position only
        (3, 40.0, 0.3, 7),  # 7 does not divide the stream
        (10, 3.0, 0.7, 5),
        (10, 0.0, 0.2, 1),  # theta = 0: the word frequencies of the window
        (25, 40.0, 0.25, 11),
        (10_000, 40.0, 0.4, 13),  # a window longer than the stream
        (6, 40.0, 0.5, 10_000),  # one chunk
    ],
)
def test_vectorised_equals_brute_force(model, texts, tokenizer, window, theta, lam, bptt):
    inputs, targets = stream(texts, tokenizer)
    n = targets.numel()
    assert n > 25 and (bptt in (1, 10_000) or n % bptt), "each chunk size must leave a short last chunk"
    hidden = whole_stream_hidden(model, inputs)
    with torch.no_grad():
        vocab = head_log_probs(model, hidden)
    expected = torch.tensor(brute_force_log_probs(vocab, hidden, targets, window, theta, lam),
                            dtype=torch.float64)
    start = tokenizer.eos_token_id
    got = neural_cache_log_probs(model, targets, start, window=window, theta=theta, lambda_=lam, bptt=bptt)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()
    # The cache changes the result (the test is not vacuous).
    assert not torch.allclose(got, vocab.gather(1, targets[:, None])[:, 0].double(), atol=1e-4)


def test_cache_memory_keeps_the_last_window_pairs():
    cache = NeuralCache(window=4, theta=1.0, lambda_=0.5)
    h = torch.randn(10, 3)
    words = torch.arange(10)
    cache.log_probs(h[:6], words[:6], torch.zeros(6))
    assert len(cache) == 4 and torch.equal(cache.words, words[2:6])
    cache.log_probs(h[6:], words[6:], torch.zeros(4))
    assert len(cache) == 4 and torch.equal(cache.keys, h[6:])


# --- (c) the mixed distribution is a distribution -------------------------------------------------------


def test_mixed_distribution_sums_to_one(model, texts, tokenizer):
    inputs, targets = stream(texts, tokenizer)
    hidden = whole_stream_hidden(model, inputs)
    with torch.no_grad():
        vocab = head_log_probs(model, hidden)
        target_vocab = head_target_log_probs(model, hidden, targets)
    assert torch.allclose(target_vocab, vocab.gather(1, targets[:, None])[:, 0], atol=1e-6)
    full_cache, target_cache = NeuralCache(8, 30.0, 0.4), NeuralCache(8, 30.0, 0.4)
    for lo, hi in [(0, 6), (6, 15), (15, 16)]:  # chunks, so that memory and in-chunk keys both count
        full = full_cache.full_log_probs(hidden[lo:hi], targets[lo:hi], vocab[lo:hi])
        assert full.shape == (hi - lo, len(tokenizer))
        assert torch.allclose(full.exp().sum(-1), torch.ones(hi - lo), atol=1e-5)
        at_targets = target_cache.log_probs(hidden[lo:hi], targets[lo:hi], target_vocab[lo:hi])
        assert torch.allclose(full.gather(1, targets[lo:hi, None])[:, 0], at_targets, atol=1e-5)
        if lo == 0:  # no history at the stream's first position: p is p_vocab
            assert torch.equal(full[0], vocab[0])
        else:  # the cache moved mass onto the words of the window
            assert not torch.allclose(full, vocab[lo:hi], atol=1e-4)


def test_split_head_model(texts, tokenizer):
    model = tiny_model(len(tokenizer), head="split", cutoffs=[5, 10])
    inputs, targets = stream(texts, tokenizer)
    hidden = whole_stream_hidden(model, inputs)
    with torch.no_grad():
        vocab = head_log_probs(model, hidden)
    assert torch.allclose(vocab.exp().sum(-1), torch.ones(len(targets)), atol=1e-5)
    expected = torch.tensor(brute_force_log_probs(vocab, hidden, targets, 5, 30.0, 0.3), dtype=torch.float64)
    got = neural_cache_log_probs(model, targets, tokenizer.eos_token_id, window=5, theta=30.0, lambda_=0.3,
                                 bptt=6)
    assert torch.allclose(got, expected, atol=1e-5, rtol=0)


# --- (d) bad arguments ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(lambda_=-0.1), "lambda"),
        (dict(lambda_=1.5), "lambda"),
        (dict(lambda_=float("nan")), "lambda"),
        (dict(window=0), "window"),
        (dict(window=-3), "window"),
        (dict(window=2.5), "window"),
        (dict(theta=-1.0), "theta"),
        (dict(theta=float("inf")), "theta"),
        (dict(bptt=0), "bptt"),
    ],
)
def test_bad_arguments(model, texts, tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        evaluate_with_neural_cache(model, texts, tokenizer, **kwargs)


def test_feed_forward_model_is_refused(texts, tokenizer):
    nplm = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=4,
                                      hidden_size=4))
    with pytest.raises(ValueError, match="needs a recurrent model.*NPLMForCausalLM has no recurrent state"):
        evaluate_with_neural_cache(nplm, texts, tokenizer)
    with pytest.raises(ValueError, match="recurrent"):
        neural_cache_log_probs(nplm, torch.tensor([2, 3]), 1)


def test_lambda_one_with_a_missing_word_is_infinite(model, texts, tokenizer):
    with pytest.raises(FloatingPointError, match="lambda = 1"):
        evaluate_with_neural_cache(model, texts, tokenizer, window=2, lambda_=1.0)


# --- the `hf-nlm evaluate --neural-cache` command --------------------------------------------------------


def test_cli_neural_cache(tmp_path, model, texts, tokenizer, capsys):
    model.save_pretrained(tmp_path / "awd")
    tokenizer.save_pretrained(tmp_path / "awd")
    test_file = tmp_path / "test.txt"
    test_file.write_text("\n".join(texts) + "\n")
    argv = ["evaluate", str(tmp_path / "awd"), "--test-file", str(test_file), "--neural-cache",
            "--cache-window", "7", "--cache-theta", "20", "--cache-lambda", "0.3", "--block-size", "5"]
    capsys.readouterr()
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    direct = evaluate_with_neural_cache(model, texts, tokenizer, window=7, theta=20.0, lambda_=0.3, bptt=5)
    assert result["split"] == "test" and result["cache_window"] == 7 and result["bptt"] == 5
    assert result["perplexity"] == pytest.approx(direct["perplexity"], rel=1e-6)

    def usage_error(args: list[str], message: str) -> None:
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err

    plain = ["evaluate", str(tmp_path / "awd"), "--test-file", str(test_file)]
    usage_error([*plain, "--cache-window", "7"], "--cache-window needs --neural-cache")
    usage_error([*plain, "--neural-cache", "--cache-lambda", "2"], "lambda")
    usage_error([*plain, "--neural-cache", "--cache-window", "0"], "window")
    nplm = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=4,
                                      hidden_size=4))
    nplm.save_pretrained(tmp_path / "nplm")
    tokenizer.save_pretrained(tmp_path / "nplm")
    usage_error(["evaluate", str(tmp_path / "nplm"), "--test-file", str(test_file), "--neural-cache"],
                "needs a recurrent model")
