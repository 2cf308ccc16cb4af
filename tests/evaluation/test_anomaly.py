"""Numeral anomaly detection: find_unlikely_numbers (surprisal, branch surprisal, rank, expected value of
every numeral, Spithourakis & Riedel 2018) against a brute-force forward on each prefix, the corruptions and
the paired AUC of Berg-Kirkpatrick & Spokoyny (2020), and `hf-nlm check-numbers`."""

from __future__ import annotations

import json
import random

import pytest
import torch
from numeral_test_cases import ALL_AT_ONCE, STRATEGIES, TEXTS, numeracy_model, numeracy_tokenizer, record_rows

from hf_nlm.evaluation import (
    anomaly_pairs,
    corrupt_numeral,
    find_unlikely_numbers,
    numeral_anomaly_auc,
    paired_auc,
    predict_numbers,
)

HELD_OUT = ["in 1995 the surplus was 3.5 billion dollars , up 12 % .",
            "the budget fell 9 % to 1,250 million in 1990 .", "no number here .",
            "we spent 7 billion on 12 programs in 1991 ."]
NUM_NUMERALS = 9  # in HELD_OUT
BLOCK = 5  # short chunks: the recurrent state is carried from chunk to chunk


@pytest.fixture(scope="module")
def tokenizer():
    return numeracy_tokenizer()


@torch.no_grad()
def brute_force(model, tokenizer, texts, index: int) -> tuple[float, torch.Tensor]:
    """-log p(target ``index`` of the stream) from one forward pass over the stream up to it from a fresh
    state (no chunking, no carried state), and the head's vocabulary-wide log-probabilities there."""
    from hf_nlm.data.batching import batching_for

    batching = batching_for(model, tokenizer, BLOCK)
    stream, _ = batching.encode(texts)
    columns = batching.columns(stream, 1)
    batch = {k: v[:, : index + 1] for k, v in columns.chunk(0, columns.length).items()}
    batch["shift_labels"] = torch.where(torch.arange(index + 1) == index, batch["shift_labels"], -100)
    out = model(**batch, output_hidden_states=True)
    return float(out.loss), model.lm_head.log_probs(out.hidden_states[-1][0, -1:])[0]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_surprisal_rank_and_expected_value_match_brute_force(tokenizer, strategy):
    model = numeracy_model(tokenizer, strategy)
    rows = find_unlikely_numbers(model, tokenizer, HELD_OUT, block_size=BLOCK, numeral_chunk_size=3)
    assert len(rows) == NUM_NUMERALS and [r["index"] for r in rows] == sorted(r["index"] for r in rows)
    numeral_ids = sorted(tokenizer.numeral_vocab.values())
    candidates = [i for i in numeral_ids if i != tokenizer.unk_num_token_id]
    medians = {p["index"]: p["prediction"]
               for p in predict_numbers(model, tokenizer, HELD_OUT, "median", block_size=BLOCK)}
    for row in rows:
        text = HELD_OUT[row["text_index"]]
        assert (text[row["start"]:row["end"]] == row["numeral"]
                and text[: row["start"]].rstrip().endswith(row["context"]))
        nll, vocabulary = brute_force(model, tokenizer, HELD_OUT, row["index"])
        assert row["surprisal"] == pytest.approx(nll, abs=1e-4), row
        assert row["branch_surprisal"] == pytest.approx(nll + float(vocabulary[numeral_ids].logsumexp(-1)),
                                                        abs=1e-4)
        own = tokenizer.numeral_vocab.get(row["numeral"], tokenizer.unk_num_token_id)
        assert row["in_vocabulary"] == (own != tokenizer.unk_num_token_id)
        assert row["rank"] == 1 + sum(float(vocabulary[c]) > -nll for c in candidates if c != own), row
        # the chunks differ: float32 rounding
        assert row["expected"] == pytest.approx(medians[row["index"]], rel=1e-6)


@pytest.mark.parametrize("strategy", ["hsoftmax", "drnn", "mog", "combination"])
def test_nothing_depends_on_the_chunk(tokenizer, strategy):
    model = numeracy_model(tokenizer, strategy)
    whole = find_unlikely_numbers(model, tokenizer, HELD_OUT, block_size=BLOCK,
                                  numeral_chunk_size=ALL_AT_ONCE)
    one = find_unlikely_numbers(model, tokenizer, HELD_OUT, block_size=BLOCK, numeral_chunk_size=1)
    assert ([(r["index"], r["rank"], r["numeral"]) for r in one]
            == [(r["index"], r["rank"], r["numeral"]) for r in whole])
    numbers = ("value", "surprisal", "branch_surprisal", "expected")
    assert [{k: r[k] for k in numbers} for r in one] == [pytest.approx({k: r[k] for k in numbers}, rel=1e-6)
                                                          for r in whole]
    assert [{k: v for k, v in r.items() if k not in numbers} for r in one] == [
        {k: v for k, v in r.items() if k not in numbers} for r in whole]


