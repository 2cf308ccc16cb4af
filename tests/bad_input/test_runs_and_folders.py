"""Broken model folders, odd generation input, Ctrl-C and short runs end with a clear message
(the file or field named), not a traceback from deep inside a library."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from bad_input_helpers import cli_error
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

import hf_nlm  # noqa: F401  (registers the model types with the Auto classes)
from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM, NPLMConfig, NPLMForCausalLM
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm_cli import main

LOADERS = [NPLMForCausalLM.from_pretrained, AutoModelForCausalLM.from_pretrained]


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


def edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


# ----------------------------------------------------------------------------- broken model folders


@pytest.mark.parametrize("damage", ["truncated", "bad header"])
def test_corrupted_weights_name_the_file(run_copy, capsys, damage):
    weights = run_copy / "model.safetensors"
    data = weights.read_bytes()
    # A cut-off download, or a header length that points past the end of the file.
    weights.write_bytes(data[: len(data) // 2] if damage == "truncated"
                        else (10**12).to_bytes(8, "little") + data[8:])
    for load in LOADERS:
        with pytest.raises(OSError, match="truncated or corrupted") as info:
            load(run_copy)
        assert str(weights) in str(info.value) and "force_download=True" in str(info.value)
    assert str(weights) in cli_error(["generate", str(run_copy), "the cat"], capsys)


@pytest.mark.parametrize("value, expected", [("abc", "int"), (8.5, "int"), (None, "int")])
def test_config_field_of_the_wrong_type_is_named(run_copy, capsys, value, expected):
    edit_config(run_copy, hidden_size=value)
    with pytest.raises(ValueError, match=rf"config\.json: field 'hidden_size' must be {expected}, "
                                         rf"got {value!r}"):
        NPLMForCausalLM.from_pretrained(run_copy)
    err = cli_error(["generate", str(run_copy), "the"], capsys)
    assert "'hidden_size' must be int" in err and "config.json" in err


def test_config_accepts_an_int_for_a_float_field(run_copy):
    edit_config(run_copy, initializer_range=1)
    assert NPLMForCausalLM.from_pretrained(run_copy).config.initializer_range == 1


def _load_reports(records: list) -> list[str]:
    return [r.getMessage() for r in records if "LOAD REPORT" in r.getMessage()]


@pytest.fixture
def transformers_records():
    """The records that transformers' model loading logs (its LOAD REPORT table among them)."""
    import logging

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("transformers.modeling_utils")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def test_config_sizes_that_do_not_match_the_weights(run_copy, capsys, transformers_records):
    with safe_open(run_copy / "model.safetensors", framework="pt") as f:
        saved = tuple(f.get_slice("model.C.weight").get_shape())  # (|V|, embedding size)
    edit_config(run_copy, vocab_size=saved[0] + 3)
    for load in LOADERS:
        with pytest.raises(ValueError, match="does not match the weights") as info:
            load(run_copy)
        message = str(info.value)
        assert str(run_copy / "config.json") in message
        assert (f"model.C.weight: {saved} in the weights, {(saved[0] + 3, saved[1])} from the config"
                in message)
    assert "model.C.weight" in cli_error(["generate", str(run_copy), "the"], capsys)
    # Only our message: the sizes are checked before transformers loads, so its LOAD REPORT table never shows.
    assert _load_reports(transformers_records) == []


def test_load_report_still_shows_when_the_load_succeeds(run_copy, transformers_records):
    """A report transformers logs for a load that works (here: a checkpoint without one tensor, which
    from_pretrained initialises) still reaches the user."""
    weights = load_file(run_copy / "model.safetensors")
    del weights["model.C.weight"]
    save_file(weights, run_copy / "model.safetensors", metadata={"format": "pt"})
    _, info = NPLMForCausalLM.from_pretrained(run_copy, output_loading_info=True)
    assert info["missing_keys"] == {"model.C.weight"}
    assert len(_load_reports(transformers_records)) == 1


