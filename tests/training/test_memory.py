"""The training-memory estimate (``hf_nlm.training.memory``) against counts made by hand, and the check that
refuses settings which cannot fit."""

from __future__ import annotations

import gc
import itertools
import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig

from hf_nlm.models import MODEL_TYPES, NumeracyLMConfig, NumeracyLMForCausalLM
from hf_nlm.tokenization import train_numeracy_tokenizer
from hf_nlm.training import TrainingConfig, memory
from hf_nlm.training.memory import Heap, LiveBytes, check_training_memory, estimate_training_memory


class PlainConfig(PretrainedConfig):
    model_type = "plain_lm"

    def __init__(self, vocab_size: int = 1000, hidden_size: int = 64, **kwargs) -> None:
        super().__init__(**kwargs)
        self.vocab_size, self.hidden_size = vocab_size, hidden_size


class PlainLM(nn.Module):
    """An embedding, a linear map to the vocabulary and ``cross_entropy``: memory one can count by hand."""

    def __init__(self, config: PlainConfig, tree=None) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.proj = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, labels=None, logits_to_keep=None):
        logits = self.proj(self.embed(input_ids[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
        return type("Output", (), {"loss": loss})


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_linear_softmax_model_is_counted_as_by_hand(optimizer):
    V, D, B, T = 1000, 64, 8, 32
    N = B * T  # targets: a block of T + 1 tokens (the first is context only) predicts T of them
    # device="cuda": what is alive, without the CPU heap's bookkeeping.
    estimate = estimate_training_memory(PlainLM, PlainConfig(V, D), batch_size=B, block_size=T,
                                        optimizer=optimizer, device="cuda")
    weights = 4 * 2 * V * D  # embedding and output matrix
    adam = 2 * weights + 2 * 4 if optimizer == "adam" else 0  # two moments and a float32 step per tensor
    assert estimate.parameters == 2 * V * D
    state = (estimate.weight_bytes, estimate.gradient_bytes, estimate.optimizer_bytes)
    assert state == (weights, weights, adam)
    # The peak is in log_softmax's backward: its saved output, the gradient it receives from nll_loss and the
    # gradient it gives the logits (three N x V floats; the logits themselves were freed after the forward),
    # the embedded inputs the linear map saved (N x D), the batch (two B x (T + 1) int64) and the labels made
    # contiguous.
    by_hand = weights + adam + 4 * (3 * N * V + N * D) + 2 * 8 * B * (T + 1) + 8 * N
    assert estimate.total_bytes == pytest.approx(by_hand, rel=0.002)
    assert estimate.evaluation_bytes == 0  # no eval_batch_size: no validation batch counted


def test_live_bytes_follow_frees_instead_of_summing_allocations():
    tracker = LiveBytes(heap=False)
    x = torch.empty(1000, device="meta")
    with tracker:
        for _ in range(10):
            y = x * 2  # each 4000-byte product replaces the last, once it is made: two alive at most
        del y
    assert tracker.live == 0 and tracker.peak == 8000  # where the sum of the allocations is 40000


def test_the_heap_keeps_what_it_grew_to_and_reuses_its_best_fitting_hole():
    heap = Heap()
    a, b = heap.alloc(100), heap.alloc(50)
    heap.free(a, 100)
    assert heap.alloc(60) == a and heap.top == 150  # the hole of 100 takes it; 40 bytes stay free at 60
    c = heap.alloc(200)
    assert c == 150 and heap.top == 350  # no hole of 200: on top
    heap.free(b, 50)
    heap.free(c, 200)
    assert heap.top == 350  # freed, but held: less than TRIM_THRESHOLD lies free at the top
    big = heap.alloc(memory.TRIM_THRESHOLD + 1)
    assert big == 350  # bigger than any hole
    heap.free(big, memory.TRIM_THRESHOLD + 1)
    assert heap.top == 60  # merged with the 290 free below it, more than TRIM_THRESHOLD lies free: given back
    assert heap.alloc(250) == 60


def test_the_heap_stays_consistent_over_random_tensors_empty_ones_included():
    rng = random.Random(0)
    tracker = LiveBytes()
    alive = []
    with tracker:
        for _ in range(400):
            if alive and rng.random() < 0.45:
                alive.pop(rng.randrange(len(alive)))
            else:
                alive.append(torch.empty(rng.choice([0, 0, 1, 10, 100, 1000]), device="meta"))
            holes_of(tracker.heap)
        expected = sum(t.untyped_storage().nbytes() for t in alive)
        assert tracker.live == expected
        alive.clear()
    assert tracker.live == 0 and holes_of(tracker.heap) in ([], [(0, tracker.heap.top)])


def holes_of(heap: Heap) -> list[tuple[int, int]]:
    """The heap's free holes as (start, size), checked against its two indexes and for neighbours left
    unmerged."""
    holes = sorted((start, size) for size, start in heap._holes)
    assert dict(holes) == heap._by_start and {s + z: s for s, z in holes} == heap._by_end
    assert all(s + z < t for (s, z), (t, _) in itertools.pairwise(holes)), holes  # freed blocks merge
    return holes


def test_a_storage_collected_in_the_middle_of_a_heap_update_is_freed_after_it(monkeypatch):
    tracker = LiveBytes()
    x = torch.empty(1000, device="meta")
    with tracker:
        kept, cycle = x * 2, [x * 2]
        cycle.append(cycle)  # only the garbage collector frees it
    del cycle
    add = tracker.heap._add

    def add_during_a_collection(start, size):
        gc.collect()  # any allocation may start one: here it finalizes the cycle's storage
        add(start, size)

    monkeypatch.setattr(tracker.heap, "_add", add_during_a_collection)
    del kept
    assert tracker.live == 0
    assert holes_of(tracker.heap) == [(0, tracker.heap.top)]  # both blocks, merged into one hole


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="oneDNN is not built in")
def test_the_onednn_lstm_workspace_formula_matches_the_kernel():
    T, B, D, H = 30, 8, 300, 200  # steps, rows, input and hidden units
    x = torch.randn(T, B, D, requires_grad=True)
    weights = [torch.randn(4 * H, D), torch.randn(4 * H, H), torch.zeros(4 * H), torch.zeros(4 * H)]
    h0 = torch.zeros(1, B, H)
    out = torch.ops.aten.mkldnn_rnn_layer(x, *weights, h0, h0, False, [], 2, H, 1, True, False, False, True)
    assert memory.onednn_lstm_workspace(T, B, D, H) == pytest.approx(out[3].numel(), rel=0.05)


def number_rich_lines(num_lines: int, seed: int = 0) -> list[str]:
    """Lines of 17 words (Zipf over 3,000) and 3 numerals: years, counts, amounts."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(3000)]
    weights = [1 / (i + 1) for i in range(len(words))]
    lines = []
    for _ in range(num_lines):
        tokens = rng.choices(words, weights, k=17) + [
            str(rng.randint(1900, 2020)), str(int(rng.paretovariate(1.0))), f"{rng.uniform(0, 100):.2f}"]
        rng.shuffle(tokens)
        lines.append(" ".join(tokens))
    return lines


@pytest.fixture(scope="module")
def numeracy_tokenizer():
    return train_numeracy_tokenizer(number_rich_lines(3000), max_vocab_size=5000)


def numeracy_config(tokenizer, **fields) -> NumeracyLMConfig:
    recipe = MODEL_TYPES["numeracy_lm"].recipe()
    return NumeracyLMConfig(vocab_size=len(tokenizer), numeral_vocab=tokenizer.numeral_vocab,
                            **{"numeral_strategy": "drnn", **recipe.model, **fields})


def test_the_drnn_numeracy_model_at_its_default_recipe_needs_under_a_gigabyte(numeracy_tokenizer, tmp_path):
    # The training path scores each numeral target's own digits: the digit-RNN never runs over the
    # vocabulary's numerals (what the full distribution would need, tens of GB at this batch).
    training = TrainingConfig.for_model("numeracy_lm", output_dir=str(tmp_path))
    estimate = memory._estimate(NumeracyLMForCausalLM, numeracy_config(numeracy_tokenizer), None, training)
    assert 1e6 < estimate.activation_bytes and estimate.total_bytes < 1e9


def test_a_huge_setting_is_refused_naming_what_to_lower(numeracy_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda gpu: (2 * 10**9, "memory available"))
    config = numeracy_config(numeracy_tokenizer, hidden_size=2048, embedding_size=64)
    training = TrainingConfig.for_model("numeracy_lm", output_dir=str(tmp_path), batch_size=2048,
                                        block_size=16)
    with pytest.raises(ValueError) as refused:
        check_training_memory(NumeracyLMForCausalLM, config, training)
    message = str(refused.value)
    assert message.startswith("training this numeracy_lm needs about ")
    assert "more than the 2.0 GB of memory available; lower " in message
    assert "batch_size (--batch-size)" in message and "hidden_size (--hidden-size)" in message
    assert "numeral_strategy" not in message and "--numeral-strategy" not in message


def test_what_lowers_the_need_is_named_with_the_configs_own_flag():
    # The LBL's D is hidden_size, whose flag is --embedding-size (its attribute_map); the vocabulary's is the
    # tokenizer's --vocab-size.
    config = MODEL_TYPES["lbl"].config_class(vocab_size=20000, hidden_size=400, context_size=2)
    training = TrainingConfig(output_dir="-", batch_size=4, block_size=4, optimizer="adam", eval_batch_size=4)
    total = memory._estimate(MODEL_TYPES["lbl"].lm_class, config, None, training).total_bytes
    named = memory.settings_that_lower(MODEL_TYPES["lbl"].lm_class, config, training, total)
    assert set(named) == {"hidden_size (--embedding-size)", "vocab_size (--vocab-size)"}


def test_the_check_passes_what_fits_and_skips_where_memory_is_unknown(numeracy_tokenizer, tmp_path,
                                                                     monkeypatch):
    config = numeracy_config(numeracy_tokenizer)
    training = TrainingConfig.for_model("numeracy_lm", output_dir=str(tmp_path), block_size=16)
    monkeypatch.setattr(memory, "available_memory", lambda gpu: (10**10, "memory available"))
    assert check_training_memory(NumeracyLMForCausalLM, config, training).total_bytes < 10**10
    monkeypatch.setattr(memory, "available_memory", lambda gpu: None)
    assert check_training_memory(NumeracyLMForCausalLM, config, training) is None
