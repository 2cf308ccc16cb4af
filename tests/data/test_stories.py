"""ROCStories / Story Cloze loaders and RAKE storylines.

The fixtures in tests/fixtures/rocstories follow the official CSV formats; every story in them was
written for this project. Malformed files are written into tmp_path.
"""

from __future__ import annotations

import csv
import logging
import pickle
from pathlib import Path

import pytest
from datasets import Dataset
from datasets.fingerprint import Hasher

from hf_nlm.data import CorpusFormatError, EmptySplitError, load_rocstories, load_story_cloze, loader_counts
from hf_nlm.story.storylines import (
    add_storylines,
    candidate_phrases,
    extract_keyphrases,
    extract_keywords,
    keyword_sentence_pairs,
    storyline,
    storyline_lm_dataset,
    storyline_text,
    word_scores,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "rocstories"
SPRING = FIXTURES / "ROCStories__spring2016 - ROCStories_spring2016.csv"
WINTER = FIXTURES / "ROCStories_winter2017 - ROCStories_winter2017.csv"
CLOZE = FIXTURES / "cloze_test_val__spring2016 - cloze_test_ALL_val.csv"
ROC_HEADER = ["storyid", "storytitle", "sentence1", "sentence2", "sentence3", "sentence4", "sentence5"]
CLOZE_HEADER = ["InputStoryid", "InputSentence1", "InputSentence2", "InputSentence3", "InputSentence4",
                "RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2", "AnswerRightEnding"]
FIVE = ["One a.", "Two b.", "Three c.", "Four d.", "Five e."]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_NLM_DATA", str(tmp_path / "empty_data_home"))


def csv_rows(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


# ----- ROCStories ---------------------------------------------------------------------------------


def test_rocstories_reads_every_story_of_the_fixture_folder():
    corpus = load_rocstories(FIXTURES, split_fractions=(0.5, 0.25, 0.25))
    expected = {row[0]: row for path in (SPRING, WINTER) for row in csv_rows(path)[1:]}
    rows = [row for split in corpus.values() for row in split]
    assert sorted(r["storyid"] for r in rows) == sorted(expected)  # every story once, in one split
    for row in rows:
        raw = expected[row["storyid"]]
        assert row["title"] == raw[1]
        assert row["sentences"] == raw[2:7]
        assert row["story"] == " ".join(raw[2:7])
    # Quoted fields with commas and doubled quotes come through as written.
    spelling = next(r for r in rows if r["title"] == "The Spelling Bee")
    assert spelling["sentences"][1] == 'The hardest word on her list was "rhythm".'
    counts = loader_counts(corpus)
    assert counts["records"] == 8 and counts["left_out"] == {}
    assert sum(s["rows"] for s in counts["splits"].values()) == 8


def test_rocstories_splits_depend_only_on_the_story_id(tmp_path):
    fractions = (0.5, 0.25, 0.25)
    together = load_rocstories([SPRING, WINTER], split_fractions=fractions, seed=3)
    # The files in the other order, and the spring file alone with its rows reversed: same splits.
    reordered = load_rocstories([WINTER, SPRING], split_fractions=fractions, seed=3)
    rows = csv_rows(SPRING)
    alone = load_rocstories(write_csv(tmp_path / "s.csv", rows[0], rows[:0:-1]), split_fractions=fractions,
                            seed=3)

    def split_of(corpus):
        return {sid: split for split in corpus for sid in corpus[split]["storyid"]}

    assert split_of(reordered) == split_of(together)
    spring_ids = {r[0] for r in rows[1:]}
    assert split_of(alone) == {sid: s for sid, s in split_of(together).items() if sid in spring_ids}
    # Another seed moves some story (8 stories: the chance that none moves is tiny, and it is fixed).
    other = load_rocstories([SPRING, WINTER], split_fractions=fractions, seed=4)
    assert split_of(other) != split_of(together)


def test_rocstories_empty_split_is_an_error():
    with pytest.raises(EmptySplitError, match="validation split is empty"):
        load_rocstories(SPRING, split_fractions=(0.999, 0.0005, 0.0005))
    corpus = load_rocstories(SPRING, split_fractions=(1.0, 0.0, 0.0))  # a split of fraction 0 may be empty
    assert corpus["train"].num_rows == 5 and corpus["test"].num_rows == 0


def test_rocstories_bad_rows_are_left_out_counted_and_reported(tmp_path, caplog):
    good = ["id-good", "Good", *FIVE]
    rows = [
        good,
        ["id-empty", "Empty", "One.", "   ", "Three.", "Four.", "Five."],  # line 3: an empty sentence
        ["id-short", "Short", "One.", "Two.", "Three."],  # line 4: two fields too few
        ["id-good", "Again", *FIVE],  # line 5: a duplicate id
        ["id-notitle", "", *FIVE],  # line 6: an empty title
        ["id-last", "Last", *FIVE],  # line 7
    ]
    path = write_csv(tmp_path / "bad.csv", ROC_HEADER, rows)
    # Line 8: bytes that are not UTF-8 (Latin-1 "é"), appended raw.
    with open(path, "ab") as f:
        f.write(b"id-latin,Caf\xe9,One.,Two.,Three.,Four.,Five.\n")
    with caplog.at_level(logging.WARNING, logger="hf_nlm.data.stories"):
        corpus = load_rocstories(path, split_fractions=(1.0, 0.0, 0.0))
    assert corpus["train"]["storyid"] == ["id-good", "id-last"]
    assert corpus["train"]["title"] == ["Good", "Last"]  # the first of the duplicates is kept
    counts = loader_counts(corpus)
    assert counts["records"] == 7
    assert counts["left_out"] == {"duplicate_id": 1, "empty_field": 2, "not_utf8": 1, "wrong_field_count": 1}
    report = "\n".join(counts["bad_rows"])
    for line, words in [(3, "field sentence2 is empty"), (4, "5 fields where the header has 7"),
                        (5, "storyid id-good was already read at"), (6, "field storytitle is empty"),
                        (8, "field storytitle holds bytes that are not UTF-8")]:
        assert f"{path}, line {line}: {words}" in report
    assert "left out 5 bad rows" in caplog.text and f"{path}, line 8" in caplog.text


def test_rocstories_strict_raises_on_the_first_bad_row(tmp_path):
    path = write_csv(tmp_path / "bad.csv", ROC_HEADER, [["a", "T", *FIVE], ["a", "T", *FIVE]])
    with pytest.raises(CorpusFormatError, match=r"bad\.csv, line 3: storyid a was already read"):
        load_rocstories(path, strict=True)


def test_rocstories_fatal_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError,
                       match=r"nope\.csv does not exist.*cs\.rochester\.edu/nlp/rocstories"):
        load_rocstories(tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError, match=r"holds none of the ROCStories files.*request them"):
        load_rocstories(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"empty_data_home/rocstories does not exist"):
        load_rocstories()  # the default folder in the (empty) data home
    header = write_csv(tmp_path / "header.csv", ["storyid", "title", *ROC_HEADER[2:]], [["a", "T", *FIVE]])
    with pytest.raises(CorpusFormatError, match=r"header\.csv, line 1: the header has no column storytitle"):
        load_rocstories(header)
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"empty\.csv is empty"):
        load_rocstories(empty)
    truncated = tmp_path / "truncated.csv"
    truncated.write_text(",".join(ROC_HEADER) + '\na,T,One.,Two.,Three.,Four.,Five.\nb,T,"One.,Two.\n',
                         encoding="utf-8")
    with pytest.raises(CorpusFormatError,
                       match=r"truncated\.csv, line 3: the file ends inside a quoted field"):
        load_rocstories(truncated)