def test_any_failure_to_load_a_folder_exits_2(run_copy, capsys):
    (run_copy / "tokenizer.json").write_text("{not json")
    err = cli_error(["generate", str(run_copy), "the"], capsys)
    # the tokenizer is blamed, not the model
    assert f"cannot load the tokenizer in {run_copy}: {run_copy / 'tokenizer.json'} is not valid JSON" in err


#: Every command that reads a saved model folder, with ``{folder}`` where the folder goes.
FOLDER_COMMANDS = [
    ["generate", "{folder}", "the"], ["evaluate", "{folder}", "--test-file", "test.txt"],
    ["card", "{folder}"], ["push", "{folder}", "--repo-id", "user/repo"], ["predict-numbers", "{folder}"],
    ["check-numbers", "{folder}", "--text", "a 1"], ["plot-numerals", "{folder}"],
    ["plot-attention", "{folder}", "the"], ["story", "--model", "{folder}", "a title"], ["app", "{folder}"],
]


@pytest.mark.parametrize("command", FOLDER_COMMANDS, ids=lambda command: command[0])
def test_a_run_folder_that_does_not_exist_is_named_so(command, tmp_path, capsys):
    """A folder that is not there is said not to exist; an existing one without config.json is no saved model
    folder: one check (hf_nlm.saved_files.check_model_folder) for every command."""
    if command[0] == "app":
        pytest.importorskip("gradio")
    for folder, expected in [(tmp_path / "nope", f"{tmp_path / 'nope'} does not exist"),
                             (tmp_path, f"{tmp_path} is not a saved model folder (no config.json)")]:
        argv = [arg.replace("{folder}", str(folder)) for arg in command]
        err = cli_error(argv, capsys)
        assert expected in err, f"hf-nlm {' '.join(argv)}: expected {expected!r} in {err!r}"


def test_resume_from_a_broken_checkpoint_exits_2(run_copy, capsys):
    (checkpoint,) = (run_copy / "checkpoints").iterdir()
    (checkpoint / "model.safetensors").write_bytes(b"\0" * 4)
    # the run's data
    err = cli_error(["train", "--output-dir", str(run_copy), "--resume", str(checkpoint)], capsys)
    assert str(checkpoint / "model.safetensors") in err


# ----------------------------------------------------------------------------- generation


@pytest.fixture(scope="module")
def tokenizer():
    return train_word_level_tokenizer(["the cat sat on the mat", "a dog saw the cat"])


@pytest.mark.parametrize("kind", ["nplm", "awd-lstm"])
def test_empty_prompt_starts_from_the_sentence_boundary(tokenizer, kind):
    torch.manual_seed(0)
    V = len(tokenizer)
    if kind == "nplm":
        model = NPLMForCausalLM(NPLMConfig(vocab_size=V, context_size=2, embedding_size=8, hidden_size=8))
    else:
        model = AWDLSTMForCausalLM(AWDLSTMConfig(vocab_size=V, embedding_size=8, hidden_size=8, num_layers=2))
    model.eval()
    bos = torch.full((2, 1), model.config.bos_token_id)
    expected = model.generate(bos, attention_mask=torch.ones_like(bos), max_new_tokens=4, do_sample=False)
    empty = torch.zeros((2, 0), dtype=torch.long)
    assert torch.equal(model.generate(empty, max_new_tokens=4, do_sample=False), expected)
    assert torch.equal(model.generate(input_ids=empty, attention_mask=torch.ones_like(empty),
                                      max_new_tokens=4), expected)


@pytest.fixture
def unk_lover(run_copy) -> Path:
    """The tiny run's model made to always predict <unk> (a huge output bias on it)."""
    tokenizer = AutoTokenizer.from_pretrained(run_copy)
    weights = load_file(run_copy / "model.safetensors")
    weights["lm_head.bias"][tokenizer.unk_token_id] = 1e4
    save_file(weights, run_copy / "model.safetensors", metadata={"format": "pt"})
    return run_copy


