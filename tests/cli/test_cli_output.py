"""What `hf-nlm` tells its user: the account of a training run on stderr (with or without the progress bar),
short usage errors, whole help texts, generated text, and the permissions of the files a run saves."""

from __future__ import annotations

import io
import json
import os
import random
import re
import sys

import pytest
import torch

from hf_nlm.training.run_folder import read_jsonl
from hf_nlm_cli import main

TINY = ["--context-size", "2", "--embedding-size", "8", "--hidden-size", "8", "--block-size", "8",
        "--batch-size", "4", "--learning-rate", "0.5", "--no-progress-bar",
        "--early-stopping-patience", "none"]


def write_corpus(folder):
    rng = random.Random(1)
    words = ["the", "cat", "a", "dog", "sat", "on", "mat", "saw", "log"]
    files = {}
    for split, n in [("train", 60), ("valid", 12), ("test", 12)]:
        files[split] = folder / f"{split}.txt"
        files[split].write_text("".join(" ".join(rng.choices(words, k=5)) + "\n" for _ in range(n)))
    return files


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A two-epoch run with --no-progress-bar: its folder and what it printed."""
    folder = tmp_path_factory.mktemp("output")
    files = write_corpus(folder)
    out = folder / "run"
    capture = pytest.MonkeyPatch()
    err, stdout = io.StringIO(), io.StringIO()
    capture.setattr(sys, "stderr", err)
    capture.setattr(sys, "stdout", stdout)
    try:
        status = main(["train", "--train-file", str(files["train"]), "--validation-file", str(files["valid"]),
                       "--test-file", str(files["test"]), "--output-dir", str(out), "--num-epochs", "2",
                       *TINY])
    finally:
        capture.undo()
    assert status == 0
    return out, files, stdout.getvalue(), err.getvalue()


def test_train_prints_a_summary_and_each_epoch_without_the_progress_bar(run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, files, stdout, err = run
    results = json.loads((out / "results.json").read_text())
    # stdout: the one JSON line of results, as before
    assert json.loads(stdout) == {k: results[k]
                                  for k in ("validation", "test", "best_val_ppl", "stop_reason",
                                            "ngram_baseline")}
    lines = err.splitlines()
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    train_lines = len(files["train"].read_text().splitlines())
    assert f"corpus: train {train_lines} lines, {results['train']['num_tokens']:,} tokens; " \
           f"validation 12 lines, {results['validation']['num_tokens']} tokens; test 12 lines" in lines
    unk = 100 * results["train"]["num_unk"] / results["train"]["num_tokens"]
    assert f"vocabulary: {len(tokenizer):,} tokens; <unk> is {unk:.2f}% of the training tokens" in lines
    assert f"model: nplm, {model.num_parameters():,} parameters" in lines
    assert model.num_parameters() == results["num_parameters"]
    assert any(re.fullmatch(r"device: cpu, \d+ torch threads( of the \d+ cores .*)?", line) for line in lines)
    epochs = [r for r in read_jsonl(out / "log.jsonl") if r["type"] == "epoch"]
    assert len(epochs) == 2
    steps = epochs[0]["global_step"]
    for r in epochs:
        said = [line for line in lines if line.startswith(f"epoch {r['epoch'] + 1}/2: ")]
        assert len(said) == 1
        assert f": {steps} steps, train loss {r['train_loss']:.4f} (ppl {r['train_ppl']:.2f}), " in said[0]
        assert f"validation after epoch {r['epoch'] + 1}: ppl {r['val_ppl']:.2f} " \
               f"(best so far {r['best_val_ppl']:.2f})" in lines
    assert f"(best so far {results['best_val_ppl']:.2f})" in lines[-2]
    kn5 = results["ngram_baseline"]["validation"]["perplexity"]
    assert lines[-1].startswith(f"validation perplexity {results['validation']['perplexity']:.1f} "
                                f"(Kneser-Ney 5-gram on the same split: {kn5:.1f}")


def test_saved_weights_have_the_permissions_of_the_other_files(run):
    out = run[0]
    for folder in (out, out / "best_model"):
        assert ((folder / "model.safetensors").stat().st_mode & 0o777
                == (folder / "config.json").stat().st_mode & 0o777)
    expected = 0o666 & ~_umask()
    assert (out / "model.safetensors").stat().st_mode & 0o777 == expected


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("argv, message", [
    (["train", "--output-dir", "x", "--train-file", "no/such/file.txt"], "no such file"),
    (["train", "--output-dir", "x", "--model", "no-such-model"], "invalid choice"),
    (["generate"], "the following arguments are required"),
    ([], "the following arguments are required"),
])
def test_an_error_names_the_help_not_the_usage(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv) if argv else __import__("hf_nlm_cli").main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert not any(line.startswith("usage:") for line in err.splitlines())
    command = f"hf-nlm {argv[0]}" if argv else "hf-nlm"
    hint, error = err.splitlines()
    assert hint == f"({command} --help for the options)"
    assert error.startswith(f"{command}: error: ") and message in error


def test_model_flag_help_keeps_abbreviations_whole():
    from hf_nlm_cli import build_parser

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    helps = {action.dest: action.help for action in train._actions}
    # "(Luong et al. sec. 3.1), turned into weights ...": not cut after "et al." or "sec."
    assert "Luong et al. sec. 3.1), turned into weights" in helps["attention"]
    assert "Luong et al. sec. 3.3: the previous attentional vector" in helps["input_feeding"]
    assert ("i.e. the embedding size" in helps["hidden_size"]
            or "i.e. the embedding size" in helps["embedding_size"])


def test_generated_text_starts_with_its_first_word(run, capsys):
    out = run[0]
    capsys.readouterr()
    assert main(["generate", str(out), "the cat", "--max-new-tokens", "4", "--do-sample", "--seed", "0",
                 "--num-return-sequences", "4", "--json"]) == 0
    generations = json.loads(capsys.readouterr().out)["generations"]
    assert any(generations) and all(text == text.lstrip() for text in generations)
    assert main(["generate", str(out), "the cat", "--max-new-tokens", "4", "--do-sample", "--seed", "0",
                 "--num-return-sequences", "4"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown == [f"the cat {text}".strip() for text in generations]
    assert all("  " not in line for line in shown)


def test_decode_generated_drops_the_leading_space_of_a_continuation(run):
    from transformers import AutoTokenizer

    from hf_nlm.evaluation import decode_generated

    tokenizer = AutoTokenizer.from_pretrained(run[0])
    ids = tokenizer("the cat sat on the mat", add_special_tokens=False, return_tensors="pt").input_ids[0]
    assert decode_generated(tokenizer, ids[2:]) == "sat on the mat"


def test_plot_numerals_names_the_flag(tmp_path, capsys):
    from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM
    from hf_nlm.tokenization import train_numeracy_tokenizer

    texts = ["in 1990 the deficit was 3.5 billion dollars , up 12 % .",
             "we spent 3.5 billion on 7 programs ."] * 5
    tokenizer = train_numeracy_tokenizer(texts, max_vocab_size=24)
    torch.manual_seed(0)
    model = NumeracyLMForCausalLM(NumeracyLMConfig(vocab_size=len(tokenizer), embedding_size=8, hidden_size=8,
                                                   numeral_strategy="mog",
                                                   numeral_vocab=tokenizer.numeral_vocab, mog_components=2))
    model.save_pretrained(tmp_path / "mog")
    tokenizer.save_pretrained(tmp_path / "mog")
    with pytest.raises(SystemExit) as exit_info:
        main(["plot-numerals", str(tmp_path / "mog"), "--output", str(tmp_path / "n.png")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "use --which input" in err and "which='input'" not in err


def test_plot_numerals_surprisal_along_a_text(tmp_path, capsys):
    """``--surprisal-along`` draws the text with its numerals coloured by surprisal; the rows drawn are
    find_unlikely_numbers' rows; two pictures asked at once are refused."""
    from hf_nlm.evaluation import find_unlikely_numbers
    from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM
    from hf_nlm.plots.numerals import plot_numeral_surprisal
    from hf_nlm.tokenization import train_numeracy_tokenizer

    texts = ["in 1990 the deficit was 3.5 billion dollars , up 12 % .",
             "we spent 3.5 billion on 7 programs ."] * 5
    tokenizer = train_numeracy_tokenizer(texts, max_vocab_size=24)
    torch.manual_seed(0)
    model = NumeracyLMForCausalLM(NumeracyLMConfig(vocab_size=len(tokenizer), embedding_size=8, hidden_size=8,
                                                   numeral_strategy="dexp",
                                                   numeral_vocab=tokenizer.numeral_vocab))
    model.save_pretrained(tmp_path / "dexp")
    tokenizer.save_pretrained(tmp_path / "dexp")
    text = "in 1991 the deficit was 4.25 billion dollars , up 13 % ."
    rows = plot_numeral_surprisal(model, tokenizer, text, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000
    assert rows == find_unlikely_numbers(model, tokenizer, [text])
    assert [row["numeral"] for row in rows] == ["1991", "4.25", "13"]
    assert main(["plot-numerals", str(tmp_path / "dexp"), "--surprisal-along", text]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "dexp" / "numeral_surprisal.png")
    assert (tmp_path / "dexp" / "numeral_surprisal.png").stat().st_size > 1000
    with pytest.raises(SystemExit) as exit_info:
        main(["plot-numerals", str(tmp_path / "dexp"), "--surprisal-along", text, "--weights-along", text])
    assert exit_info.value.code == 2
    assert "--weights-along and --surprisal-along draw different pictures" in capsys.readouterr().err
