"""Every file hf_nlm reads beside the weights is named in its error: each is damaged in turn (cut in half,
a JSON value of the wrong type, bytes that are not text, a NaN) and read through the library and the
command line, which must answer with one line naming the file (exit status 2, no traceback)."""

from __future__ import annotations

import gzip
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from bad_input_helpers import TEXTS, cli_error, nplm, save_folder, word_tokenizer
from transformers import AutoTokenizer

from hf_nlm import NPLMForCausalLM
from hf_nlm.data import load_csv_files
from hf_nlm.data.corpora.mimic import load_mimic_iii_notes
from hf_nlm.data.lm import tokenize_corpus
from hf_nlm.ngram import KneserNeyLM, NgramLM
from hf_nlm.tokenization import train_numeracy_tokenizer
from hf_nlm.training import load_run
from hf_nlm.trees import WordTree, balanced_tree

NOTES_HEADER = ("ROW_ID,SUBJECT_ID,HADM_ID,CHARTDATE,CHARTTIME,STORETIME,CATEGORY,DESCRIPTION,CGID,ISERROR,"
                "TEXT\n")
NOTES = NOTES_HEADER + "".join(f'{i},{i},1,2100-01-01,,,Nursing,x,,,"note {i} says the cat sat"\n'
                               for i in range(300))