def test_generated_unknown_words_stay_visible(unk_lover, capsys):
    capsys.readouterr()
    # the saved generation config keeps <unk> out and forbids repeats: lifted here, to see how <unk> is
    # decoded
    assert main(["generate", str(unk_lover), "zzz qqq the", "--max-new-tokens", "8", "--json",
                 "--allow-unknown", "--no-repeat-ngram-size", "0"]) == 0
    captured = capsys.readouterr()
    (generation,) = json.loads(captured.out)["generations"]
    assert generation.split() == ["<unk>"] * 8  # 8 new tokens, 8 words: none dropped
    assert "2 of the 3 tokens of the prompt 'zzz qqq the' are not in the model's vocabulary" in captured.err
    assert main(["generate", str(unk_lover), "the cat", "--max-new-tokens", "2"]) == 0
    assert "warning" not in capsys.readouterr().err  # a known prompt: no warning
    # pipeline() drops special tokens, <unk> among them, unless asked to keep them (docs/training.md).
    pipe = pipeline("text-generation", model=str(unk_lover), device="cpu")
    kept = pipe("the cat", max_new_tokens=3, do_sample=False, skip_special_tokens=False, suppress_tokens=None,
                no_repeat_ngram_size=0)[0]["generated_text"]
    assert kept.split()[-3:] == ["<unk>"] * 3


def test_generation_settings_are_checked_up_front(tiny_run, capsys):
    run = str(tiny_run)
    assert "--top-p must be in (0, 1]" in cli_error(
        ["generate", run, "the", "--do-sample", "--top-p", "1.5"], capsys)
    for temperature in ("0", "-1", "nan", "inf", "1e-45", "1e300"):
        assert "--temperature must be a number from 1e-30 to 1e+30, got " in cli_error(
            ["generate", run, "the", "--do-sample", "--temperature", temperature], capsys)
    assert "--top-k must be >= 0" in cli_error(
        ["generate", run, "the", "--do-sample", "--top-k", "-1"], capsys)
    assert "need --do-sample" in cli_error(["generate", run, "the", "--temperature", "0.7"], capsys)
    assert "--num-return-sequences 2 needs --do-sample or --num-beams >= 2" in cli_error(
        ["generate", run, "the", "--num-return-sequences", "2"], capsys)
    for ok in (["--num-beams", "2"], ["--do-sample", "--top-p", "0.9", "--temperature", "0.7"]):
        assert main(["generate", run, "the", "--num-return-sequences", "2", "--max-new-tokens", "2", "--json",
                     *ok]) == 0
        assert len(json.loads(capsys.readouterr().out)["generations"]) == 2


# ----------------------------------------------------------------------------- training runs


def test_max_steps_before_the_first_epoch_ends_keeps_a_validated_model(tiny_run):
    results = json.loads((tiny_run / "results.json").read_text())
    assert results["stop_reason"] == "max_steps" and results["epochs_completed"] == 0
    # The final model is the validated one, so its validation perplexity is the best one.
    assert results["best_val_ppl"] == pytest.approx(results["validation"]["perplexity"], rel=1e-5)
    best = NPLMForCausalLM.from_pretrained(tiny_run / "best_model")
    final = NPLMForCausalLM.from_pretrained(tiny_run)
    assert all(torch.equal(a, b)
               for a, b in zip(best.state_dict().values(), final.state_dict().values(), strict=True))
    records = [json.loads(line) for line in (tiny_run / "log.jsonl").read_text().splitlines()]
    (point,) = [r for r in records if r["type"] == "eval"]
    assert point["global_step"] == 2 and 0 < point["epoch"] < 1
    assert (tiny_run / "curves.png").stat().st_size > 0


