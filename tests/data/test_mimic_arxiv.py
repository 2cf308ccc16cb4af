"""Streaming loaders for MIMIC-III / MIMIC-IV notes and arXiv abstracts.

The fixtures under tests/fixtures/mimic and tests/fixtures/arxiv follow the official file
formats but every record in them is invented (no real patient or paper). Larger inputs are
generated into tmp_path.
"""

from __future__ import annotations

import csv
import gzip
import json
import logging
import random
import shutil
import tracemalloc
from pathlib import Path

import pytest

from hf_nlm.data import (
    CorpusFormatError,
    EmptySplitError,
    load_arxiv_abstracts,
    load_mimic_iii_notes,
    load_mimic_iv_notes,
    loader_counts,
    replace_mimic_iii_deid,
    replace_mimic_iv_deid,
)
from hf_nlm.data.splits import hash_unit, split_index

FIXTURES = Path(__file__).parents[1] / "fixtures"
MIMIC_III = FIXTURES / "mimic" / "NOTEEVENTS.csv"
MIMIC_IV = FIXTURES / "mimic" / "mimic-iv-note"
ARXIV = FIXTURES / "arxiv" / "arxiv-metadata-oai-snapshot.json"
III_HEADER = ["ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "STORETIME", "CATEGORY",
              "DESCRIPTION", "CGID", "ISERROR", "TEXT"]
III_HEADER_LINE = ",".join(III_HEADER) + "\n"


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "hf_cache"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_NLM_DATA", str(tmp_path / "empty_data_home"))


def rows_of(corpus) -> dict[str, list[dict]]:
    return {split: list(corpus[split]) for split in corpus}


def write_iii(path: Path, records: list[list], newline: str = "\n") -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator=newline)
        writer.writerow(III_HEADER)
        writer.writerows(records)
    return path


def iii_record(row_id: int, subject: int, text: str, category: str = "Nursing", iserror: str = "") -> list:
    return [row_id, subject, 100000 + subject, "2150-01-01", "", "", category, "Report", "", iserror, text]


def many_notes(n_subjects: int, notes_each: int) -> list[list]:
    records, row_id = [], 1
    for subject in range(1, n_subjects + 1):
        for k in range(notes_each):
            text = (f"Note {k} of patient [**Known lastname {subject}**]:\n"
                    f"BP {100 + k}/{60 + k}, HR {70 + subject % 30}.")
            records.append(iii_record(row_id, subject, text))
            row_id += 1
    return records


# ---------------------------------------------------------------------------------------
# MIMIC-III


def test_mimic_iii_rows_columns_and_counts(cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="hf_nlm.data.corpora.mimic"):
        corpus = load_mimic_iii_notes(MIMIC_III, split_fractions=(0.6, 0.2, 0.2), seed=4, cache_dir=cache)
    assert list(corpus) == ["train", "validation", "test"]
    assert corpus["train"].column_names == [
        "text", "row_id", "subject_id", "hadm_id", "chartdate", "charttime", "category", "description"]
    rows = rows_of(corpus)
    by_id = {r["row_id"]: r for split in rows.values() for r in split}
    # 104 has ISERROR=1, 106 is blank: both left out, and counted.
    assert sorted(by_id) == [101, 102, 103, 105, 107, 108]
    counts = loader_counts(corpus)
    assert counts["records"] == 8
    assert counts["left_out"] == {"empty": 1, "iserror": 1}
    assert {s: c["rows"] for s, c in counts["splits"].items()} == {"train": 3, "validation": 2, "test": 1}
    assert loader_counts(corpus["test"]) == counts
    assert "1 iserror" in corpus["train"].info.description and "1 empty" in corpus["train"].info.description
    assert any("1 iserror" in r.message for r in caplog.records)
    # Multi-line quoted TEXT intact, "" unescaped, placeholders mapped.
    assert by_id[101]["text"] == (
        "Admission Date:  <deid_date>     Discharge Date:  <deid_date>\n\nService: MEDICINE\n\n"
        "HISTORY: Mr. <deid_name> is a 67 yo man seen by Dr. <deid_name> <deid_name> at <deid>.\n"
        'He took 2 tabs of 325 mg aspirin, "as needed", twice daily.\n'
        "Labs: Na 138, K 4.2, Cr 1.1, WBC 12.3; BP 142/88, HR 96."
    )
    assert by_id[103]["text"].startswith("<deid_date> 10:00 AM\n CHEST")
    assert by_id[103]["hadm_id"] is None and by_id[101]["charttime"] is None
    assert by_id[107]["category"] == "Physician"  # trailing space of the file stripped
    assert by_id[102]["text"] == "Pt resting, SpO2 97% on 2L NC. Called <deid> on <deid_date>."
    # Patients never cross splits.
    subjects = {s: {r["subject_id"] for r in rs} for s, rs in rows.items()}
    assert not (subjects["train"] & subjects["validation"] or subjects["train"] & subjects["test"]
                or subjects["validation"] & subjects["test"])


