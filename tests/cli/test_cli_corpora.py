"""The corpus registry (hf_nlm.data.registry) behind `hf-nlm --corpus`, `hf-nlm download` and the model cards,
and the `hf-nlm` launcher's top-level help."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

import hf_nlm_cli
from hf_nlm.cli import build_parser, main
from hf_nlm.data import download
from hf_nlm.data.registry import CORPORA, corpus_card, corpus_entry, resolve

FIXTURES = Path(__file__).parents[1] / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
TINY = ["--context-size", "2", "--embedding-size", "8", "--hidden-size", "8", "--block-size", "8", "--batch-size", "2",
        "--learning-rate", "0.5", "--no-progress-bar", "--early-stopping-patience", "none", "--num-epochs", "1"]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def choices(parser: argparse.ArgumentParser, dest: str):
    return next(a.choices for a in parser._actions if a.dest == dest)


def test_every_registered_corpus_is_offered_by_every_data_command():
    commands = subcommands(build_parser())
    for name in ("train", "build-tree", "evaluate", "predict-numbers", "check-numbers"):
        assert list(choices(commands[name], "corpus")) == list(CORPORA), name
    help_text = commands["train"].format_help()
    for name, entry in CORPORA.items():
        if not entry.split_files:
            assert f"{name}:" in help_text  # --corpus-path says what each corpus reads


def test_every_registered_corpus_has_its_card_text():
    for name, entry in CORPORA.items():
        card = corpus_card(name)
        assert card is entry.card and card.name and card.description
    assert corpus_card("text").key == "local-files" and corpus_card("my-notes").description == "the corpus `my-notes`."
    assert corpus_card(None) is None


def test_download_fetches_the_registered_corpora_with_a_fetcher():
    fetched = [name for name, entry in CORPORA.items() if entry.fetcher]
    assert list(download.CORPORA) == fetched == ["brown", "ptb", "sotu", "drop"]
    assert download.DEFAULT_CORPORA == ("brown", "ptb", "sotu")  # drop (358 MB to read) only by name
    for name in fetched:
        fetcher = resolve(CORPORA[name].fetcher)
        assert callable(fetcher.fetch) and callable(fetcher.complete)
    with pytest.raises(ValueError, match="Unknown corpus 'arxiv'"):
        download.download(["arxiv"])


def test_every_loader_reference_resolves():
    for entry in CORPORA.values():
        assert callable(resolve(entry.loader)), entry.name
    with pytest.raises(ValueError, match="unknown corpus 'wiki'; choose from brown"):
        corpus_entry("wiki")


def test_registry_loads_no_data_library():
    code = "import sys, hf_nlm.data.registry, hf_nlm.data.download; print(sorted(m for m in ('datasets', 'pandas', 'pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_launcher_lists_the_commands_of_the_full_parser(capsys):
    full = [name for name in hf_nlm_cli.COMMANDS if name not in hf_nlm_cli.SEPARATE_COMMANDS]
    assert list(subcommands(build_parser())) == full
    with pytest.raises(SystemExit) as exit_info:
        hf_nlm_cli.main(["--help"])
    assert exit_info.value.code == 0
    launcher_help = capsys.readouterr().out
    for name in hf_nlm_cli.COMMANDS:
        assert name in launcher_help
    assert listed_commands(launcher_help) == list(hf_nlm_cli.COMMANDS)
    assert listed_commands(build_parser().format_help()) == full  # the separate commands have their own parsers


def listed_commands(help_text: str) -> list[str]:
    """The commands a help screen lists, in order (each command's first line: four spaces, then its name)."""
    section = help_text.split("positional arguments")[1].split("options:")[0]
    return [line.split()[0] for line in section.splitlines() if line.startswith("    ") and line[4:5].strip()]


def test_launcher_help_does_not_import_hf_nlm():
    code = "import sys, hf_nlm_cli\ntry:\n    hf_nlm_cli.main(['--help'])\nexcept SystemExit:\n    pass\nprint('hf_nlm' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "False False"


def test_split_options_apply_to_hash_split_corpora_only(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("a b c\n")
    with pytest.raises(SystemExit):
        main(["train", "--train-file", str(tmp_path / "train.txt"), "--split-seed", "3", "--output-dir", str(tmp_path)])
    assert "--split-seed applies to --corpus drop / mimic-iii / mimic-iv / arxiv / rocstories only, not text" in capsys.readouterr().err


# The fixtures hold a few records: a seed whose hash split leaves none of the three splits empty.
@pytest.mark.parametrize(("corpus", "path", "seed"), [
    ("arxiv", FIXTURES / "arxiv", 0),
    ("mimic-iii", FIXTURES / "mimic" / "NOTEEVENTS.csv", 3),
    ("mimic-iv", FIXTURES / "mimic" / "mimic-iv-note", 5),
    ("rocstories", FIXTURES / "rocstories", 0),
    ("drop", FIXTURES / "drop", 0),
])
def test_train_on_a_registered_corpus(corpus, path, seed, tmp_path, monkeypatch, capsys):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_cache")
    out = tmp_path / "run"
    assert main(["train", "--corpus", corpus, "--corpus-path", str(path), "--output-dir", str(out), *TINY,
                 "--split-fractions", "0.4", "0.3", "0.3", "--split-seed", str(seed)]) == 0
    results = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert results["test"]["perplexity"] > 1
    assert json.loads((out / "results.json").read_text())["dataset"] == corpus
    assert CORPORA[corpus].card.name in (out / "README.md").read_text()