@pytest.mark.parametrize("strategy", ["hsoftmax", "drnn", "mog"])
def test_no_call_scores_more_numerals_than_the_chunk(tokenizer, strategy, monkeypatch):
    """Fails if a (numerals x candidates) table of the whole text is built."""
    model = numeracy_model(tokenizer, strategy)
    rows = record_rows(monkeypatch, model.lm_head)
    assert len(find_unlikely_numbers(model, tokenizer, HELD_OUT, block_size=BLOCK,
                                     numeral_chunk_size=2)) == NUM_NUMERALS
    assert rows and max(rows) <= 2, rows


def test_top_returns_the_most_surprising_first(tokenizer):
    model = numeracy_model(tokenizer, "drnn")
    rows = find_unlikely_numbers(model, tokenizer, HELD_OUT, block_size=BLOCK)
    top = find_unlikely_numbers(model, tokenizer, HELD_OUT, block_size=BLOCK, top=3)
    assert top == sorted(rows, key=lambda r: -r["surprisal"])[:3]
    assert top[0]["surprisal"] >= top[1]["surprisal"] >= top[2]["surprisal"]
    with pytest.raises(ValueError, match="top is how many numerals"):
        find_unlikely_numbers(model, tokenizer, HELD_OUT, top=0)


def test_bad_input_is_refused_in_one_line(tokenizer):
    from hf_nlm.models import NPLMConfig, NPLMForCausalLM
    from hf_nlm.tokenization import train_word_level_tokenizer

    model = numeracy_model(tokenizer, "hsoftmax")
    with pytest.raises(ValueError, match="the text holds no numeral: nothing to check"):
        find_unlikely_numbers(model, tokenizer, ["no number here ."])
    with pytest.raises(ValueError, match="needs a numeracy tokenizer"):
        find_unlikely_numbers(model, train_word_level_tokenizer(TEXTS), HELD_OUT)
    nplm = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=4,
                                      hidden_size=4))
    for call in (find_unlikely_numbers, numeral_anomaly_auc):
        with pytest.raises(ValueError, match="needs a numeracy LM .*not a nplm model"):
            call(nplm, tokenizer, HELD_OUT)
    with pytest.raises(ValueError, match="--numeral-chunk-size"):
        find_unlikely_numbers(model, tokenizer, HELD_OUT, numeral_chunk_size=0)
    with pytest.raises(ValueError, match="nothing to corrupt"):
        numeral_anomaly_auc(model, tokenizer, ["no number here ."])
    with pytest.raises(ValueError, match="corruptions are some of x10"):
        numeral_anomaly_auc(model, tokenizer, HELD_OUT, corruptions=("x100",))


# ----------------------------------------------------------------------------- corruptions


@pytest.mark.parametrize(("numeral", "corruption", "expected"), [
    ("12", "x10", "120"), ("12", "/10", "1.2"),
    ("2.50", "x10", "25.00"), ("2.50", "/10", "0.250"),  # x10 keeps the decimals; /10 writes one more: exact
    # thousands separators: the result grouped in threes
    ("1,200", "x10", "12,000"), ("1,200", "/10", "120.0"),
    (".5", "x10", "5.0"), ("-3", "x10", "-30"),
    ("−3", "/10", "−0.3"), ("+4", "x10", "+40"),  # the sign as written
    ("１２", "x10", "120"),  # width-folded digits read as ASCII
    ("0", "x10", None), ("0.0", "/10", None),  # no change of value: no pair
    ("105", "digit_swap", "150"),  # 1<->0 would write 015: not drawn
    ("2.50", "digit_swap", "2.05"), ("1,100", "digit_swap", "1,010"),
    ("7", "digit_swap", None), ("11", "digit_swap", None),
    ("1.5", "digit_swap", None),  # never across the point
])
def test_corruptions_of_hand_worked_numerals(numeral, corruption, expected):
    assert corrupt_numeral(numeral, corruption, random.Random(0)) == expected


def test_digit_swaps_and_random_magnitudes_are_drawn_with_the_generator():
    swaps = {corrupt_numeral("1,234", "digit_swap", random.Random(seed)) for seed in range(40)}
    assert swaps == {"2,134", "1,324", "1,243"}  # every adjacent pair, the commas in place
    draws = [corrupt_numeral("-5", "random", random.Random(seed)) for seed in range(40)]
    assert draws == [corrupt_numeral("-5", "random", random.Random(seed)) for seed in range(40)]
    assert all(d.startswith("-") and d[1:].isdigit() and 1 <= int(d[1:]) < 10**6 for d in draws)
    assert len(set(draws)) > 30
    grouped = corrupt_numeral("1,200", "random", random.Random(3))
    assert grouped.replace(",", "").isdigit() and ("," in grouped) == (int(grouped.replace(",", "")) >= 1000)
    with pytest.raises(ValueError, match="not a numeral token"):
        corrupt_numeral("5kg", "x10")
    with pytest.raises(ValueError, match="unknown corruption 'x100'"):
        corrupt_numeral("5", "x100")