# ----- Story Cloze --------------------------------------------------------------------------------


def test_story_cloze_reads_the_fixture():
    cloze = load_story_cloze(CLOZE)
    raw = csv_rows(CLOZE)[1:]
    assert cloze.num_rows == len(raw) == 4
    for row, values in zip(cloze, raw, strict=True):
        assert row["storyid"] == values[0]
        assert row["sentences"] == values[1:5]
        assert row["endings"] == values[5:7]
        assert row["label"] == int(values[7]) - 1  # 0-based index of the right ending
    assert row["sentences"][3] == 'Omar apologized, "I\'m so sorry, it\'s ruined."'
    assert loader_counts(cloze)["records"] == 4


def test_story_cloze_bad_rows(tmp_path):
    context = ["One.", "Two.", "Three.", "Four."]
    rows = [
        ["c1", *context, "Good end.", "Bad end.", "1"],
        ["c2", *context, "Good end.", "Bad end.", "3"],  # line 3: no such ending
        ["c3", *context, "Good end.", "Bad end.", ""],  # line 4: empty answer
        ["c1", *context, "Good end.", "Bad end.", "2"],  # line 5: duplicate id
        ["c4", *context, "", "Bad end.", "2"],  # line 6: empty ending
        ["c5", *context, "Good end.", "Bad end.", "2", "extra"],  # line 7: a field too many
    ]
    path = write_csv(tmp_path / "cloze.csv", CLOZE_HEADER, rows)
    cloze = load_story_cloze(path)
    assert cloze["storyid"] == ["c1"]
    counts = loader_counts(cloze)
    assert counts["records"] == 6
    assert counts["left_out"] == {"bad_answer": 1, "duplicate_id": 1, "empty_field": 2,
                                  "wrong_field_count": 1}
    assert any(f"{path}, line 3: AnswerRightEnding is '3', expected 1 or 2" in b for b in counts["bad_rows"])
    assert any(f"{path}, line 6: field RandomFifthSentenceQuiz1 is empty" in b for b in counts["bad_rows"])
    with pytest.raises(CorpusFormatError, match=r"line 3: AnswerRightEnding is '3'"):
        load_story_cloze(path, strict=True)


