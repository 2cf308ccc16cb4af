"""The numeracy LM (Spithourakis & Riedel 2018): its numeral-aware heads against hand computations,
its config checks, and generation. The model contract (Trainer, save/load, export, ...) is checked
for it in test_model_contract.py like for every registered model."""

from __future__ import annotations

import pytest
import torch

from hf_nlm.heads import DigitSoftmaxHead, NumeralHierarchicalSoftmaxHead
from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM
from hf_nlm.tokenization.numerals import encode_digits

V, D = 17, 8
NUMERALS = {"<unk_num>": 2, "7": 4, "1,200": 6, "-3.25": 11, "2019": 15}
WORD_IDS = [i for i in range(V) if i not in NUMERALS.values()]


def model(strategy: str, **kwargs) -> NumeracyLMForCausalLM:
    torch.manual_seed(0)
    config = NumeracyLMConfig(
        vocab_size=V, embedding_size=D, hidden_size=D, numeral_strategy=strategy, numeral_vocab=NUMERALS, **kwargs
    )
    return NumeracyLMForCausalLM(config).eval()


def test_numeral_strategy_is_the_head_under_the_papers_name():
    config = NumeracyLMConfig(vocab_size=V, numeral_strategy="hsoftmax", numeral_vocab=NUMERALS)
    assert config.head == "hsoftmax" and config.numeral_strategy == "hsoftmax"
    assert (config.num_hidden_layers, config.hidden_size, config.dropout) == (1, 50, 0.1)  # the paper's model


def test_hsoftmax_is_class_probability_times_branch_softmax():
    m = model("hsoftmax")
    head = m.lm_head
    assert isinstance(head, NumeralHierarchicalSoftmaxHead)
    h = torch.randn(5, D)
    log_probs = head.log_probs(h)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(5))
    # Brute force, token by token: p(class | h) * softmax over the class's rows.
    with torch.no_grad():
        p_class = torch.softmax(h @ head.class_weight.T + head.class_bias, -1)
        p_word = torch.softmax(h @ head.word_weight.T + head.word_bias, -1)
        p_num = torch.softmax(h @ head.numeral_weight.T + head.numeral_bias, -1)
    numeral_ids = sorted(NUMERALS.values())
    for token in range(V):
        if token in numeral_ids:
            expected = p_class[:, 1] * p_num[:, numeral_ids.index(token)]
        else:
            expected = p_class[:, 0] * p_word[:, WORD_IDS.index(token)]
        torch.testing.assert_close(log_probs[:, token].exp(), expected)
    # The numeral class's mass is exactly p(numeral | h).
    torch.testing.assert_close(log_probs[:, numeral_ids].exp().sum(-1), p_class[:, 1])


def test_hsoftmax_nll_is_the_picked_log_prob_and_ignores_minus_100():
    head = model("hsoftmax").lm_head
    h = torch.randn(6, D)
    targets = torch.tensor([0, 2, 6, 15, -100, 9])
    nll = head.nll(h, targets)
    log_probs = head.log_probs(h)
    for i, t in enumerate(targets.tolist()):
        assert nll[i].item() == pytest.approx(0.0 if t == -100 else -log_probs[i, t].item(), abs=1e-6)


def test_digit_output_embedding_is_token_plus_char_rnn_of_its_digits():
    head = model("softmax_digits").lm_head
    assert isinstance(head, DigitSoftmaxHead)
    rnn, emb = head.digit_rnn, head.digit_embedding

    def char_rnn(canonical: str) -> torch.Tensor:
        """The encoding computed on its own: one LSTM cell step per symbol, then the end marker."""
        h = c = torch.zeros(1, D)
        for symbol in encode_digits(canonical)[: len(canonical) + 1]:
            h, c = rnn(emb.weight[symbol][None], (h, c))
        return h[0]

    with torch.no_grad():
        e_out = head.output_embeddings()
        expected = head.weight.clone()
        for token, canonical in [("7", "7"), ("1,200", "1200"), ("-3.25", "-3.25"), ("2019", "2019")]:
            expected[NUMERALS[token]] += char_rnn(canonical)
    torch.testing.assert_close(e_out, expected)
    # Words and <unk_num> (no digits) keep their plain rows; the scores use e_out.
    assert torch.equal(e_out[WORD_IDS], head.weight[WORD_IDS].detach())
    assert torch.equal(e_out[NUMERALS["<unk_num>"]], head.weight[NUMERALS["<unk_num>"]].detach())
    h = torch.randn(3, D)
    torch.testing.assert_close(head(h), h @ e_out.T + head.bias)


def test_digit_rnn_is_trained_through_the_normaliser_even_by_word_targets():
    head = model("softmax_digits").lm_head.train()
    h = torch.randn(4, D)
    # Word targets only: the softmax still normalises over the numerals' rows, which hold the digit encodings.
    head.nll(h, torch.tensor([0, 1, 3, 5])).sum().backward()
    assert head.digit_rnn.weight_ih.grad is not None and head.digit_rnn.weight_ih.grad.abs().sum() > 0


@pytest.mark.parametrize("strategy", ["softmax_digits", "hsoftmax"])
def test_numeral_heads_need_the_numeral_vocabulary(strategy):
    with pytest.raises(ValueError, match="numeral_vocab"):
        NumeracyLMConfig(vocab_size=V, numeral_strategy=strategy)


def test_bad_numeral_vocab_and_strategy_are_refused():
    with pytest.raises(ValueError, match=r"numeral_vocab: id 40 .* outside \[0, 17\)"):
        NumeracyLMConfig(vocab_size=V, numeral_vocab={"<unk_num>": 2, "5": 40})
    with pytest.raises(ValueError, match="one id to two numerals"):
        NumeracyLMConfig(vocab_size=V, numeral_vocab={"<unk_num>": 2, "5": 2})
    with pytest.raises(ValueError, match="head must be one of"):
        NumeracyLMConfig(vocab_size=V, numeral_strategy="mixture_of_everything")
    with pytest.raises(ValueError, match="needs words besides the numerals"):
        NumeracyLMConfig(vocab_size=3, numeral_strategy="hsoftmax", numeral_vocab={"<unk_num>": 0, "1": 1, "2": 2})


@pytest.mark.parametrize("strategy", ["softmax", "softmax_digits", "hsoftmax"])
def test_cached_generation_equals_uncached(strategy):
    m = model(strategy)
    prompt = torch.tensor([[3, 4, 7, 6]])
    for kwargs in ({"num_beams": 1}, {"num_beams": 3, "length_penalty": 1.0}):
        cached = m.generate(prompt, max_new_tokens=6, do_sample=False, use_cache=True, **kwargs)
        uncached = m.generate(prompt, max_new_tokens=6, do_sample=False, use_cache=False, **kwargs)
        assert torch.equal(cached, uncached)


def test_numeral_side_fields_pass_through_forward():
    m = model("hsoftmax")
    ids = torch.randint(0, V, (2, 5))
    fields = {
        "numeral_value": torch.zeros(2, 5, dtype=torch.float64),
        "numeral_precision": torch.zeros(2, 5, dtype=torch.long),
        "numeral_mask": torch.zeros(2, 5, dtype=torch.int8),
    }
    torch.testing.assert_close(m(ids, labels=ids, **fields).loss, m(ids, labels=ids).loss)
