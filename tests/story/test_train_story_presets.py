"""examples/train_story.py: the ``small`` (default) and ``rocstories`` presets as documented, explicit flags
over preset values, and a short default run on the fixture stories (Yao et al. 2019's title -> storyline ->
story with one AWD-LSTM, Merity et al. 2018) whose sample story is words, not one token repeated."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "train_story.py"
FIXTURES = ROOT / "tests" / "fixtures" / "rocstories"
CLOZE = FIXTURES / "cloze_test_val__spring2016 - cloze_test_ALL_val.csv"


@pytest.fixture(scope="module")
def script() -> dict:
    return runpy.run_path(str(SCRIPT))


def settings(script: dict, *flags: str):
    parser = script["build_parser"]()
    return script["resolve"](parser.parse_args(["--rocstories", "x", "--output-dir", "y", *flags]))


def test_the_default_preset_is_the_small_one(script):
    args = settings(script)
    assert args.preset == script["DEFAULT_PRESET"] == "small"
    assert (args.vocab_size, args.min_frequency, args.embedding_size, args.hidden_size, args.num_layers) == (
        15000, 2, 64, 128, 2)
    assert (args.learning_rate, args.batch_size, args.num_epochs, args.max_time_s) == (3e-3, 8, 300, 150.0)
    assert (args.dropout, args.dropout_hidden, args.dropout_input, args.dropout_embedding,
            args.weight_drop) == (0.2, 0.1, 0.2, 0.05, 0.2)
    assert args.split_fractions == (0.7, 0.15, 0.15) and args.early_stopping_patience == 5
    seq2seq = settings(script, "--approach", "seq2seq")
    assert (seq2seq.embedding_size, seq2seq.hidden_size, seq2seq.dropout) == (64, 64, 0.1)


def test_the_rocstories_preset_is_the_big_model(script):
    args = settings(script, "--preset", "rocstories")
    assert (args.vocab_size, args.min_frequency, args.embedding_size, args.hidden_size, args.num_layers) == (
        15000, 1, 400, 1150, 3)
    assert (args.dropout, args.dropout_hidden, args.dropout_input, args.dropout_embedding,
            args.weight_drop) == (0.4, 0.3, 0.65, 0.1, 0.5)
    assert (args.learning_rate, args.batch_size, args.num_epochs, args.max_time_s, args.block_size) == (
        1e-3, 32, 20, None, 70)
    seq2seq = settings(script, "--preset", "rocstories", "--approach", "seq2seq")
    assert (seq2seq.embedding_size, seq2seq.hidden_size, seq2seq.dropout) == (512, 512, 0.2)


def test_explicit_flags_beat_the_preset(script):
    args = settings(script, "--preset", "rocstories", "--hidden-size", "200", "--num-epochs", "2",
                    "--learning-rate", "0.01", "--split-fractions", "0.8", "0.1", "0.1", "--max-time-s", "0")
    assert (args.hidden_size, args.num_epochs, args.learning_rate) == (200, 2, 0.01)
    assert args.split_fractions == (0.8, 0.1, 0.1) and args.max_time_s is None  # 0: no limit
    assert args.embedding_size == 400  # what was not given comes from the preset
    assert settings(script, "--dropout", "0").dropout == 0.0  # a zero is a value, not "unset"
    help_text = script["build_parser"]().format_help()
    assert "--preset {small,rocstories}" in help_text and "1150" in help_text


def test_a_default_run_on_the_fixture_writes_a_story(script, tmp_path, capsys):
    results = script["main"](["--rocstories", str(FIXTURES), "--output-dir", str(tmp_path / "run"),
                              "--story-cloze", str(CLOZE), "--max-time-s", "20"])
    summary = results["summary"]
    assert summary["preset"] == "small" and summary["num_parameters"] < 500_000
    words = summary["sample"]["story"].split()
    assert len(words) > 1 and len(set(words)) > 1 and set(words) != {"#"}
    assert summary["story_cloze_examples"] == 4 and 0.0 <= summary["story_cloze_accuracy"] <= 1.0
    assert (tmp_path / "run" / "model.safetensors").is_file()
    # Saved with the generation defaults of a model that `hf-nlm train` makes.
    from transformers import GenerationConfig

    from hf_nlm.generation import MAX_NEW_TOKENS, MIN_NEW_TOKENS

    saved = GenerationConfig.from_pretrained(tmp_path / "run")
    assert (saved.max_new_tokens, saved.min_new_tokens) == (MAX_NEW_TOKENS, MIN_NEW_TOKENS)
    assert saved.suppress_tokens
