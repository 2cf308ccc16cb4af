"""Data files that would be read as something they are not: a table given as plain text, a CSV record whose
quote never closes, a split of blank lines. Each is refused naming the file (and line), with the fix."""

from __future__ import annotations

import pytest
from bad_input_helpers import cli_error

from hf_nlm.data import load_csv_files
from hf_nlm.evaluation import evaluate_lm
from hf_nlm.training import DataSpec, load_run

TABLE = "id,text,label\n1,the cat sat,0\n2,a dog ran,1\n"


@pytest.mark.parametrize("files, said", [
    ({"train.csv": TABLE, "valid.txt": "the cat sat\n"}, "is a CSV file but"),
    ({"train.txt": TABLE}, "looks like a CSV file (its first line, 'id,text,label', reads as a header)"),
    ({"train.tsv": TABLE.replace(",", "\t")}, "is a tab-separated table"),
    ({"train.dat": TABLE.replace(",", "\t")}, "is a tab-separated table"),
])
def test_a_table_read_as_lines_is_refused(tmp_path, capsys, files, said):
    paths = []
    for name, text in files.items():
        paths.append(tmp_path / name)
        paths[-1].write_text(text, encoding="utf-8")
    split_files = {"train_file": str(paths[0]), "validation_file": str(paths[1]) if len(paths) > 1 else None}
    with pytest.raises(ValueError, match="--corpus text") as info:
        DataSpec(**split_files).load()
    assert f"--train-file {paths[0]} " in str(info.value) and said in str(info.value)
    argv = ["train", "--train-file", str(paths[0]), "--output-dir", str(tmp_path / "out"),
            *(["--validation-file", str(paths[1])] if len(paths) > 1 else [])]
    assert said in cli_error(argv, capsys)
    # Said outright, the corpus reads the file as asked: every line as text, or the CSV's records.
    lines = DataSpec(corpus="text", **split_files).load()["train"]["text"]
    assert lines[0] == files[paths[0].name].splitlines()[0]


def test_a_header_read_as_csv_gives_the_records(tmp_path):
    (tmp_path / "train.txt").write_text(TABLE, encoding="utf-8")
    rows = DataSpec(corpus="csv", train_file=str(tmp_path / "train.txt")).load()["train"]
    assert rows["text"] == ["the cat sat", "a dog ran"]


def test_plain_text_with_commas_is_read_as_lines(tmp_path):
    text = "the cat, the dog and the bird sat\nthen, at last, it rained\n"
    (tmp_path / "train.txt").write_text(text, encoding="utf-8")
    assert DataSpec(train_file=str(tmp_path / "train.txt")).load()["train"]["text"] == text.splitlines()


@pytest.mark.parametrize("records, ends", [
    ('1,"the cat sat,0\n2,a dog ran,1\n3,"a bird",0\n', "at line 4"),  # closes at the next record's quote
    ('1,"the cat sat,0\n2,a dog ran,1\n', "the file ends inside it"),
])
def test_an_unclosed_quote_names_the_line_where_it_opens(tmp_path, records, ends):
    path = tmp_path / "train.csv"
    path.write_text("id,text,label\n" + records, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_csv_files(train=path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 2: a quoted field opens on this line") and ends in message


def test_quoted_fields_over_several_lines_still_read(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('id,text,label\n1,"the cat\nsat",0\n2,"she said ""hi""",1\n', encoding="utf-8")
    assert load_csv_files(train=path)["train"]["text"] == ["the cat\nsat", 'she said "hi"']


def test_a_split_of_blank_lines_is_refused(tiny_run, tmp_path, capsys):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n  \n\n", encoding="utf-8")
    said = f"--test-file {blank} holds only 4 blank line(s): there is no text to train on or to score"
    assert said in cli_error(["evaluate", str(tiny_run), "--test-file", str(blank)], capsys)
    model, tokenizer = load_run(tiny_run)
    with pytest.raises(ValueError, match="the split holds only 4 blank line"):
        evaluate_lm(model, ["", "", "  ", ""], tokenizer)
    # training refuses it the same way, as a validation split too
    train = tiny_run.parent / "train.txt"
    argv = ["train", "--train-file", str(train), "--validation-file", str(blank), "--output-dir",
            str(tmp_path / "out")]
    assert f"--validation-file {blank} holds only 4 blank line(s)" in cli_error(argv, capsys)