def test_mimic_iii_keep_deid_and_gzip(tmp_path: Path, cache: Path) -> None:
    gz = tmp_path / "NOTEEVENTS.csv.gz"
    gz.write_bytes(gzip.compress(MIMIC_III.read_bytes()))
    corpus = load_mimic_iii_notes(tmp_path, split_fractions=(1, 0, 0), replace_deid=False, cache_dir=cache)
    assert len(corpus["validation"]) == len(corpus["test"]) == 0  # fraction 0: empty, no error
    texts = corpus["train"]["text"]
    assert len(texts) == 6 and "[**Known lastname 4711**]" in texts[0]


def test_deid_mapping() -> None:
    assert (replace_mimic_iii_deid("[**2101-10-20**] [**10-20**] [**2101**] [**Month (only) 3**] "
                                   "[**Year (4 digits) **] [**Date range (1) 7**]")
            == " ".join(["<deid_date>"] * 6))
    assert (replace_mimic_iii_deid("[**Known lastname 1**] [**First Name8 (NamePattern2) **] "
                                   "[**Name (NI) 2**] [**Doctor First Name 3**] "
                                   "[**Initials (NamePattern4) **]")
            == " ".join(["<deid_name>"] * 5))
    assert replace_mimic_iii_deid("[**Hospital1 18**] [**Hospital Ward Name 5**] [**Telephone/Fax (1) 9**] "
                                  "[**Age over 90 **] [** **]") == " ".join(["<deid>"] * 5)
    assert replace_mimic_iii_deid("at[**Location (un) 1**], [**unclosed") == "at<deid>, [**unclosed"
    assert (replace_mimic_iv_deid("Name: ___ Unit: ___. Sign: ______ or ____")
            == "Name: <deid> Unit: <deid>. Sign: ______ or ____")


def test_mimic_iii_categories(cache: Path) -> None:
    corpus = load_mimic_iii_notes(MIMIC_III, categories=(c for c in ["discharge SUMMARY", " physician"]),
                                  split_fractions=(1, 0, 0), cache_dir=cache)
    assert sorted(corpus["train"]["row_id"]) == [101, 107, 108]
    assert loader_counts(corpus)["left_out"] == {"empty": 1, "iserror": 1, "other_category": 3}
    assert loader_counts(corpus)["categories"] == [" physician", "discharge SUMMARY"]
    with pytest.raises(ValueError, match=r"'nursing notes' never occur in .*NOTEEVENTS.csv.*'Nursing/other'"):
        load_mimic_iii_notes(MIMIC_III, categories=["Nursing notes", "ECG"], cache_dir=cache)


def test_patient_disjoint_splits_and_fractions(tmp_path: Path, cache: Path) -> None:
    records = many_notes(1500, 3)
    path = write_iii(tmp_path / "NOTEEVENTS.csv", records)
    corpus = load_mimic_iii_notes(path, split_fractions=(0.7, 0.2, 0.1), seed=3, cache_dir=cache)
    subjects = {s: set(corpus[s]["subject_id"]) for s in corpus}
    assert sum(len(s) for s in subjects.values()) == 1500
    assert len(set.union(*subjects.values())) == 1500  # no subject in two splits
    for split, fraction in zip(corpus, (0.7, 0.2, 0.1), strict=True):
        assert abs(len(subjects[split]) / 1500 - fraction) < 0.04
        assert len(corpus[split]) == 3 * len(subjects[split])  # all of a patient's notes together
    # The same split as the hash says, patient by patient.
    for split_number, split in enumerate(corpus):
        for subject in list(subjects[split])[:50]:
            assert split_index(hash_unit(str(subject), 3), (0.7, 0.2, 0.1)) == split_number


