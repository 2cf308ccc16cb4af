"""The data and batching seam: extra per-token fields from tokenisation to blocks, the training
sampler, stream columns and chunks (checked against a brute-force walk over the text); the one
place that decides whether a model carries a state; the recurrent state of a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM, NPLMConfig, NPLMForCausalLM
from hf_nlm.cache_utils import RecurrentCache
from hf_nlm.data import (
    IGNORE_INDEX,
    BlockBatches,
    BlockBatching,
    LMBlockDataset,
    StreamBatches,
    StreamBatching,
    TokenFeatures,
    batching_for,
    build_lm_dataset,
    collate_blocks,
    group_into_blocks,
    is_stateful,
    stream_columns,
    tokenize_corpus,
    tokenize_stream,
)
from hf_nlm.evaluation import evaluate_lm, token_log_probs
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import LMTrainer, TrainingConfig

TEXTS = [
    "the cat sat on the mat",
    "the dog sat on the log",
    "",
    "a cat saw a hippopotamus",
    "the dog saw the cat on the mat",
    "zebras sat",
]
FILL = {"char_len": -1, "ends": -7}


def spans_features(text: str, spans: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """A toy feature of each token's own text: its length, and (2-D) the codes of its first and last
    letter."""
    words = [text[start:end] for start, end in spans]
    return {
        "char_len": np.array([len(w) for w in words], dtype=np.int64),
        "ends": np.array([[ord(w[0]), ord(w[-1])] for w in words], dtype=np.int64),
    }


FEATURES = TokenFeatures(spans_features, FILL)


@pytest.fixture(scope="module")
def tokenizer():
    # min_frequency 2: "hippopotamus", "zebras", "log", ... become <unk>, whose text only the offsets keep.
    return train_word_level_tokenizer(TEXTS, min_frequency=2)


def brute_force(tokenizer) -> dict[str, torch.Tensor]:
    """The stream built word by word from the text: each word's id and features, then <eos> and the fills."""
    vocab, eos = tokenizer.get_vocab(), tokenizer.eos_token_id
    ids, char_len, ends = [], [], []
    for line in TEXTS:
        for word in line.split():
            ids.append(vocab.get(word, tokenizer.unk_token_id))
            char_len.append(len(word))
            ends.append([ord(word[0]), ord(word[-1])])
        ids.append(eos)
        char_len.append(FILL["char_len"])
        ends.append([FILL["ends"]] * 2)
    return {"input_ids": torch.tensor(ids), "char_len": torch.tensor(char_len), "ends": torch.tensor(ends)}


def padded(values: torch.Tensor, front: int, back: int, fill) -> torch.Tensor:
    return torch.cat([values.new_full((front, *values.shape[1:]), fill), values,
                      values.new_full((back, *values.shape[1:]), fill)])


def tiny_nplm(tokenizer) -> NPLMForCausalLM:
    torch.manual_seed(0)
    return NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=8,
                                      hidden_size=12))


def tiny_awd(tokenizer) -> AWDLSTMForCausalLM:
    torch.manual_seed(0)
    config = AWDLSTMConfig(vocab_size=len(tokenizer), embedding_size=8, hidden_size=12, num_hidden_layers=2)
    return AWDLSTMForCausalLM(config)


# ----------------------------------------------------------------------------- tokenisation


def test_tokenize_stream_computes_fields_from_the_text_of_each_token(tokenizer):
    stream, num_words = tokenize_stream(TEXTS, tokenizer, FEATURES)
    expected = brute_force(tokenizer)
    assert set(stream) == set(expected)
    for name in expected:
        assert torch.equal(stream[name], expected[name]), name
    assert (stream["input_ids"] == tokenizer.unk_token_id).any()  # the text of an <unk> came from the offsets
    ids, words = tokenize_corpus(TEXTS, tokenizer)
    assert torch.equal(stream["input_ids"], ids) and num_words == words


