"""examples/evaluate_lm.py: perplexity and BLEU of a saved model, one process or two under torchrun.

The numbers are checked against hand computations (every target scored by its own forward pass, a
greedy loop written out, sacrebleu called directly), and two processes against one.
"""

from __future__ import annotations

import json
import math
import runpy
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch
from test_training import run_to_completion, toy_sentences

from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM, NPLMConfig, NPLMForCausalLM
from hf_nlm.tokenization import train_word_level_tokenizer

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "evaluate_lm.py"
TEST_LINES = toy_sentences(9, 2) + ["the cat saw a zebra", ""]  # an unknown word and an empty line


@pytest.fixture(scope="module")
def main():
    return runpy.run_path(str(SCRIPT))["main"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """A folder with test.txt and two tiny untrained models saved in it: nplm/ and awd/."""
    root = tmp_path_factory.mktemp("evaluate_script")
    (root / "test.txt").write_text("\n".join(TEST_LINES) + "\n")
    tokenizer = train_word_level_tokenizer(toy_sentences(40, 0))
    torch.manual_seed(0)
    nplm = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=8,
                                      hidden_size=12))
    awd = AWDLSTMForCausalLM(AWDLSTMConfig(vocab_size=len(tokenizer), embedding_size=8, hidden_size=12,
                                           num_hidden_layers=2))
    for name, model in (("nplm", nplm), ("awd", awd)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root


def load(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def stream_of(tokenizer) -> list[int]:
    """The split as the evaluation reads it, built by hand: each line's ids, then <eos>."""
    ids = []
    for line in TEST_LINES:
        ids += tokenizer(line, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
    return ids


def hand_word_count() -> int:
    return sum(len(line.split()) + 1 for line in TEST_LINES)  # words plus one sentence end per line


@torch.no_grad()
def nplm_nll_by_hand(model, tokenizer) -> tuple[float, int]:
    """Each target from its own forward pass over its n - 1 predecessors (<eos> before the start)."""
    n1 = model.config.context_size
    stream = stream_of(tokenizer)
    padded = [tokenizer.eos_token_id] * n1 + stream
    total = 0.0
    for t, target in enumerate(stream):
        logits = model(input_ids=torch.tensor([padded[t:t + n1]])).logits[0, -1]
        total -= torch.log_softmax(logits.double(), -1)[target].item()
    return total, len(stream)


@torch.no_grad()
def awd_nll_by_hand(model, tokenizer) -> tuple[float, int]:
    """The whole stream in one forward pass, from an empty state (<eos> first)."""
    stream = stream_of(tokenizer)
    logits = model(input_ids=torch.tensor([[tokenizer.eos_token_id] + stream[:-1]])).logits[0]
    logp = torch.log_softmax(logits.double(), -1)
    return -logp[torch.arange(len(stream)), torch.tensor(stream)].sum().item(), len(stream)


@pytest.mark.parametrize("name, by_hand", [("nplm", nplm_nll_by_hand), ("awd", awd_nll_by_hand)])
def test_perplexities_equal_a_hand_computation(models, main, name, by_hand, tmp_path):
    # Small blocks: the NPLM split spans several blocks and batches; the AWD-LSTM is read in chunks.
    out = tmp_path / "eval.json"
    results = main([str(models / name), "--test-file", str(models / "test.txt"), "--block-size", "5",
                    "--output", str(out)])
    assert json.loads(out.read_text()) == results
    model, tokenizer = load(models / name)
    total, count = by_hand(model, tokenizer)
    scores = results["test"]
    assert scores["num_tokens"] == count
    assert scores["num_words"] == hand_word_count()
    assert scores["num_unk"] == 1  # "zebra"
    assert scores["total_nll"] == pytest.approx(total, rel=1e-5)
    assert scores["perplexity"] == pytest.approx(math.exp(total / count), rel=1e-5)
    assert scores["word_perplexity"] == pytest.approx(math.exp(total / hand_word_count()), rel=1e-5)
    assert scores["loss"] == pytest.approx(total / count, rel=1e-5)
    assert {k: results[k] for k in ("model", "corpus", "data_files", "split", "num_processes", "exact")} == {
        "model": str(models / name), "corpus": "text", "data_files": [str(models / "test.txt")],
        "split": "test", "num_processes": 1, "exact": True,
    }
    assert results["batch_size"] == (1 if name == "awd" else 32)


@torch.no_grad()
def greedy_by_hand(model, tokenizer, prefix: str, max_new_tokens: int) -> str:
    """Argmax continuation, one full forward pass per new token, stopping at <eos>."""
    ids = [tokenizer.eos_token_id] + tokenizer(prefix, add_special_tokens=False).input_ids
    new = []
    for _ in range(max_new_tokens):
        next_id = int(model(input_ids=torch.tensor([ids + new])).logits[0, -1].argmax())
        if next_id == tokenizer.eos_token_id:
            break
        new.append(next_id)
    return tokenizer.decode(new, skip_special_tokens=True).strip()


def test_bleu_of_greedy_continuations_equals_sacrebleu_on_a_hand_loop(models, main, tmp_path):
    results = main([str(models / "nplm"), "--test-file", str(models / "test.txt"), "--bleu-prefix-words", "2",
                    "--num-beams", "1", "--max-new-tokens", "4", "--max-lines", "6", "--output",
                    str(tmp_path / "e.json")])
    model, tokenizer = load(models / "nplm")
    lines = [line.split() for line in TEST_LINES if len(line.split()) > 2][:6]
    predictions = [greedy_by_hand(model, tokenizer, " ".join(words[:2]), 4) for words in lines]
    expected = sacrebleu.corpus_bleu(predictions, [[" ".join(words[2:]) for words in lines]])
    bleu = results["test"]["bleu"]
    assert bleu["score"] == pytest.approx(expected.score, abs=1e-9)
    assert (bleu["counts"], bleu["totals"]) == (expected.counts, expected.totals)
    assert (bleu["num_segments"], bleu["prefix_words"], bleu["num_beams"],
            bleu["max_new_tokens"]) == (6, 2, 1, 4)
    assert "perplexity" in results["test"]


# The script's main() with several argument lists in one process (saves torchrun start-ups).
DRIVER = """
import json, runpy, sys
main = runpy.run_path(sys.argv[1])["main"]
for argv in json.loads(sys.argv[2]):
    main(argv)
"""


def test_two_processes_give_the_numbers_of_one(models, main, tmp_path):
    """torchrun, 2 CPU processes (gloo): blocks, stream columns, one column (nothing for rank 1) and
    beam-search BLEU are split across the processes and gathered; the results equal one process's."""
    def runs(folder: str) -> list[list[str]]:
        data = ["--test-file", str(models / "test.txt"), "--block-size", "5"]
        bleu = ["--bleu-prefix-words", "2", "--num-beams", "2", "--max-new-tokens", "3"]
        return [
            [str(models / "nplm"), *data, "--batch-size", "3", *bleu, "--output", f"{folder}/nplm.json"],
            [str(models / "awd"), *data, "--batch-size", "3", *bleu, "--output", f"{folder}/awd.json"],
            [str(models / "awd"), *data, "--output", f"{folder}/awd_exact.json"],
        ]

    (tmp_path / "driver.py").write_text(DRIVER)
    env = {k: v for k, v in __import__("os").environ.items() if k != "WORLD_SIZE"}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    run_to_completion([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                       "driver.py", str(SCRIPT), json.dumps(runs(str(tmp_path / "two")))], tmp_path, env)
    for argv in runs(str(tmp_path / "one")):
        main(argv)

    for name in ("nplm.json", "awd.json", "awd_exact.json"):
        one = json.loads((tmp_path / "one" / name).read_text())
        two = json.loads((tmp_path / "two" / name).read_text())
        assert (one["num_processes"], two["num_processes"]) == (1, 2)
        assert one["exact"] == two["exact"] == (name != "awd.json")
        scores_one, scores_two = one.pop("test"), two.pop("test")
        assert {**one, "num_processes": 2} == two
        assert scores_two.pop("bleu", None) == scores_one.pop("bleu", None)
        assert scores_two == pytest.approx(scores_one, rel=1e-6)
        assert scores_two["num_tokens"] == scores_one["num_tokens"] == len(stream_of(load(models / "awd")[1]))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{root}/missing", "--test-file", "{root}/test.txt"], "no such model folder"),
        (["{root}", "--test-file", "{root}/test.txt"], "not a saved model folder"),
        (["{root}/nplm", "--test-file", "{root}/test.txt", "--split", "validation"], "no 'validation' split"),
        (["{root}/nplm", "--test-file", "{root}/nope.txt"], "no such file"),
        (["{root}/nplm"], "give --corpus"),
        (["{root}/nplm", "--test-file", "{root}/test.txt", "--batch-size", "0"], "--batch-size must be >= 1"),
        (["{root}/nplm", "--test-file", "{root}/test.txt", "--bleu-prefix-words", "9"], "more than 9 words"),
    ],
)
def test_bad_input_exits_with_status_2_and_says_why(models, main, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([arg.format(root=models) for arg in argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