def test_split_is_deterministic_and_order_free(tmp_path: Path, cache: Path) -> None:
    records = many_notes(300, 2)
    first = load_mimic_iii_notes(write_iii(tmp_path / "a.csv", records), seed=1, cache_dir=cache)
    again = load_mimic_iii_notes(write_iii(tmp_path / "b.csv", records), seed=1, cache_dir=cache)
    shuffled = records[:]
    random.Random(5).shuffle(shuffled)
    # A shuffled file, with other notes added (a bigger file): the patients keep their splits.
    extra = [iii_record(10_000 + i, 5000 + i, f"Extra note {i}.") for i in range(100)]
    other = load_mimic_iii_notes(write_iii(tmp_path / "c.csv", shuffled + extra, newline="\r\n"), seed=1,
                                 cache_dir=cache)
    for split in first:
        assert first[split]["row_id"] == again[split]["row_id"]
        assert first[split]["text"] == again[split]["text"]
        assert sorted(first[split]["row_id"]) == sorted(r for r in other[split]["row_id"] if r < 10_000)
    reseeded = load_mimic_iii_notes(tmp_path / "a.csv", seed=2, cache_dir=cache)
    assert set(reseeded["test"]["subject_id"]) != set(first["test"]["subject_id"])


def test_changed_file_is_read_again(tmp_path: Path, cache: Path) -> None:
    path = write_iii(tmp_path / "NOTEEVENTS.csv", [iii_record(1, 1, "Old note 1.")])
    assert (load_mimic_iii_notes(path, split_fractions=(1, 0, 0), cache_dir=cache)["train"]["text"]
            == ["Old note 1."])
    write_iii(path, [iii_record(1, 1, "New note, 22 mg.")])
    assert load_mimic_iii_notes(path, split_fractions=(1, 0, 0), cache_dir=cache)["train"]["text"] == [
        "New note, 22 mg."]


def test_streaming_memory_stays_far_below_file_size(tmp_path: Path, cache: Path) -> None:
    """Peak Python memory while loading is a batch of notes: far below the file size, and not
    growing with it (a loader that read the whole file would need at least the file's size)."""
    filler = "Vitals stable; 2 L NC, SpO2 96%, UOP 40 mL/h. " * 50
    peaks, sizes = [], []
    for n in (1000, 3000):
        records = [iii_record(i, i % 4000, f"Note {i}: {filler}\nPlan: day {i % 14} of 14.")
                   for i in range(n)]
        path = write_iii(tmp_path / f"NOTEEVENTS-{n}.csv", records)
        del records
        tracemalloc.start()
        try:
            corpus = load_mimic_iii_notes(path, cache_dir=cache, writer_batch_size=100)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert sum(len(corpus[s]) for s in corpus) == n
        peaks.append(peak)
        sizes.append(path.stat().st_size)
    assert sizes[1] > 7_000_000
    assert peaks[1] < sizes[1] / 10, f"peak Python memory {peaks[1]} bytes for a {sizes[1]}-byte file"
    # Per note, only index arrays (tens of bytes) grow, not the text.
    assert peaks[1] - peaks[0] < (sizes[1] - sizes[0]) / 20, (
        f"peak memory grows with the file: {peaks} for {sizes} bytes")


# ---------------------------------------------------------------------------------------
# MIMIC-IV-Note


def test_mimic_iv_folder_and_file(cache: Path) -> None:
    corpus = load_mimic_iv_notes(MIMIC_IV, split_fractions=(0.5, 0.25, 0.25), seed=6, cache_dir=cache)
    assert corpus["train"].column_names == [
        "text", "note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime", "storetime"]
    rows = {r["note_id"]: r for split in rows_of(corpus).values() for r in split}
    assert sorted(rows) == ["19000001-DS-3", "19000001-RR-7", "19000002-DS-1", "19000004-AR-2"]
    assert loader_counts(corpus)["left_out"] == {"empty": 1}
    assert {r["note_id"] for r in corpus["train"]} == {"19000001-DS-3", "19000001-RR-7"}  # one patient
    discharge = rows["19000001-DS-3"]["text"]
    assert discharge.startswith("\nName:  <deid>                     Unit No:   <deid>\n"
                                " \nAdmission Date:  <deid>")
    assert "2. Potassium Chloride 20 mEq PO BID\nSignature: __________\n" in discharge
    assert rows["19000001-RR-7"]["hadm_id"] is None and rows["19000001-RR-7"]["note_seq"] == 7
    assert rows["19000004-AR-2"]["storetime"] is None
    one = load_mimic_iv_notes(MIMIC_IV / "note" / "radiology.csv", split_fractions=(1, 0, 0), cache_dir=cache)
    assert one["train"]["note_id"] == ["19000001-RR-7", "19000004-AR-2"]
    only_ds = load_mimic_iv_notes(MIMIC_IV, note_types=["ds"], split_fractions=(1, 0, 0), cache_dir=cache)
    assert only_ds["train"]["note_type"] == ["DS", "DS"]
    assert loader_counts(only_ds)["left_out"] == {"empty": 1, "other_note_type": 2}
    with pytest.raises(ValueError, match=r"'xx' never occur.*'AR', 'DS', 'RR'"):
        load_mimic_iv_notes(MIMIC_IV, note_types=["XX"], cache_dir=cache)


