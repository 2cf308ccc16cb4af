"""Every ``hf-nlm`` command of README.md states its time on 2 cores, every training command has a budget (a
time the user gives, or the work of a named recipe), and
``benchmarks/readme_commands.py`` (which runs them) reads them all: the README's ``bash`` blocks, parsed
independently here line by line."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import readme_commands  # noqa: E402

from hf_nlm.models import MODEL_TYPES, model_type_of_recipe  # noqa: E402

README = (ROOT / "README.md").read_text(encoding="utf-8")


def hf_nlm_lines() -> list[str]:
    """Each line of a ``bash`` block that starts an ``hf-nlm`` command, with its continuation lines."""
    found, in_bash, current = [], False, None
    for line in README.splitlines():
        if line.startswith("```"):
            in_bash = line == "```bash"
            continue
        if not in_bash:
            continue
        if current is not None:
            current += " " + line.strip()
        elif line.startswith("hf-nlm "):
            current = line
        if current is not None and not current.endswith("\\"):
            found.append(current)
            current = None
        elif current is not None:
            current = current[:-1]
    return found


def test_the_benchmark_reads_every_readme_command():
    parsed = readme_commands.readme_commands(README)
    lines = hf_nlm_lines()
    assert len(parsed) == len(lines) >= 10
    for (argv, _), line in zip(parsed, lines, strict=True):
        assert argv == shlex.split(line.split(" #")[0])


def test_every_command_states_its_time_and_every_training_run_has_a_budget_in_work():
    """A training command stops after a set amount of work, epochs or updates (its own flag, or a named
    recipe's), never after a time, so that it prints the same numbers on any machine."""
    for argv, seconds in readme_commands.readme_commands(README):
        if argv[1] == "download":  # the network's time, not the machine's
            continue
        assert seconds is not None and seconds > 0, shlex.join(argv)
        if argv[1] != "train":
            continue
        assert "--max-time-s" not in argv, shlex.join(argv)
        if "--num-epochs" in argv or "--max-steps" in argv:
            continue
        name = argv[argv.index("--recipe") + 1]
        recipe = MODEL_TYPES[model_type_of_recipe(name)].recipe(name)
        assert "max_time_s" not in recipe.training and "num_epochs" in recipe.training, shlex.join(argv)


def test_the_stated_time_is_read_from_the_comment():
    text = ("```bash\nhf-nlm train --corpus brown --max-time-s 600 \\\n"
            "    --output-dir runs/x  # 11 min; a note 5 s\n"
            "hf-nlm generate runs/x \"we will\"  # 10 s\nhf-nlm download drop  # DROP: 7% numerals\n```\n")
    assert readme_commands.readme_commands(text) == [
        (["hf-nlm", "train", "--corpus", "brown", "--max-time-s", "600", "--output-dir", "runs/x"], 660.0),
        (["hf-nlm", "generate", "runs/x", "we will"], 10.0),
        (["hf-nlm", "download", "drop"], None),
    ]


def test_quick_runs_replace_the_readers_files_and_budgets(tmp_path):
    files = {"train.txt": tmp_path / "t.txt", "valid.txt": tmp_path / "v.txt"}
    argv = ["hf-nlm", "train", "--train-file", "train.txt", "--validation-file", "valid.txt", "--num-epochs",
            "3", "--output-dir", "runs/my-lm"]
    assert readme_commands.localised(argv, files, tmp_path, quick=True) == [
        "hf-nlm", "train", "--train-file", str(tmp_path / "t.txt"), "--validation-file",
        str(tmp_path / "v.txt"), "--output-dir", str(tmp_path / "runs/my-lm"), *readme_commands.QUICK_BUDGET,
        "--overwrite-output-dir"]
    full = readme_commands.localised(argv, files, tmp_path, quick=False)
    assert full[full.index("--num-epochs") + 1] == "3"
