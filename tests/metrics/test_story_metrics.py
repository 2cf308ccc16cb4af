"""Story metrics: distinct-n, within-story repetition and Story Cloze accuracy (the metric from
given scores, and an LM's accuracy checked against a brute-force, one-ending-at-a-time scoring)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM
from hf_nlm.data import load_story_cloze
from hf_nlm.evaluation import story_cloze_accuracy
from hf_nlm.metrics import Distinct, Repetition, StoryCloze, load_metric
from hf_nlm.tokenization import train_word_level_tokenizer

CLOZE = (Path(__file__).parents[1] / "fixtures" / "rocstories"
         / "cloze_test_val__spring2016 - cloze_test_ALL_val.csv")


@pytest.fixture
def offline(monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
        monkeypatch.setenv(var, "1")


# ----- distinct-n ---------------------------------------------------------------------------------


def test_distinct_worked_by_hand():
    texts = ["the cat saw the cat", "the dog", "dog"]
    result = Distinct(keep_in_memory=True).compute(predictions=texts)
    # Unigrams: 5 + 2 + 1 = 8, distinct {the, cat, saw, dog} = 4.
    assert (result["unique_1"], result["total_1"], result["distinct_1"]) == (4, 8, 0.5)
    # Bigrams: (the cat)(cat saw)(saw the)(the cat) + (the dog) = 5, distinct 4; "dog" has none.
    assert (result["unique_2"], result["total_2"], result["distinct_2"]) == (4, 5, 0.8)
    # Per text: unigrams 3/5, 2/2, 1/1; bigrams 3/4, 1/1 (the one-word text has no bigram).
    assert result["distinct_1_per_text"] == pytest.approx((3 / 5 + 1 + 1) / 3)
    assert result["distinct_2_per_text"] == pytest.approx((3 / 4 + 1) / 2)
    assert result["num_texts"] == 3


def test_distinct_options_and_bad_input():
    metric = Distinct(keep_in_memory=True)
    assert metric.compute(predictions=["A a"], lowercase=True)["distinct_1"] == 0.5
    assert metric.compute(predictions=["A a"])["distinct_1"] == 1.0
    assert math.isnan(metric.compute(predictions=["one", "two"])["distinct_2"])  # no bigram at all: 0/0
    assert metric.compute(predictions=["a b c"], max_order=3)["distinct_3"] == 1.0
    with pytest.raises(ValueError, match="empty list of predictions"):
        metric.compute(predictions=[])
    with pytest.raises(ValueError, match="distinct has no texts"):
        metric.compute()


# ----- repetition ---------------------------------------------------------------------------------


def test_repetition_worked_by_hand():
    stories = ["she went home . she went home .", "a b c"]
    result = Repetition(keep_in_memory=True).compute(predictions=stories, max_order=3)
    # Story 1 (8 tokens): unigrams 8, distinct 4 -> 4/8 repeat; bigrams 7, distinct 4
    # (she went, went home, home ., . she) -> 3/7; trigrams 6, distinct 4 -> 2/6. Story 2: none.
    assert result["repetition_1"] == pytest.approx((4 / 8 + 0) / 2)
    assert result["repetition_2"] == pytest.approx((3 / 7 + 0) / 2)
    assert result["repetition_3"] == pytest.approx((2 / 6 + 0) / 2)
    assert (result["repeated_2"], result["total_2"]) == (3, 7 + 2)
    # Repeats across stories do not count.
    assert Repetition(keep_in_memory=True).compute(predictions=["a b", "a b"])["repetition_1"] == 0.0


def test_repetition_bad_input():
    metric = Repetition(keep_in_memory=True)
    assert math.isnan(metric.compute(predictions=["a"], max_order=2)["repetition_2"])
    with pytest.raises(ValueError, match="empty list of predictions"):
        metric.compute(predictions=[])
    with pytest.raises(ValueError, match="max_order"):
        metric.compute(predictions=["a"], max_order=0)


# ----- Story Cloze metric -------------------------------------------------------------------------


def test_story_cloze_metric():
    metric = StoryCloze(keep_in_memory=True)
    result = metric.compute(predictions=[[-3.0, -5.0], [-2.0, -1.0], [-1.0, -1.0], [0.0, -math.inf]],
                            references=[0, 0, 1, 0])
    # Right, wrong, a tie (goes to ending 0: wrong), right.
    assert result == {"accuracy": 0.5, "num_examples": 4, "num_correct": 2, "num_ties": 1}
    assert metric.compute(predictions=[[1.0, 2.0, 3.0]], references=[2])["accuracy"] == 1.0


@pytest.mark.parametrize(
    ("predictions", "references", "message"),
    [
        ([], [], "empty list of predictions"),
        ([[1.0, 2.0]], [0, 1], "1 predictions but 2 references"),
        ([[1.0, 2.0]], [2], r"reference 0 is 2, expected a 0-based ending index in 0\.\.1"),
        ([[1.0, 2.0], [1.0, 2.0, 3.0]], [0, 0], "same number"),
        ([[1.0, float("nan")]], [0], "example 0 has a NaN score"),
    ],
)
def test_story_cloze_metric_bad_input(predictions, references, message):
    with pytest.raises(ValueError, match=message):
        StoryCloze(keep_in_memory=True).compute(predictions=predictions, references=references)


def test_story_metrics_load_offline(offline):
    assert load_metric("distinct", keep_in_memory=True).compute(predictions=["a a"])["distinct_1"] == 0.5
    assert load_metric("repetition", keep_in_memory=True).compute(predictions=["a a"])["repetition_1"] == 0.5
    cloze = load_metric("story_cloze", keep_in_memory=True)
    assert type(cloze).__name__ == "StoryCloze"
    assert cloze.compute(predictions=[[0.0, 1.0]], references=[1])["accuracy"] == 1.0


# ----- Story Cloze with a language model ----------------------------------------------------------


def brute_force_scores(model, tokenizer, example) -> list[tuple[float, int]]:
    """Each ending alone: one unpadded forward pass over [bos] + context + ending, log-softmax of the
    logits, summed over the ending's positions."""
    context = [tokenizer.eos_token_id] + tokenizer(" ".join(example["sentences"]),
                                                   add_special_tokens=False)["input_ids"]
    scores = []
    for ending in example["endings"]:
        ending_ids = tokenizer(" " + ending, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([context + ending_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
        total = sum(logp[len(context) + k - 1, token].item() for k, token in enumerate(ending_ids))
        scores.append((total, len(ending_ids)))
    return scores


@pytest.fixture(scope="module")
def cloze_and_tokenizer():
    cloze = load_story_cloze(CLOZE)
    texts = [" ".join(s) + " " + " ".join(e)
             for s, e in zip(cloze["sentences"], cloze["endings"], strict=True)]
    # min_frequency=2 leaves rare words out, so some context and ending tokens are <unk>.
    return cloze, train_word_level_tokenizer(texts[:3], min_frequency=2)


def awd_lstm(vocab_size: int) -> AWDLSTMForCausalLM:
    torch.manual_seed(0)
    config = AWDLSTMConfig(vocab_size=vocab_size, embedding_size=8, hidden_size=12, num_hidden_layers=2)
    return AWDLSTMForCausalLM(config)


def gpt2(vocab_size: int) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_embd=8, n_layer=1, n_head=2, n_positions=128))


@pytest.mark.parametrize("make_model", [awd_lstm, gpt2], ids=["awd_lstm", "gpt2"])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_story_cloze_accuracy_equals_brute_force(cloze_and_tokenizer, make_model, batch_size):
    cloze, tokenizer = cloze_and_tokenizer
    model = make_model(len(tokenizer))
    model.train()  # the scorer must switch dropout off, and give the mode back
    result = story_cloze_accuracy(model, tokenizer, cloze, batch_size=batch_size)
    assert model.training
    model.eval()
    expected = [brute_force_scores(model, tokenizer, example) for example in cloze]
    sums = [[s for s, _ in pair] for pair in expected]
    lengths = [[n for _, n in pair] for pair in expected]
    assert result["ending_num_tokens"] == lengths
    torch.testing.assert_close(torch.tensor(result["ending_log_probs"], dtype=torch.float64),
                               torch.tensor(sums, dtype=torch.float64), rtol=0, atol=1e-5)
    labels = cloze["label"]
    right = [max(range(2), key=lambda k: pair[k]) == label for pair, label in zip(sums, labels, strict=True)]
    normalised = [max(range(2), key=lambda k: pair[k] / n[k]) == label
                  for pair, n, label in zip(sums, lengths, labels, strict=True)]
    assert result["accuracy"] == sum(right) / len(right)
    assert result["accuracy_length_normalized"] == sum(normalised) / len(normalised)
    assert result["num_examples"] == 4


def test_story_cloze_accuracy_bad_input(cloze_and_tokenizer):
    cloze, tokenizer = cloze_and_tokenizer
    model = awd_lstm(len(tokenizer))
    with pytest.raises(ValueError, match="empty dataset"):
        story_cloze_accuracy(model, tokenizer, [])
    with pytest.raises(KeyError, match="example 0 has no sentences"):
        story_cloze_accuracy(model, tokenizer, [{"endings": ["a", "b"], "label": 0}])
    with pytest.raises(ValueError, match="ending 2 of example 0 has no token"):
        story_cloze_accuracy(model, tokenizer, [{"sentences": ["the"], "endings": ["the", "  "], "label": 0}])
    with pytest.raises(ValueError, match="example 1 has 3 endings, expected 2"):
        story_cloze_accuracy(model, tokenizer, [{"sentences": ["a"], "endings": ["a", "b"], "label": 0},
                                                {"sentences": ["a"], "endings": ["a", "b", "c"], "label": 0}])