def test_story_cloze_file_errors(tmp_path):
    blind = write_csv(tmp_path / "blind.csv", CLOZE_HEADER[:-1], [["c1", "a", "b", "c", "d", "e", "f"]])
    with pytest.raises(CorpusFormatError,
                       match=r"blind\.csv, line 1: the header has no column AnswerRightEnding"):
        load_story_cloze(blind)
    with pytest.raises(FileNotFoundError, match=r"is a folder: pass the Story Cloze file itself.*blind\.csv"):
        load_story_cloze(tmp_path)
    with pytest.raises(FileNotFoundError, match="cs.rochester.edu/nlp/rocstories"):
        load_story_cloze(tmp_path / "missing.csv")


# ----- RAKE ---------------------------------------------------------------------------------------

SENTENCE = "The old dog chased the old cat, and the cat ran up a tall tree."


def test_rake_candidates_and_scores_worked_by_hand():
    # Cut at stopwords (the, and, up, a) and at the comma and the full stop.
    phrases = candidate_phrases(SENTENCE)
    assert phrases == [["old", "dog", "chased"], ["old", "cat"], ["cat", "ran"], ["tall", "tree"]]
    # freq: old 2, cat 2, others 1. deg = sum of the lengths of the phrases holding the word:
    # old 3 + 2 = 5, cat 2 + 2 = 4, dog / chased 3, ran / tall / tree 2.
    assert word_scores(phrases) == {
        "old": 5 / 2, "dog": 3 / 1, "chased": 3 / 1, "cat": 4 / 2, "ran": 2 / 1, "tall": 2 / 1, "tree": 2 / 1,
    }
    # Phrase scores: old dog chased 2.5 + 3 + 3 = 8.5; old cat 4.5; cat ran 4; tall tree 4.
    assert extract_keywords(SENTENCE, max_words=None) == "old dog chased"
    # Two words at most: the best window of "old dog chased" is "dog chased" (6 > 5.5).
    assert extract_keywords(SENTENCE, max_words=2) == "dog chased"
    # Top 3, in sentence order: 8.5, 4.5, then the tie at 4 goes to the earlier "cat ran".
    assert extract_keyphrases(SENTENCE, top_k=3, max_words=None) == ["old dog chased", "old cat", "cat ran"]