# ---------------------------------------------------------------------------------------
# arXiv


def test_arxiv_hash_split(cache: Path) -> None:
    corpus = load_arxiv_abstracts(ARXIV, split_fractions=(0.5, 0.25, 0.25), cache_dir=cache)
    assert corpus["train"].column_names == ["text", "id", "categories", "update_date"]
    rows = {r["id"]: r for split in rows_of(corpus).values() for r in split}
    assert len(rows) == 7 and "1803.00002" not in rows  # blank abstract left out
    assert loader_counts(corpus)["left_out"] == {"empty": 1}
    assert rows["0901.00001"]["text"] == (
        "We count 12 things in 3 ways. The third way uses $n^2 + 1$ steps and takes 0.5 seconds on 4 cores.")
    assert rows["0901.00001"]["categories"] == "math.CO math.PR"
    assert rows["0901.00001"]["update_date"] == "2009-01-06"
    for split_number, split in enumerate(corpus):
        for paper in corpus[split]["id"]:
            assert split_index(hash_unit(paper, 0), (0.5, 0.25, 0.25)) == split_number
    assert (rows_of(load_arxiv_abstracts(ARXIV, split_fractions=(0.5, 0.25, 0.25), cache_dir=cache))
            == rows_of(corpus))


def test_arxiv_date_split_and_categories(cache: Path) -> None:
    corpus = load_arxiv_abstracts(ARXIV.parent, split_by="date", validation_from="2015-01-01",
                                  test_from="2021-01-01", cache_dir=cache)
    assert corpus["train"]["id"] == ["0901.00001", "1005.01234", "hep-ph/0701001"]
    assert corpus["validation"]["id"] == ["1503.04321"]
    assert corpus["test"]["id"] == ["2104.05678", "2207.11111", "2310.09999"]
    filtered = load_arxiv_abstracts(ARXIV, split_by="date", validation_from="2015-01-01",
                                    test_from="2021-01-01", categories=["cs.", "math.PR"], cache_dir=cache)
    assert [i for s in filtered for i in filtered[s]["id"]] == [
        "0901.00001", "1005.01234", "1503.04321", "2104.05678", "2207.11111"]
    assert loader_counts(filtered)["left_out"] == {"empty": 1, "other_category": 2}
    exact = load_arxiv_abstracts(ARXIV, categories="hep-ph", split_fractions=(1, 0, 0), cache_dir=cache)
    assert exact["train"]["id"] == ["hep-ph/0701001"]
    with pytest.raises(ValueError, match=r"matches 'math'.*Categories seen: cs.CL, cs.LG, hep-ph"):
        load_arxiv_abstracts(ARXIV, categories=["math"], cache_dir=cache)
    with pytest.raises(EmptySplitError, match="validation split is empty"):
        load_arxiv_abstracts(ARXIV, split_by="date", validation_from="2030-01-01", test_from="2031-01-01",
                             cache_dir=cache)


def test_arxiv_argument_errors(cache: Path) -> None:
    with pytest.raises(ValueError, match="split_by must be 'hash' or 'date'"):
        load_arxiv_abstracts(ARXIV, split_by="year", cache_dir=cache)
    with pytest.raises(ValueError, match="needs validation_from="):
        load_arxiv_abstracts(ARXIV, split_by="date", test_from="2020-01-01", cache_dir=cache)
    with pytest.raises(ValueError, match="must not be after"):
        load_arxiv_abstracts(ARXIV, split_by="date", validation_from="2021-01-01", test_from="2020-01-01")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        load_arxiv_abstracts(ARXIV, split_by="date", validation_from="2021/01/01", test_from="2022-01-01")
    with pytest.raises(ValueError, match="apply to split_by='date' only"):
        load_arxiv_abstracts(ARXIV, test_from="2022-01-01")