@pytest.mark.parametrize("slice_lines", [1, 2, 3])
def test_tokenize_in_slices_of_lines_gives_the_same_stream(tokenizer, slice_lines):
    """The lines are encoded a slice at a time (memory); the stream and its fields do not depend on it."""
    texts = ["", *TEXTS, "", ""]
    whole, words = tokenize_stream(texts, tokenizer, FEATURES, slice_lines=len(texts))
    sliced, sliced_words = tokenize_stream(texts, tokenizer, FEATURES, slice_lines=slice_lines)
    assert sliced_words == words and set(sliced) == set(whole)
    for name, values in whole.items():
        assert sliced[name].dtype == values.dtype and torch.equal(sliced[name], values), name
    ids, _ = tokenize_corpus(texts, tokenizer, slice_lines=slice_lines)
    assert torch.equal(ids, whole["input_ids"])

def test_tokenizer_offers_its_own_features_and_bad_ones_are_refused(tokenizer):
    plain, _ = tokenize_stream(TEXTS, tokenizer)
    assert list(plain) == ["input_ids"]
    tokenizer.token_features = FEATURES
    try:
        stream, _ = tokenize_stream(TEXTS, tokenizer)
        assert set(stream) == {"input_ids", *FILL}
        assert BlockBatching(tokenizer, 4, 2).fill == FILL
    finally:
        del tokenizer.token_features
    short = TokenFeatures(lambda text, spans: {"char_len": [1], "ends": [[1, 1]]}, FILL)
    with pytest.raises(ValueError, match="values for"):
        tokenize_stream(TEXTS, tokenizer, short)
    with pytest.raises(ValueError, match="reserved"):
        tokenize_stream(TEXTS, tokenizer, TokenFeatures(spans_features, {"labels": 0}))


# ----------------------------------------------------------------------------- blocks and the sampler


@pytest.mark.parametrize("block_size, context_size", [(1, 2), (3, 2), (5, 1)])
def test_block_fields_are_position_aligned_like_labels(tokenizer, block_size, context_size):
    stream, _ = tokenize_stream(TEXTS, tokenizer, FEATURES)
    blocks = group_into_blocks(stream, block_size, context_size, tokenizer.eos_token_id, fill=FILL)
    plain = group_into_blocks(stream["input_ids"], block_size, context_size, tokenizer.eos_token_id)
    assert (torch.equal(blocks["input_ids"], plain["input_ids"])
            and torch.equal(blocks["labels"], plain["labels"]))
    expected = brute_force(tokenizer)
    n, width = len(expected["input_ids"]), context_size + block_size
    tail = blocks["input_ids"].shape[0] * block_size - n
    for name, fill in FILL.items():
        # Block b, position j is stream position b * block_size + j - context_size.
        full = padded(expected[name], context_size, tail, fill)
        want = torch.stack([full[b * block_size : b * block_size + width]
                            for b in range(len(blocks["labels"]))])
        assert torch.equal(blocks[name], want), name
    # Every target's field is its own token's: the same brute-force value, in the same place as its label.
    targets = blocks["labels"] != IGNORE_INDEX
    assert torch.equal(blocks["labels"][targets], expected["input_ids"])
    assert torch.equal(blocks["char_len"][targets], expected["char_len"])
    assert torch.equal(blocks["ends"][targets], expected["ends"])


def test_sampler_batches_carry_the_fields_and_two_processes_split_the_global_batch(tokenizer):
    data, _ = build_lm_dataset(TEXTS, tokenizer, block_size=3, context_size=2, features=FEATURES)
    assert set(data.blocks) == {"input_ids", "labels", *FILL}
    one = BlockBatches(data, batch_size=4, seed=3)
    two = [BlockBatches(data, batch_size=2, num_processes=2, process_index=p, seed=3) for p in range(2)]
    for epoch in range(2):
        for step, (whole, *shares) in enumerate(zip(one.epoch(epoch), *(t.epoch(epoch) for t in two),
                                                    strict=True)):
            indices = one.sampler.global_batches(epoch)[step]
            for name, values in data.blocks.items():
                assert torch.equal(whole[0][name], values[indices]), name
                assert torch.equal(torch.cat([share[0][name] for share in shares]), whole[0][name]), name
            for p, share in enumerate(shares):
                local = two[p].sampler.local_batch(indices)
                assert all(torch.equal(share[0][k], data.blocks[k][local]) for k in data.blocks)
    # collate_blocks stacks single blocks field by field too
    single = collate_blocks([LMBlockDataset(data.blocks)[i] for i in (2, 0)])
    assert all(torch.equal(single[k], data.blocks[k][[2, 0]]) for k in data.blocks)