def interrupt_training(command: list[str], out: Path) -> tuple[str, Path]:
    """Run ``command`` (a training run writing into ``out``), send it SIGINT once it has logged an update,
    and check it exits 130 without a traceback. Returns its stderr and the checkpoint it left."""
    env = {**os.environ, "PYTHONPATH": str(Path(hf_nlm.__file__).parents[1]), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not ((out / "log.jsonl").is_file() and (out / "log.jsonl").read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    (checkpoint,) = (out / "checkpoints").iterdir()
    assert f"saved in {checkpoint}" in err
    return err, checkpoint


TINY_TRAIN = ["--context-size", "2", "--embedding-size", "8", "--hidden-size", "8", "--batch-size", "2",
              "--block-size", "8", "--num-epochs", "50", "--logging-steps", "1", "--no-progress-bar"]


def test_ctrl_c_prints_the_resume_command_and_exits_130(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("the cat sat on the mat\nthe dog sat on the log\na cat saw a dog\n" * 200)
    out = tmp_path / "run"
    argv = ["train", "--train-file", str(corpus), "--output-dir", str(out), *TINY_TRAIN]
    err, checkpoint = interrupt_training([sys.executable, "-m", "hf_nlm_cli", *argv], out)
    command = next(line for line in err.splitlines() if line.startswith("continue with: "))
    resume = shlex.split(command.removeprefix("continue with: "))
    assert resume[:2] == ["hf-nlm", "train"] and resume[-1] == "--resume"
    step = json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]
    # The printed command continues the run (stopped 2 updates later here).
    assert main([*resume[1:], "--max-steps", str(step + 2)]) == 0
    assert json.loads((out / "results.json").read_text())["global_step"] == step + 2


def test_ctrl_c_in_the_example_script_prints_its_resume_command(tmp_path):
    """examples/train_lm.py, interrupted, names its checkpoint and its own --resume command; exit 130."""
    script = Path(__file__).parents[2] / "examples" / "train_lm.py"
    corpus = tmp_path / "train.txt"
    corpus.write_text("the cat sat on the mat\nthe dog sat on the log\na cat saw a dog\n" * 200)
    out = tmp_path / "run"
    err, _ = interrupt_training([sys.executable, str(script), "--train-file", str(corpus),
                                 "--output-dir", str(out), *TINY_TRAIN], out)
    command = next(line for line in err.splitlines() if line.startswith("continue with: "))
    resume = shlex.split(command.removeprefix("continue with: "))
    assert resume[:2] == ["python", str(script)] and resume[-1] == "--resume" and str(out) in resume


@pytest.mark.parametrize(("command", "said"), [
    (["build-tree"], "build-tree does not resume a stage"),
    (["train", "--model", "hlbl", "--tree-mode", "balanced"],
     "(random_tree) does not resume: run the command again"),
], ids=["build-tree", "train --tree-mode"])
def test_ctrl_c_in_the_first_stage_of_a_data_built_tree_exits_130_and_says_it_starts_over(
        command, said, tmp_path, monkeypatch, capsys):
    from hf_nlm.training.trainer import LMTrainer

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(LMTrainer, "train", interrupted)
    corpus = tmp_path / "train.txt"
    corpus.write_text("the cat sat on the mat\nthe dog sat on the log\n" * 20)
    code = main([*command, "--train-file", str(corpus), "--output-dir", str(tmp_path / "run"),
                 "--context-size", "2", "--embedding-size", "4", "--no-progress-bar"])
    assert code == 130
    err = capsys.readouterr().err
    assert "nothing to resume" in err and said in err and "Traceback" not in err


# ----------------------------------------------------------------------------- saved generation settings


@pytest.mark.parametrize(("name", "value", "least"), [("num_beams", -3, 1), ("top_k", -2, 0),
                                                      ("no_repeat_ngram_size", -1, 0), ("num_beams", 2.5, 1)])
def test_a_saved_generation_count_out_of_range_is_named_with_its_file(run_copy, capsys, name, value, least):
    path = run_copy / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), name: value}))
    model = AutoModelForCausalLM.from_pretrained(run_copy)
    ids = torch.tensor([[3, 4]])
    with pytest.raises(ValueError) as err:
        model.generate(ids)
    assert str(err.value) == (f"generate(): {name} must be an integer >= {least}, got {value!r} (in the "
                              "model's generation_config: generation_config.json of a saved model)")
    with pytest.raises(SystemExit):
        main(["generate", str(run_copy), "the cat"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"hf-nlm generate: error: {run_copy}/generation_config.json: {name} must be an integer >= {least}, "
        f"got {value!r}; fix the file, or give --{name.replace('_', '-')}")


def test_a_call_or_flag_overrides_a_bad_saved_count(run_copy, tmp_path, capsys):
    path = run_copy / "generation_config.json"
    saved = json.loads(path.read_text())
    sound = Path(shutil.copytree(run_copy, tmp_path / "sound"))
    (sound / "generation_config.json").write_text(json.dumps({**saved, "num_beams": 2}))
    path.write_text(json.dumps({**saved, "num_beams": -3}))
    ids = torch.tensor([[3, 4]])
    # Against a model that saved num_beams 2: the keyword replaces the file's -3.
    asked = AutoModelForCausalLM.from_pretrained(run_copy).generate(ids, num_beams=2, max_new_tokens=4)
    assert torch.equal(asked, AutoModelForCausalLM.from_pretrained(sound).generate(ids, max_new_tokens=4))
    assert main(["generate", str(run_copy), "the cat", "--num-beams", "2"]) == 0


def test_settings_that_leave_no_token_to_write_are_refused_not_filled_with_unk(run_copy, capsys):
    """No repeated word and more new words than the vocabulary holds: at the step where every word is used,
    every score is -inf, and generate() says so instead of writing the suppressed <unk>."""
    from transformers import AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(run_copy)
    tokenizer = AutoTokenizer.from_pretrained(run_copy)
    vocabulary = len(tokenizer)
    ids = tokenizer("the cat", return_tensors="pt", add_special_tokens=False).input_ids
    # Enough room: as many new tokens as there are words besides <unk>, <eos> and the two of the prompt.
    fits = model.generate(ids, no_repeat_ngram_size=1, max_new_tokens=3, min_new_tokens=3)
    assert fits.shape[1] == ids.shape[1] + 3
    with pytest.raises(ValueError) as err:
        model.generate(ids, no_repeat_ngram_size=1, min_new_tokens=vocabulary + 5,
                       max_new_tokens=vocabulary + 10)
    assert "the settings rule out every token of the vocabulary" in str(err.value)
    assert "no_repeat_ngram_size=1" in str(err.value) and f"min_new_tokens={vocabulary + 5}" in str(err.value)
    with pytest.raises(SystemExit):
        main(["generate", str(run_copy), "the cat", "--no-repeat-ngram-size", "1",
              "--min-new-tokens", str(vocabulary + 5), "--max-new-tokens", str(vocabulary + 10)])
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith("hf-nlm generate: error: at new token ")
    assert "rule out every token of the vocabulary (--no-repeat-ngram-size=1" in line


def test_the_check_leaves_a_generation_unchanged(run_copy):
    """The same tokens with and without the check, greedy and beam search (against transformers' own loop
    run with the check's processor class stubbed out)."""
    import hf_nlm.modeling_utils as modeling_utils

    model = AutoModelForCausalLM.from_pretrained(run_copy)
    ids = torch.tensor([[3, 4]])
    checked = [model.generate(ids, max_new_tokens=6), model.generate(ids, max_new_tokens=6, num_beams=3)]

    class Unchecked(modeling_utils.NoTokenLeftCheck):
        def __call__(self, input_ids, scores):
            return scores

    original = modeling_utils.NoTokenLeftCheck
    modeling_utils.NoTokenLeftCheck = Unchecked
    try:
        plain = [model.generate(ids, max_new_tokens=6), model.generate(ids, max_new_tokens=6, num_beams=3)]
    finally:
        modeling_utils.NoTokenLeftCheck = original
    for a, b in zip(checked, plain, strict=True):
        assert torch.equal(a, b)