# ----------------------------------------------------------------------------- the AUC


def test_paired_auc_on_hand_made_scores():
    assert paired_auc([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]) == 1.0
    assert paired_auc([2.0, 3.0, 4.0], [1.0, 2.0, 3.0]) == 0.0
    assert paired_auc([1.0, 1.0], [1.0, 1.0]) == 0.5  # ties count 1/2
    assert paired_auc([1.0, 2.0, 3.0, 5.0], [2.0, 2.0, 1.0, 6.0]) == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    # Per pair, not Mann-Whitney over the two lists (which would give 3/4 here): each corrupted number
    # is compared with the true number of its own context.
    assert paired_auc([1.0, 10.0], [2.0, 11.0]) == 1.0
    assert paired_auc([], []) is None
    with pytest.raises(ValueError, match="one per pair"):
        paired_auc([1.0], [1.0, 2.0])


@pytest.mark.parametrize("strategy", ["softmax", "drnn", "mog", "combination", "dexp"])
def test_pairs_score_the_corrupted_text_in_the_same_context(tokenizer, strategy):
    model = numeracy_model(tokenizer, strategy)
    pairs = anomaly_pairs(model, tokenizer, HELD_OUT, seed=1, block_size=BLOCK)
    original = {r["index"]: r for r in find_unlikely_numbers(model, tokenizer, HELD_OUT, block_size=BLOCK)}
    assert {p["text_index"] for p in pairs} == {0, 1, 3}  # one numeral per text that has one
    seen = set()
    for pair in pairs:
        text, corrupted_text = HELD_OUT[pair["text_index"]], pair["corrupted_text"]
        row = original[pair["index"]]
        assert pair["original"] == row["numeral"] != pair["corrupted"]
        # byte-identical else
        assert corrupted_text == text[: row["start"]] + pair["corrupted"] + text[row["end"]:]
        assert pair["surprisal_original"] == pytest.approx(row["surprisal"], abs=1e-5)
        if pair["corruption"] in seen:
            continue
        seen.add(pair["corruption"])  # one of each: the corrupted text scored as a text, in the same place
        texts = [corrupted_text if i == pair["text_index"] else t for i, t in enumerate(HELD_OUT)]
        scored = {r["index"]: r for r in find_unlikely_numbers(model, tokenizer, texts, block_size=BLOCK)}
        assert scored[pair["index"]]["numeral"] == pair["corrupted"]
        assert pair["surprisal_corrupted"] == pytest.approx(scored[pair["index"]]["surprisal"], abs=1e-4)
    assert seen == {"x10", "/10", "digit_swap", "random"}


def test_auc_is_deterministic_and_counts_every_pair(tokenizer):
    model = numeracy_model(tokenizer, "drnn")
    texts = HELD_OUT * 3
    report = numeral_anomaly_auc(model, tokenizer, texts, seed=0, block_size=BLOCK)
    assert report == numeral_anomaly_auc(model, tokenizer, texts, seed=0, block_size=BLOCK)
    assert report["num_texts"] == 9 and report["seed"] == 0
    assert list(report["corruptions"]) == ["x10", "/10", "digit_swap", "random"]
    assert sum(c["num_pairs"] for c in report["corruptions"].values()) == report["num_pairs"]
    pairs = anomaly_pairs(model, tokenizer, texts, seed=0, block_size=BLOCK)
    assert report["auc"] == paired_auc([p["surprisal_original"] for p in pairs],
                                       [p["surprisal_corrupted"] for p in pairs])
    # A text's draws depend on the seed and the text alone, not on which corruptions are asked for.
    only = anomaly_pairs(model, tokenizer, texts, corruptions=("random",), seed=0, block_size=BLOCK)
    assert only == [p for p in pairs if p["corruption"] == "random"]
    assert numeral_anomaly_auc(model, tokenizer, texts, corruptions=("x10",),
                               block_size=BLOCK)["corruptions"] == {"x10": report["corruptions"]["x10"]}


def test_a_closed_head_ties_two_unknown_numerals(tokenizer):
    model = numeracy_model(tokenizer, "softmax")
    pairs = anomaly_pairs(model, tokenizer, ["in 1995 the surplus was 13 billion ."], corruptions=("x10",),
                          seed=0)
    assert [(p["original"], p["corrupted"]) for p in pairs] in ([("1995", "19950")], [("13", "130")])
    assert pairs[0]["surprisal_corrupted"] == pairs[0]["surprisal_original"]  # both <unk_num>, same context
    assert paired_auc([pairs[0]["surprisal_original"]], [pairs[0]["surprisal_corrupted"]]) == 0.5