def test_serving_an_epoch_leaves_the_global_random_stream_alone(tokenizer):
    """A resumed run starts an epoch mid-way; if serving batches drew from torch's global RNG (as a
    DataLoader does for its base seed), its dropout masks would differ from the uninterrupted run's."""
    data, _ = build_lm_dataset(TEXTS, tokenizer, block_size=3, context_size=2)
    batches = BlockBatches(data, batch_size=4, seed=3)
    torch.manual_seed(0)
    before = torch.get_rng_state()
    served = ([batch for batch, _, _ in batches.epoch(0)]
              + [batch for batch, _, _ in batches.epoch(1, start=1)])
    assert served and torch.equal(torch.get_rng_state(), before)


# ----------------------------------------------------------------------------- stream columns and chunks


@pytest.mark.parametrize("num_columns", [1, 3, 4])
def test_column_fields_are_target_aligned_like_shift_labels(tokenizer, num_columns):
    stream, _ = tokenize_stream(TEXTS, tokenizer, FEATURES)
    columns = stream_columns(stream, num_columns, tokenizer.eos_token_id, fill=FILL)
    expected = brute_force(tokenizer)
    n, length = len(expected["input_ids"]), columns.length
    for name, fill in FILL.items():
        want = padded(expected[name], 0, num_columns * length - n, fill).view(num_columns, length,
                                                                              *expected[name].shape[1:])
        assert torch.equal(columns.extras[name], want), name
    chunk = columns.chunk(2, 3, slice(1, None))
    assert set(chunk) == {"input_ids", "shift_labels", *FILL}
    for name in FILL:
        assert torch.equal(chunk[name], columns.extras[name][1:, 2:5])
    keep = chunk["shift_labels"] != IGNORE_INDEX
    targets = (torch.arange(num_columns * length).view(num_columns, length)[1:, 2:5])[keep]
    assert torch.equal(chunk["shift_labels"][keep], expected["input_ids"][targets])
    assert torch.equal(chunk["char_len"][keep], expected["char_len"][targets])
    assert torch.equal(chunk["ends"][keep], expected["ends"][targets])


def test_stream_batches_of_two_processes_are_the_columns_of_one(tokenizer):
    stream, _ = tokenize_stream(TEXTS, tokenizer, FEATURES)
    one = StreamBatches(stream, tokenizer.eos_token_id, 4, bptt=3, fill=FILL)
    two = [StreamBatches(stream, tokenizer.eos_token_id, 2, 3, 2, p, fill=FILL) for p in range(2)]
    usable = len(stream["input_ids"]) - one.num_dropped
    expected = brute_force(tokenizer)
    for whole, *shares in zip(one.epoch(0), *(t.epoch(0) for t in two), strict=True):
        for name in ("input_ids", "shift_labels", *FILL):
            assert torch.equal(torch.cat([share[0][name] for share in shares]), whole[0][name]), name
        assert whole[1] == shares[0][1] == whole[0]["input_ids"].numel()
    for name in FILL:
        assert torch.equal(one.columns.extras[name].flatten(0, 1), expected[name][:usable])
    assert one.stats == {"num_not_trained_on": one.num_dropped}


# ----------------------------------------------------------------------------- the one decision


def test_the_model_decides_the_batching_in_one_place(tokenizer, tmp_path):
    nplm, awd = tiny_nplm(tokenizer), tiny_awd(tokenizer)
    assert not is_stateful(nplm) and is_stateful(awd)
    blocks, columns = batching_for(nplm, tokenizer, 4), batching_for(awd, tokenizer, 4)
    assert type(blocks) is BlockBatching and not blocks.stateful and blocks.context_size == 2
    assert type(columns) is StreamBatching and columns.stateful
    assert (blocks.exact_batch_size(8), columns.exact_batch_size(8)) == (8, 1)
    stream, _ = blocks.encode(TEXTS)
    assert isinstance(blocks.training_batches(stream, 2), BlockBatches)
    assert isinstance(columns.training_batches(stream, 2), StreamBatches)
    trainer_config = dict(block_size=4, batch_size=2, progress_bar=False, cpu=True)
    for model, kind in [(nplm, BlockBatching), (awd, StreamBatching)]:
        trainer = LMTrainer(model, tokenizer, {"train": TEXTS},
                            TrainingConfig(output_dir=str(tmp_path), **trainer_config))
        assert type(trainer.batching) is kind


