"""The corpus registry (hf_nlm.data.registry) behind `hf-nlm --corpus`, `hf-nlm download` and the model cards,
a corpus added as one module, and the `hf-nlm` launcher's top-level help."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

import hf_nlm_cli
from hf_nlm import NPLMConfig
from hf_nlm.data import corpora, download, registry
from hf_nlm.data.registry import CORPORA, collect_corpora, corpus_card, corpus_entry
from hf_nlm.hub.model_card import write_model_card
from hf_nlm_cli import build_parser, main

FIXTURES = Path(__file__).parents[1] / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
TINY = ["--context-size", "2", "--embedding-size", "8", "--hidden-size", "8", "--block-size", "8",
        "--batch-size", "2", "--learning-rate", "0.5", "--no-progress-bar",
        "--early-stopping-patience", "none", "--num-epochs", "1"]


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
    assert (corpus_card("text").key == "local-files"
            and corpus_card("my-notes").description == "the corpus `my-notes`.")
    assert corpus_card(None) is None


def test_download_fetches_the_registered_corpora_with_a_fetcher():
    fetched = [name for name, entry in CORPORA.items() if entry.fetcher]
    assert list(download.CORPORA) == fetched == ["brown", "ptb", "sotu", "drop"]
    assert download.DEFAULT_CORPORA == ("brown", "ptb", "sotu")  # drop (358 MB to read) only by name
    for name in fetched:
        fetcher = CORPORA[name].fetcher
        assert callable(fetcher.fetch) and callable(fetcher.complete)
    with pytest.raises(ValueError, match="Unknown corpus 'arxiv'"):
        download.download(["arxiv"])


def test_the_corpora_are_the_modules_of_the_package_in_order():
    modules = {entry.loader.__module__ for entry in CORPORA.values()}
    assert modules == {f"hf_nlm.data.corpora.{name}" for name in
                       ("brown", "ptb", "sotu", "drop", "mimic", "arxiv", "rocstories", "text_files")}
    assert list(CORPORA) == ["brown", "ptb", "sotu", "drop", "mimic-iii", "mimic-iv", "arxiv", "rocstories",
                             "text", "csv"]
    assert all(callable(entry.loader) for entry in CORPORA.values())
    with pytest.raises(ValueError, match="unknown corpus 'wiki'; choose from brown"):
        corpus_entry("wiki")


def test_registry_loads_no_data_library():
    code = ("import sys, hf_nlm.data.registry, hf_nlm.data.download; "
            "print(sorted(m for m in ('datasets', 'pandas', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_launcher_lists_the_commands_of_the_full_parser(capsys):
    # Every command, those a module of their own parses (SEPARATE_COMMANDS) included, as a choice.
    assert list(subcommands(build_parser())) == list(hf_nlm_cli.COMMANDS)
    with pytest.raises(SystemExit) as exit_info:
        hf_nlm_cli.main(["--help"])
    assert exit_info.value.code == 0
    launcher_help = capsys.readouterr().out
    for name in hf_nlm_cli.COMMANDS:
        assert name in launcher_help
    assert listed_commands(launcher_help) == list(hf_nlm_cli.COMMANDS)
    assert listed_commands(build_parser().format_help()) == list(hf_nlm_cli.COMMANDS)


def listed_commands(help_text: str) -> list[str]:
    """The commands a help screen lists, in order (each command's first line: four spaces, then its name)."""
    section = help_text.split("positional arguments")[1].split("options:")[0]
    return [line.split()[0] for line in section.splitlines() if line.startswith("    ") and line[4:5].strip()]


def test_launcher_help_does_not_import_hf_nlm():
    code = ("import sys, hf_nlm_cli\ntry:\n    hf_nlm_cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('hf_nlm' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "False False"


def test_split_options_apply_to_hash_split_corpora_only(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("a b c\n")
    with pytest.raises(SystemExit):
        main(["train", "--train-file", str(tmp_path / "train.txt"), "--split-seed", "3",
              "--output-dir", str(tmp_path)])
    assert ("--split-seed applies to --corpus drop / mimic-iii / mimic-iv / arxiv / rocstories only, not text"
            in capsys.readouterr().err)


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


# ---------------------------------------------------------------------------------------
# A corpus added as one module: loader, fetcher, card and entry, nothing else.

#: One sentence per line; the module below puts line i in train, validation or test by i % 3.
TINY_LINES = [f"the {animal} saw {number} birds" for number in range(10) for animal in ("cat", "dog", "cow")]
TINY_MODULE = f'''
"""A corpus that exists only in a test."""

from pathlib import Path

from ..corpus import CorpusCard, CorpusEntry, Fetcher
from ..reading import data_home, read_text_file, split_lines

LINES = {TINY_LINES!r}


def load_tiny_words(path=None):
    from datasets import Dataset, DatasetDict

    folder = Path(path) if path is not None else data_home(create=False) / "tiny-words"
    lines = split_lines(read_text_file(folder / "words.txt"))
    return DatasetDict({{split: Dataset.from_dict({{"text": lines[i::3]}})
                        for i, split in enumerate(("train", "validation", "test"))}})


def _fetch(scratch, out):
    (out / "words.txt").write_text("\\n".join(LINES) + "\\n", encoding="utf-8")


CORPUS = CorpusEntry(
    "tiny-words", load_tiny_words, "the folder of words.txt",
    CorpusCard("tiny-words", "Tiny words corpus", "a corpus of 30 sentences about animals and birds.",
               hub_id="someone/tiny-words"),
    fetcher=Fetcher(_fetch, lambda folder: (folder / "words.txt").is_file()),
)
'''


@pytest.fixture
def corpus_modules(tmp_path, monkeypatch):
    """A folder of the package hf_nlm.data.corpora: a module written there is one of the package's."""
    folder = tmp_path / "corpus_modules"
    folder.mkdir()
    monkeypatch.setattr(corpora, "__path__", [*corpora.__path__, str(folder)])
    yield folder
    for name in [name for name, module in sys.modules.items()
                 if str(getattr(module, "__file__", None)).startswith(str(folder))]:
        del sys.modules[name]


@pytest.fixture
def tiny_corpus(corpus_modules, tmp_path, monkeypatch):
    """The module above, in the package, and the table of corpora collected again."""
    (corpus_modules / "tiny_words.py").write_text(TINY_MODULE, encoding="utf-8")
    monkeypatch.setenv("HF_NLM_DATA", str(tmp_path / "data_home"))
    builtin = dict(CORPORA)
    CORPORA.clear()
    CORPORA.update(collect_corpora())
    yield CORPORA["tiny-words"]
    CORPORA.clear()
    CORPORA.update(builtin)


def test_a_corpus_module_is_all_a_corpus_takes(tiny_corpus, tmp_path, capsys, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_cache")
    # Registered by its module alone, after the built-in corpora and before the local files (the default
    # order).
    assert (tiny_corpus is registry.CORPORA["tiny-words"]
            and list(CORPORA)[-3:] == ["tiny-words", "text", "csv"])
    assert "tiny-words" in choices(subcommands(build_parser())["train"], "corpus")
    assert "tiny-words" in registry.downloadable()

    # hf-nlm download fetches it into the data home, with the command's usual output and exit status.
    assert main(["download", "tiny-words"]) == 0
    folder = tmp_path / "data_home" / "tiny-words"
    assert capsys.readouterr().out == f"tiny-words: {folder}\n"
    assert (folder / "words.txt").read_text().splitlines() == TINY_LINES

    # Loading: the registry's entry calls the module's loader (the data home by default, or a path).
    corpus = CORPORA["tiny-words"].load()
    assert {split: corpus[split]["text"] for split in corpus} == {
        "train": TINY_LINES[0::3], "validation": TINY_LINES[1::3], "test": TINY_LINES[2::3]}
    assert CORPORA["tiny-words"].load(path=folder)["test"]["text"] == TINY_LINES[2::3]

    # The card text: what the module's CorpusCard says, and its Hub dataset in the metadata.
    results = {"test": {"perplexity": 12.5, "num_tokens": 50}}
    config = NPLMConfig(vocab_size=12, context_size=2, embedding_size=4, hidden_size=4)
    (tmp_path / "card").mkdir()
    card = ModelCard.load(write_model_card(tmp_path / "card", config, results=results,
                                           dataset=tiny_corpus.card))
    assert card.data.datasets == ["someone/tiny-words"]
    assert card.data.to_dict()["model-index"][0]["name"] == "nplm-tiny-words"
    assert "# NPLM language model trained on the Tiny words corpus" in card.content
    assert "Trained on a corpus of 30 sentences about animals and birds." in card.content

    # hf-nlm train --corpus tiny-words: read from the data home, the run's card says what the module says.
    out = tmp_path / "run"
    assert main(["train", "--corpus", "tiny-words", "--output-dir", str(out), *TINY]) == 0
    trained = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert trained["test"]["perplexity"] > 1
    assert json.loads((out / "results.json").read_text())["dataset"] == "tiny-words"
    run_card = ModelCard.load(out / "README.md")
    assert run_card.data.datasets == ["someone/tiny-words"]
    assert "Trained on a corpus of 30 sentences about animals and birds." in run_card.content


def test_download_command_output_and_exit_status(tiny_corpus, tmp_path, capsys):
    assert main(["download", "tiny-words", "--dest", str(tmp_path / "elsewhere")]) == 0
    assert capsys.readouterr().out == f"tiny-words: {tmp_path / 'elsewhere' / 'tiny-words'}\n"
    assert main(["download", "nope", "--dest", str(tmp_path)]) == 1
    assert capsys.readouterr().err == ("error: Unknown corpus 'nope'; choose from brown, ptb, sotu, drop, "
                                       "tiny-words.\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["download", "tiny-words", "--dest"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith("hf-nlm download: error: argument --dest: "
                                            "expected one argument\n")


def test_a_module_without_a_corpus_or_a_name_taken_twice_is_an_error(corpus_modules):
    modules = corpus_modules
    (modules / "_private_helpers.py").write_text("def shared():\n    return 1\n", encoding="utf-8")
    assert list(collect_corpora()) == list(CORPORA)  # a module named _x holds helpers, not a corpus
    (modules / "helpers.py").write_text("def shared():\n    return 1\n", encoding="utf-8")
    with pytest.raises(TypeError, match=r"helpers.py declares no CorpusEntry"):
        collect_corpora()
    (modules / "helpers.py").unlink()
    (modules / "second_brown.py").write_text(
        "from ..corpus import CorpusCard, CorpusEntry\n"
        "CORPUS = CorpusEntry('brown', print, 'a folder', CorpusCard('brown', 'Brown', 'again'))\n",
        encoding="utf-8")
    with pytest.raises(ValueError, match="two corpora are named 'brown': in hf_nlm.data.corpora.brown and "
                                         "hf_nlm.data.corpora.second_brown"):
        collect_corpora()