# ----------------------------------------------------------------------------- hf-nlm check-numbers


@pytest.fixture(scope="module")
def run_dir(tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("check-numbers")
    numeracy_model(tokenizer, "drnn").save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def expect_usage_error(argv: list[str], capsys, message: str) -> None:
    from hf_nlm_cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 2  # the --help hint and the error


def test_check_numbers_prints_the_most_surprising_first(run_dir, tokenizer, tmp_path, capsys):
    from hf_nlm_cli import main

    capsys.readouterr()
    text = "we spent 7 billion on 12 programs in 1991 ."
    assert main(["check-numbers", str(run_dir), "--text", text]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["surprisal", "rank", "numeral", "expected", "context"]
    rows = find_unlikely_numbers(numeracy_model(tokenizer, "drnn"), tokenizer, [text])
    ordered = sorted(rows, key=lambda r: -r["surprisal"])
    assert [line.split()[2] for line in lines[1:]] == [r["numeral"] for r in ordered]
    assert (lines[1].split()[0] == f"{ordered[0]['surprisal']:.2f}"
            and lines[1].endswith(ordered[0]["context"]))
    (tmp_path / "held.txt").write_text("\n".join(HELD_OUT) + "\n\n")
    for source in (["--file", str(tmp_path / "held.txt")], ["--test-file", str(tmp_path / "held.txt")]):
        assert main(["check-numbers", str(run_dir), *source, "--top", "2", "--json",
                     "--numeral-chunk-size", "1"]) == 0
        got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [r["index"] for r in got] == [r["index"] for r in find_unlikely_numbers(
            numeracy_model(tokenizer, "drnn"), tokenizer, [t for t in HELD_OUT if t], top=2)]
    assert main(["check-numbers", str(run_dir), "--file", str(tmp_path / "held.txt")]) == 0
    out = capsys.readouterr().out
    # 1995 is outside the vocabulary: marked, and a note says so
    assert len(out.splitlines()) == 1 + NUM_NUMERALS + 1 and "1995" in out
    assert out.splitlines()[-1].startswith("* not one of the vocabulary's numerals")


def test_check_numbers_bad_input_is_one_line(run_dir, tokenizer, tmp_path, capsys, monkeypatch):
    from hf_nlm.cli import evaluate as cli_evaluate
    from hf_nlm.models import NPLMConfig, NPLMForCausalLM
    from hf_nlm.tokenization import train_word_level_tokenizer

    base = ["check-numbers", str(run_dir)]
    expect_usage_error([*base, "--text", "no number here ."], capsys,
                       "the text holds no numeral: nothing to check")
    (tmp_path / "empty.txt").write_text("\n  \n")
    expect_usage_error([*base, "--file", str(tmp_path / "empty.txt")], capsys, "is empty: no text to check")
    expect_usage_error([*base, "--file", str(tmp_path / "missing.txt")], capsys, "missing.txt: no such file")
    expect_usage_error([*base, "--file", str(tmp_path)], capsys, "is a folder, not a text file")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 3\n".encode("latin-1"))
    expect_usage_error([*base, "--file", str(tmp_path / "latin1.txt")], capsys, "is not UTF-8 text")
    expect_usage_error(base, capsys,
                       "give the text to check with one of --text TEXT, --file PATH or --corpus")
    expect_usage_error([*base, "--text", "a 1", "--file", "x.txt"], capsys, "not --text and --file")
    expect_usage_error([*base, "--text", "a 1", "--top", "0"], capsys, "--top must be >= 1, got 0")
    expect_usage_error([*base, "--text", "a 1", "--numeral-chunk-size", "0"], capsys,
                       "--numeral-chunk-size must be >= 1")
    expect_usage_error(["check-numbers", str(tmp_path / "nowhere"), "--text", "a 1"], capsys,
                       "nowhere does not exist")
    nplm = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=4,
                                      hidden_size=4))
    monkeypatch.setattr(cli_evaluate, "load_saved_run", lambda parser, folder: (nplm, tokenizer))
    expect_usage_error([*base, "--text", "a 1"], capsys, f"{run_dir}: check-numbers needs a numeracy LM")
    words = train_word_level_tokenizer(TEXTS)
    monkeypatch.setattr(cli_evaluate, "load_saved_run",
                        lambda parser, folder: (numeracy_model(tokenizer, "drnn"), words))
    expect_usage_error([*base, "--text", "a 1"], capsys,
                       f"{run_dir}: check-numbers needs a numeracy tokenizer")