CSV_TEXT = "id,text,label\n" + "".join(f'{i},"the cat sat, the dog ran",{i % 2}\n' for i in range(40))
GARBAGE = bytes(range(0xA3, 0x100)) * 4  # starts with 0xa3, which no UTF-8 text does
JSON_DAMAGES = ("truncated", "wrong type", "garbage", "NaN")
TEXT_DAMAGES = ("truncated", "wrong type", "garbage")
MODEL_FILES = ("config.json", "generation_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

JSON_FILES = (*MODEL_FILES, *TOKENIZER_FILES, "numeracy/tokenizer.json", "kneser-ney-3gram/ngram.json",
              "word_tree.json")
CASES = [(name, damage) for name in JSON_FILES for damage in JSON_DAMAGES]
CASES += [("kneser-ney-3gram/ngram.npz", damage) for damage in JSON_DAMAGES]
CASES += [(name, damage) for name in ("NOTEEVENTS.csv.gz", "train.csv") for damage in TEXT_DAMAGES]


@pytest.fixture(scope="module")
def intact(tmp_path_factory) -> Path:
    """One folder holding every kind of file, intact: a saved NPLM and its tokenizer with a Kneser-Ney model
    beside it (as a run folder holds one), a numeracy tokenizer, a word tree, a gzipped MIMIC-III notes file
    and a CSV corpus file."""
    root = tmp_path_factory.mktemp("intact")
    tokenizer = word_tokenizer()
    save_folder(root, nplm(tokenizer), tokenizer)
    KneserNeyLM(3, len(tokenizer), tokenizer.eos_token_id).fit(
        tokenize_corpus(TEXTS, tokenizer)[0].numpy()).save(root / "kneser-ney-3gram")
    train_numeracy_tokenizer(["it cost 12 dollars", "3 cats sat"]).save_pretrained(root / "numeracy")
    balanced_tree(len(tokenizer)).save(root / "word_tree.json")
    (root / "NOTEEVENTS.csv.gz").write_bytes(gzip.compress(NOTES.encode("utf-8")))
    (root / "train.csv").write_text(CSV_TEXT, encoding="utf-8")
    (root / "test.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return root


def damage(path: Path, how: str) -> None:
    """Damage ``path`` as ``how`` says; "wrong type" is a well-formed file of the wrong content."""
    data = path.read_bytes()
    if how == "truncated":  # a few bytes short of the half: inside a CSV field (cut at a field's end, a CSV
        path.write_bytes(data[: len(data) // 2 - 7])  # file reads as a shorter complete one)
    elif how == "garbage":
        path.write_bytes(GARBAGE)
    elif path.suffix == ".npz":
        if how == "wrong type":  # an .npz archive, but of other tables
            np.savez(path, counts=np.arange(3))
        else:
            with np.load(path) as saved:
                tables = {key: saved[key] for key in saved.files}
            tables["unigram_logp"][1] = math.nan
            np.savez(path, **tables)
    elif path.suffix == ".json":
        path.write_text("[1, 2]" if how == "wrong type" else json.dumps({**json.loads(data), "x": math.nan}))
    elif path.suffix == ".gz":  # a gzip file of something else than the notes table
        path.write_bytes(gzip.compress(b'{"notes": []}\n'))
    else:  # a CSV corpus: a JSON file given in its place
        path.write_text('{"text": ["the cat sat"]}\n', encoding="utf-8")


def library_error(folder: Path, name: str, tmp_path: Path) -> str:
    """The message of the library's loader of the file ``name`` in ``folder`` (which must refuse it)."""
    path = folder / name
    with pytest.raises(ValueError) as info:
        if name in TOKENIZER_FILES:
            if name != "tokenizer_config.json":  # AutoTokenizer reads that one itself, to find our class
                with pytest.raises(ValueError, match=re.escape(str(path))):  # which names the file
                    AutoTokenizer.from_pretrained(folder)
            load_run(folder)
        elif name in MODEL_FILES:
            load_run(folder)
        elif name.startswith("numeracy/"):
            AutoTokenizer.from_pretrained(path.parent)  # our tokenizer class: the file named there too
        elif name.endswith(("ngram.json", "ngram.npz")):
            NgramLM.load(path.parent)
        elif name == "word_tree.json":
            WordTree.load(path)
        elif name.endswith(".gz"):
            load_mimic_iii_notes(path, cache_dir=tmp_path / "cache")
        else:
            load_csv_files(train=path)
    return str(info.value)


def command_line_errors(folder: Path, name: str, tmp_path: Path, capsys) -> list[str]:
    """The error lines of the ``hf-nlm`` commands that read the file ``name`` in ``folder``."""
    path, out = folder / name, str(tmp_path / "out")
    if name in MODEL_FILES + TOKENIZER_FILES:
        commands = [["generate", str(folder), "the cat"],
                    ["evaluate", str(folder), "--test-file", str(folder / "test.txt")]]
    elif name == "word_tree.json":
        commands = [["train", "--model", "hlbl", "--tree-file", str(path), "--train-file",
                     str(folder / "test.txt"), "--output-dir", out, "--min-frequency", "1"]]
    elif name.endswith(".gz"):
        commands = [["train", "--corpus", "mimic-iii", "--corpus-path", str(path), "--output-dir", out]]
    elif name == "train.csv":
        commands = [["train", "--train-file", str(path), "--output-dir", out]]
    else:
        return []  # the n-gram files and a numeracy tokenizer alone are read by the library (and hf-nlm app)
    return [cli_error(argv, capsys).strip().splitlines()[-1] for argv in commands]


@pytest.mark.parametrize("name, how", CASES)
def test_a_damaged_file_is_named_in_one_line(intact, tmp_path, capsys, monkeypatch, name, how):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    folder = Path(shutil.copytree(intact, tmp_path / "folder"))
    path = folder / name
    damage(path, how)
    message = library_error(folder, name, tmp_path)
    assert str(path) in message and "\n" not in message, message
    if name in TOKENIZER_FILES:  # the tokenizer is blamed, never the model
        assert f"cannot load the tokenizer in {folder}" in message and "model" not in message.split(":")[0]
    if name in MODEL_FILES:
        with pytest.raises(ValueError, match="config.json"):
            NPLMForCausalLM.from_pretrained(folder)
    for line in command_line_errors(folder, name, tmp_path, capsys):
        assert str(path) in line and ": error: " in line, line
    if name == "word_tree.json":
        assert "--tree-file" in line