def test_rake_ties_case_and_fallbacks():
    assert extract_keywords("Red apples, green pears.") == "Red apples"  # tie: the first; case kept
    assert extract_keywords("Green pears, red apples.") == "Green pears"
    assert extract_keywords("Jennifer has a big exam tomorrow.") == "big exam tomorrow"
    assert extract_keywords("It was him.") == "was"  # only stopwords: the longest word, the first on ties
    assert extract_keywords("... !") == ""
    # Apostrophes and hyphens stay inside words; other punctuation cuts phrases.
    assert candidate_phrases("Marta's all-nighter (long) ended") == [["Marta's", "all-nighter"], ["long"],
                                                                      ["ended"]]
    with pytest.raises(ValueError, match="max_words"):
        extract_keywords("a b", max_words=0)


def test_storyline_is_deterministic_and_mappable():
    corpus = load_rocstories(FIXTURES, split_fractions=(1.0, 0.0, 0.0))["train"]
    first = corpus.map(add_storylines)
    second = corpus.map(add_storylines, load_from_cache_file=False)
    assert first["storyline"] == second["storyline"] == [storyline(s) for s in corpus["sentences"]]
    assert all(len(line) == 5 and all(line) for line in first["storyline"])
    # datasets hashes (and, with num_proc, pickles) the function: both must work.
    assert pickle.loads(pickle.dumps(add_storylines)) is add_storylines
    assert Hasher.hash(add_storylines) == Hasher.hash(add_storylines)
    two = corpus.map(add_storylines, fn_kwargs={"max_words": 1})
    assert all(len(k.split()) == 1 for line in two["storyline"] for k in line)
    with pytest.raises(TypeError, match="list of a story's sentences"):
        storyline("One sentence.")


def test_storyline_text_format():
    assert storyline_text("The Test", ["big exam", "stressed"], "Jen studied. She passed.") == (
        "The Test <sep> big exam # stressed <sep> Jen studied. She passed."
    )
    assert storyline_text("The Test", ["big exam", "stressed"]) == "The Test <sep> big exam # stressed <sep>"
    assert storyline_text("#1 Fan", ["k"], "I won #1.") == "#1 Fan <sep> k <sep> I won #1."  # unambiguous
    with pytest.raises(ValueError, match="the keyword 'a # b' holds"):
        storyline_text("T", ["a # b"])
    with pytest.raises(ValueError, match="the title 'A <sep> B' holds"):
        storyline_text("A <sep> B", ["k"])
    with pytest.raises(ValueError, match="the story 'one\\\\ntwo' holds"):
        storyline_text("T", ["k"], "one\ntwo")


def test_storyline_lm_dataset_has_the_seed_001_text():
    corpus = load_rocstories(FIXTURES, split_fractions=(0.5, 0.25, 0.25))
    lm = storyline_lm_dataset(corpus)
    assert set(lm) == {"train", "validation", "test"}
    for split in lm.values():
        for row in split:
            title, plan, story = row["text"].split(" <sep> ")
            assert title == row["title"] and story == row["story"]
            assert plan.split(" # ") == row["storyline"] == storyline(row["sentences"])


def test_keyword_sentence_pairs_on_brown_like_rows():
    # load_brown's layout: one sentence per row, lowercased words and punctuation joined by spaces.
    rows = Dataset.from_dict({"text": [
        "the jury said it did find that many of atlanta's registration practices were outmoded .",
        "`` '' .",
        "nor did they care .",
    ]})
    pairs = keyword_sentence_pairs(rows)
    assert pairs.column_names == ["source", "target"]
    assert pairs["target"] == [rows[0]["text"], rows[2]["text"]]
    # Candidates: [jury said] [find] [atlanta's registration practices] [outmoded]: the 3-word phrase wins.
    assert pairs["source"] == ["atlanta's registration practices", "care"]
    assert "left out 1 rows without a word" in pairs.info.description
    two = keyword_sentence_pairs(rows, top_k=2, max_words=None)
    assert two["source"][0] == "jury said # atlanta's registration practices"