# ---------------------------------------------------------------------------------------
# Bad input


def test_missing_files_say_where_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError,
                       match=r"nope.csv does not exist.*physionet.org/content/mimiciii/1.4"):
        load_mimic_iii_notes(tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError, match=r"No NOTEEVENTS file.*credentialed access"):
        load_mimic_iii_notes(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"empty_data_home.*physionet.org/content/mimiciii"):
        load_mimic_iii_notes()
    with pytest.raises(FileNotFoundError,
                       match=r"discharge.csv or radiology.csv.*physionet.org/content/mimic-iv-note"):
        load_mimic_iv_notes(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"Kaggle.*Cornell-University/arxiv"):
        load_arxiv_abstracts(tmp_path / "arxiv.json")
    with pytest.raises(FileNotFoundError,
                       match=r"No arxiv-metadata-oai-snapshot.json.*Cornell-University/arxiv"):
        load_arxiv_abstracts(tmp_path)


def test_csv_without_text_column(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "NOTEEVENTS.csv"
    path.write_text("ROW_ID,SUBJECT_ID,HADM_ID,CHARTDATE,CHARTTIME,STORETIME,CATEGORY,DESCRIPTION,CGID,ISERROR\n"
                    "1,2,3,2150-01-01,,,Nursing,Report,,\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"NOTEEVENTS.csv, line 1: the header has no column TEXT\. "
                                                r"The header is ROW_ID,SUBJECT_ID,.*,ISERROR;"):
        load_mimic_iii_notes(path, cache_dir=cache)
    empty = tmp_path / "radiology.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match="radiology.csv is empty"):
        load_mimic_iv_notes(empty, cache_dir=cache)


def test_wrong_field_count_names_the_line(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "NOTEEVENTS.csv"
    path.write_text(III_HEADER_LINE + '1,2,3,2150-01-01,,,Nursing,Report,,,"two\nlines"\n'
                    "2,2,3,2150-01-01,,,Nursing,Report,,oops,,\"text\"\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"NOTEEVENTS.csv, line 4: 12 fields where the header has 11"):
        load_mimic_iii_notes(path, cache_dir=cache)


def test_truncated_quoted_field_names_its_first_line(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "NOTEEVENTS.csv"
    path.write_text(III_HEADER_LINE + '1,2,3,2150-01-01,,,Nursing,Report,,,"complete"\n'
                    '2,5,6,2150-01-01,,,Nursing,Report,,,"cut off\nin the middle\nof a ', encoding="utf-8")
    with pytest.raises(CorpusFormatError,
                       match=r"NOTEEVENTS.csv, line 3: the file ends inside a quoted field.*truncated"):
        load_mimic_iii_notes(path, cache_dir=cache)


def test_non_utf8_bytes_name_line_and_offset(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "NOTEEVENTS.csv"
    head = (III_HEADER_LINE + '1,2,3,2150-01-01,,,Nursing,Report,,,"ok\nfine"\n').encode()
    path.write_bytes(head + b'2,2,3,2150-01-01,,,Nursing,Report,,,"temp 38\xb0C"\n')
    offset = len(head) + len(b'2,2,3,2150-01-01,,,Nursing,Report,,,"temp 38')
    with pytest.raises(CorpusFormatError, match=rf"NOTEEVENTS.csv, line 4: byte 0xb0 at byte offset {offset} "
                                                r"\(byte 44 of the line\) is not valid UTF-8"):
        load_mimic_iii_notes(path, cache_dir=cache)
    arxiv = tmp_path / "arxiv.json"
    arxiv.write_bytes(ARXIV.read_bytes().splitlines(keepends=True)[0] + b'{"id": "x\xff"}\n')
    with pytest.raises(CorpusFormatError, match=r"arxiv.json, line 2: byte 0xff"):
        load_arxiv_abstracts(arxiv, cache_dir=cache)


def test_bad_values_name_the_field(tmp_path: Path, cache: Path) -> None:
    path = write_iii(tmp_path / "a.csv", [iii_record(1, 1, "fine"), iii_record(2, 1, "flag?", iserror="yes")])
    with pytest.raises(CorpusFormatError,
                       match=r"a.csv, line 3, field ISERROR: expected 1 or empty, got 'yes'"):
        load_mimic_iii_notes(path, cache_dir=cache)
    bad_subject = iii_record(1, 1, "multi\nline")
    bad_subject[1] = "P-17"
    path = write_iii(tmp_path / "b.csv", [iii_record(3, 1, "x\ny\nz"), bad_subject])
    with pytest.raises(CorpusFormatError,
                       match=r"b.csv, line 5, field SUBJECT_ID: expected an integer, got 'P-17'"):
        load_mimic_iii_notes(path, cache_dir=cache)


def test_empty_notes_are_skipped_and_counted(tmp_path: Path, cache: Path) -> None:
    path = write_iii(tmp_path / "n.csv", [iii_record(1, 1, "Note, 5 mg."), iii_record(2, 1, ""),
                                          iii_record(3, 1, " \n\t"), iii_record(4, 1, "", iserror="1")])
    corpus = load_mimic_iii_notes(path, split_fractions=(1, 0, 0), cache_dir=cache)
    assert corpus["train"]["row_id"] == [1]
    assert loader_counts(corpus)["left_out"] == {"empty": 2, "iserror": 1}


def test_malformed_json_lines(tmp_path: Path, cache: Path) -> None:
    lines = ARXIV.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "arxiv.json"
    path.write_text(lines[0] + "\n\n" + lines[1][:60] + "\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"arxiv.json, line 3: not valid JSON \(.* at column \d+\)"):
        load_arxiv_abstracts(path, cache_dir=cache)
    paper = json.loads(lines[1])
    del paper["abstract"]
    path.write_text(lines[0] + "\n" + json.dumps(paper) + "\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"arxiv.json, line 2: no field 'abstract'"):
        load_arxiv_abstracts(path, cache_dir=cache)
    paper = json.loads(lines[1])
    paper["update_date"] = "May 2010"
    path.write_text(json.dumps(paper) + "\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"line 1, field 'update_date': expected YYYY-MM-DD"):
        load_arxiv_abstracts(path, cache_dir=cache)
    path.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"line 1: expected a JSON object, got list"):
        load_arxiv_abstracts(path, cache_dir=cache)


@pytest.mark.parametrize(
    "fractions, message",
    [
        ((0.5, 0.5, 0.5), "must sum to 1"),
        ((1.2, -0.1, -0.1), "non-negative"),
        ((0.5, float("nan"), 0.5), "non-negative"),
        ((0.9, 0.1), "three numbers"),
        (("a", 0.5, 0.5), "three numbers"),
    ],
)
def test_bad_split_fractions(fractions, message: str, cache: Path) -> None:
    with pytest.raises(ValueError, match=message):
        load_mimic_iii_notes(MIMIC_III, split_fractions=fractions, cache_dir=cache)
    with pytest.raises(ValueError, match=message):
        load_arxiv_abstracts(ARXIV, split_fractions=fractions, cache_dir=cache)


def test_empty_split_is_an_error(cache: Path, tmp_path: Path) -> None:
    # Seed 0 hashes all five invented patients to train.
    with pytest.raises(EmptySplitError,
                       match=r"load_mimic_iii_notes: the validation split is empty.*Too few patients"):
        load_mimic_iii_notes(MIMIC_III, split_fractions=(0.6, 0.2, 0.2), seed=0, cache_dir=cache)
    only_errors = write_iii(tmp_path / "e.csv", [iii_record(1, 1, "x", iserror="1")])
    with pytest.raises(EmptySplitError, match="train split is empty"):
        load_mimic_iii_notes(only_errors, split_fractions=(1, 0, 0), cache_dir=cache)


def test_loader_counts_needs_a_loader_dataset() -> None:
    from datasets import Dataset

    with pytest.raises(ValueError, match="no loader counts"):
        loader_counts(Dataset.from_dict({"text": ["a"]}))


def test_fixture_copies_load_from_a_data_home(tmp_path: Path, cache: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    shutil.copytree(MIMIC_IV, home / "mimic-iv-note")
    (home / "arxiv").mkdir()
    shutil.copy(ARXIV, home / "arxiv")
    monkeypatch.setenv("HF_NLM_DATA", str(home))
    assert len(load_mimic_iv_notes(split_fractions=(1, 0, 0), cache_dir=cache)["train"]) == 4
    assert len(load_arxiv_abstracts(split_fractions=(1, 0, 0), cache_dir=cache)["train"]) == 7