def test_models_take_whole_batches_with_extra_fields(tokenizer):
    """Batches go to ``model(**batch)`` whole; today's models ignore the extra fields."""
    tokenizer.token_features = FEATURES
    try:
        for model in (tiny_nplm(tokenizer), tiny_awd(tokenizer)):
            batching = batching_for(model, tokenizer, 4)
            stream, _ = batching.encode(TEXTS)
            batches = batching.training_batches(stream, 2)
            state = None
            for batch, _, _ in batches.epoch(0):
                assert set(FILL) <= set(batch)
                output = model(**batch, **batches.state_inputs(state))
                state = batches.state_after(output)
                assert torch.isfinite(output.loss)
            with_fields = evaluate_lm(model, TEXTS, tokenizer, block_size=4, batch_size=2)
            ids, log_probs, _ = token_log_probs(model, TEXTS, tokenizer, block_size=4, batch_size=2)
            del tokenizer.token_features
            assert evaluate_lm(model, TEXTS, tokenizer, block_size=4, batch_size=2) == with_fields
            assert torch.equal(token_log_probs(model, TEXTS, tokenizer, block_size=4, batch_size=2)[1],
                               log_probs)
            tokenizer.token_features = FEATURES
    finally:
        vars(tokenizer).pop("token_features", None)


# ----------------------------------------------------------------------------- the state of a checkpoint


def random_state(batch: int, seed: int) -> RecurrentCache:
    g = torch.Generator().manual_seed(seed)
    return RecurrentCache([torch.randn(batch, 3, generator=g), torch.randn(batch, 5, generator=g)],
                          [torch.randn(batch, 3, generator=g), torch.randn(batch, 5, generator=g)])


def assert_same_state(a: RecurrentCache, b: RecurrentCache) -> None:
    assert len(a) == len(b)
    for mine, theirs in zip(a.hidden + a.cell, b.hidden + b.cell, strict=True):
        assert torch.equal(mine, theirs)


def test_recurrent_state_round_trips_through_the_training_batches(tokenizer):
    stream, _ = tokenize_stream(TEXTS, tokenizer)
    one = StreamBatches(stream, tokenizer.eos_token_id, 4, 3)
    state = random_state(4, 0)
    assert RecurrentCache.from_state_tensors({}) is None
    assert_same_state(RecurrentCache.from_state_tensors(state.state_tensors()), state)
    saved = one.state_tensors(state, gather=None)
    assert sorted(saved) == ["state.cell.0", "state.cell.1", "state.hidden.0", "state.hidden.1"]
    assert_same_state(one.restore_state(saved, "cpu"), state)
    # Two processes: each saves its 2 columns through a gather (here simulated), each gets its own back.
    two = [StreamBatches(stream, tokenizer.eos_token_id, 2, 3, 2, p) for p in range(2)]
    shares = [random_state(2, 1), random_state(2, 2)]
    gathered = {}
    for name in shares[0].state_tensors():
        gathered[f"state.{name}"] = torch.cat([s.state_tensors()[name] for s in shares])
    # Both processes call the collective in the same order; process 0 receives its rows, then process 1's.
    others = iter(shares[1].state_tensors().values())

    def gather(tensor):
        return torch.cat([tensor, next(others)])

    saved_by_two = two[0].state_tensors(shares[0], gather)
    assert sorted(saved_by_two) == sorted(gathered)
    assert all(torch.equal(saved_by_two[k], v) for k, v in gathered.items())
    assert two[0].state_tensors(shares[0], gather=None) == {}  # no collectives: nothing to save for P > 1
    for p in range(2):
        assert_same_state(two[p].restore_state(gathered, "cpu"), shares[p])
    with pytest.warns(UserWarning, match="no recurrent state"):
        assert two[0].restore_state({}, "cpu") is None
    # Blocks carry no state: nothing to save, nothing to restore.
    blocks = BlockBatches(LMBlockDataset(group_into_blocks(stream, 3, 2, tokenizer.eos_token_id)), 2)
    assert blocks.state_inputs(state) == {} and blocks.state_after(None) is None
    assert blocks.state_tensors(state, None) == {} and blocks.restore_state(saved, "cpu") is None
