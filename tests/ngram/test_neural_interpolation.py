"""NPLM + n-gram mixtures (Bengio et al. 2003, the "mix" rows): normalised, equal to the weighted sum."""

import math

import numpy as np
import pytest
import torch
from transformers import LogitsProcessorList

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.data import tokenize_corpus
from hf_nlm.evaluation import evaluate_lm, token_log_probs
from hf_nlm.ngram import KneserNeyLM, NgramMixtureLogitsProcessor, evaluate_mixture, fit_mixture_weight
from hf_nlm.tokenization import train_word_level_tokenizer


@pytest.fixture
def setup(toy_texts):
    tok = train_word_level_tokenizer(toy_texts)
    torch.manual_seed(0)
    model = NPLMForCausalLM(
        NPLMConfig(vocab_size=len(tok), context_size=2, embedding_size=4, hidden_size=3,
                   initializer_range=0.5, eos_token_id=None)
    ).eval()
    kn = KneserNeyLM.from_texts(toy_texts, tok, order=3)
    return tok, model, kn


def test_token_log_probs_sum_to_the_evaluate_lm_total(setup, toy_texts):
    tok, model, _ = setup
    ids, logp, num_words = token_log_probs(model, toy_texts, tok, block_size=5, batch_size=2)
    assert torch.equal(ids, tokenize_corpus(toy_texts, tok)[0])
    assert -logp.sum().item() == pytest.approx(evaluate_lm(model, toy_texts, tok)["total_nll"], rel=1e-5)


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.5, 1.0])
def test_mixture_perplexity_is_the_weighted_sum_of_probabilities(setup, toy_texts, weight):
    tok, model, kn = setup
    ids = tokenize_corpus(toy_texts, tok)[0].tolist()
    stream = [tok.bos_token_id] * 2 + ids
    total = 0.0
    with torch.no_grad():  # token by token, from each model's full distribution
        for t in range(2, len(stream)):
            context = stream[t - 2 : t]
            p_nn = torch.softmax(model(torch.tensor([context])).logits[0, -1], -1)[stream[t]].item()
            p_ng = math.exp(kn.log_probs(np.array([context]))[0, stream[t]])
            total -= math.log(weight * p_nn + (1 - weight) * p_ng)
    r = evaluate_mixture(model, kn, toy_texts, tok, weight=weight, block_size=3)
    assert r["total_nll"] == pytest.approx(total, rel=1e-5)
    assert r["num_tokens"] == len(ids) and r["mixture_weight"] == weight


def test_fitted_weight_maximises_the_likelihood():
    rng = np.random.default_rng(0)
    a = np.log(rng.uniform(0.01, 1, 500))
    b = np.log(rng.uniform(0.01, 1, 500))
    w = fit_mixture_weight(a, b)
    grid = np.linspace(0.001, 0.999, 999)
    best = grid[np.argmax([np.logaddexp(a + np.log(g), b + np.log1p(-g)).sum() for g in grid])]
    assert w == pytest.approx(best, abs=2e-3)


def test_evaluate_mixture_fit_uses_validation(setup, toy_texts):
    tok, model, kn = setup
    r = evaluate_mixture(model, kn, toy_texts[2:], tok, weight="fit", validation=toy_texts[:2])
    assert 0.0 <= r["mixture_weight"] <= 1.0
    with pytest.raises(ValueError, match="validation"):
        evaluate_mixture(model, kn, toy_texts, tok, weight="fit")


def test_logits_processor_gives_a_normalised_weighted_sum(setup):
    tok, model, kn = setup
    proc = NgramMixtureLogitsProcessor(kn, 0.25)
    input_ids = torch.tensor([[3, 4, 5], [1, 1, 2]])
    scores = torch.randn(2, len(tok))
    out = proc(input_ids, scores)
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(2))
    p_ng = np.exp(kn.log_probs(np.array([[4, 5], [1, 2]])))
    expected = 0.25 * torch.softmax(scores, -1) + 0.75 * torch.from_numpy(p_ng).float()
    torch.testing.assert_close(out.exp(), expected)
    # A short prompt is read from sentence start; a banned token stays banned.
    short = proc(torch.tensor([[5]]), scores[:1].clone().index_fill_(1, torch.tensor([3]), -math.inf))
    assert short[0, 3] == -math.inf
    p_ng_short = np.exp(kn.log_probs(np.array([[1, 5]])))[0]
    assert short[0, 4].exp().item() == pytest.approx(
        0.25 * torch.softmax(scores[0].index_fill(0, torch.tensor([3]), -math.inf), -1)[4].item()
        + 0.75 * p_ng_short[4], rel=1e-5
    )


def test_generate_with_the_mixture(setup):
    tok, model, kn = setup
    prompt = torch.tensor([tok("the cat")["input_ids"]])
    plain = model.generate(prompt, max_new_tokens=4, do_sample=False)
    only_nn = model.generate(prompt, max_new_tokens=4, do_sample=False,
                             logits_processor=LogitsProcessorList([NgramMixtureLogitsProcessor(kn, 1.0)]))
    assert torch.equal(plain, only_nn)
    only_ngram = model.generate(prompt, max_new_tokens=3, do_sample=False,
                                logits_processor=LogitsProcessorList([NgramMixtureLogitsProcessor(kn, 0.0)]))
    seq = prompt[0].tolist()
    for _ in range(3):
        seq.append(int(np.argmax(kn.log_probs(np.array([seq[-2:]]))[0])))
    assert only_ngram[0].tolist() == seq
    beams = model.generate(prompt, max_new_tokens=4, num_beams=3, do_sample=False,
                           logits_processor=LogitsProcessorList([NgramMixtureLogitsProcessor(kn, 0.5)]))
    assert beams.shape == (1, prompt.shape[1] + 4)


def test_bad_weight():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        NgramMixtureLogitsProcessor(KneserNeyLM.from_ids(np.array([1, 2, 3]), 2, 4), 1.5)
