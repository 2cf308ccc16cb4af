"""A word-level run reports a Kneser-Ney 5-gram's validation perplexity beside its model's: the figure equals
a KneserNeyLM fitted independently on the same training file with the run's saved tokenizer, the ratio is the
two perplexities', and ``ngram_baseline=False`` or a numeracy LM gets none."""

from __future__ import annotations

import json
import math
import random

import pytest
from transformers import AutoTokenizer

from hf_nlm.hub import write_run_card
from hf_nlm.ngram import KneserNeyLM
from hf_nlm.training import RunSpec, train
from hf_nlm_cli import main


def write_text(path, lines: int, seed: int, numerals: bool = False) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(30)]
    text = [" ".join(rng.choices(words, k=7) + ([str(rng.randint(1, 900))] if numerals else []))
            for _ in range(lines)]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return text


def tiny_spec(tmp_path, model="nplm", numerals=False, **settings) -> RunSpec:
    train_lines = write_text(tmp_path / "train.txt", 80, 0, numerals)
    write_text(tmp_path / "valid.txt", 12, 1, numerals)
    assert train_lines
    sizes = {"embedding_size": 8, "hidden_size": 8} if model != "numeracy_lm" else {}
    settings = {"max_steps": 2, **settings}
    return RunSpec.from_recipe(model, train_file=str(tmp_path / "train.txt"),
                               validation_file=str(tmp_path / "valid.txt"), output_dir=str(tmp_path / "run"),
                               batch_size=2, block_size=8, progress_bar=False, **sizes, **settings)


def test_the_reported_kn5_is_a_kneser_ney_5gram_on_the_same_split(tmp_path, capsys):
    result = train(tiny_spec(tmp_path))
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "run")
    lines = (tmp_path / "train.txt").read_text(encoding="utf-8").splitlines()
    valid = (tmp_path / "valid.txt").read_text(encoding="utf-8").splitlines()
    kn5 = KneserNeyLM.from_texts(lines, tokenizer, 5)
    # Independently: the mean log-probability of the validation stream, each line's ids and then <eos>.
    stream = [i for line in valid for i in (*tokenizer(line, add_special_tokens=False).input_ids,
                                            tokenizer.eos_token_id)]
    expected = math.exp(-float(kn5.stream_log_probs(stream).mean()))

    saved = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    for results in (result.metrics, saved):
        baseline = results["ngram_baseline"]
        assert baseline["model"] == "Kneser-Ney 5-gram" and baseline["order"] == 5
        assert baseline["validation"]["perplexity"] == pytest.approx(expected, rel=1e-9)
        assert baseline["validation"]["num_tokens"] == len(stream)
        assert baseline["ratio"] == pytest.approx(results["validation"]["perplexity"] / expected, rel=1e-9)
    # The card says the same, and says it again when `hf-nlm card` rewrites it from results.json.
    line = (f"A Kneser-Ney 5-gram fitted on the same training split with the same tokenizer has validation "
            f"perplexity {expected:.2f}: this model's is {saved['ngram_baseline']['ratio']:.2f} times that.")
    card = tmp_path / "run" / "README.md"
    assert line in card.read_text(encoding="utf-8")
    card.unlink()
    write_run_card(tmp_path / "run")
    assert line in card.read_text(encoding="utf-8")
    said = capsys.readouterr().err
    assert (f"validation perplexity {saved['validation']['perplexity']:.1f} (Kneser-Ney 5-gram on the same "
            f"split: {expected:.1f}, ratio {saved['ngram_baseline']['ratio']:.2f})") in said


def test_the_baseline_is_optional_and_the_flag_turns_it_off(tmp_path, capsys):
    spec = tiny_spec(tmp_path)
    out = tmp_path / "cli"
    argv = ["train", "--train-file", str(tmp_path / "train.txt"), "--validation-file",
            str(tmp_path / "valid.txt"), "--output-dir", str(out), "--max-steps", "2", "--batch-size", "2",
            "--block-size", "8", "--embedding-size", "8", "--hidden-size", "8", "--no-progress-bar",
            "--no-ngram-baseline"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "ngram_baseline" not in printed and "validation" in printed
    assert "ngram_baseline" not in json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert spec.training.ngram_baseline  # on by default


def test_a_numeracy_lm_gets_no_baseline_and_is_told_why(tmp_path, capsys):
    result = train(tiny_spec(tmp_path, "numeracy_lm", numerals=True, hidden_size=8, embedding_size=8))
    assert "ngram_baseline" not in result.metrics
    assert "no Kneser-Ney 5-gram baseline: a numeracy LM" in capsys.readouterr().err


def test_a_model_far_behind_the_5gram_is_told_so():
    from hf_nlm.training.run import WEAK_RATIO, comparison_line

    def results(ppl: float) -> dict:
        return {"validation": {"perplexity": ppl},
                "ngram_baseline": {"model": "Kneser-Ney 5-gram", "validation": {"perplexity": 161.0},
                                   "ratio": ppl / 161.0}}

    assert comparison_line(results(4449.0)).startswith(
        "validation perplexity 4449.0 (Kneser-Ney 5-gram on the same split: 161.0, ratio 27.63); the model "
        "has learnt less")
    assert comparison_line(results(161.0 * WEAK_RATIO * 0.99)).endswith(")")
    assert comparison_line({"validation": {"perplexity": 12.345}}) == "validation perplexity 12.3"


def test_no_baseline_without_a_validation_split_or_beyond_its_size(tmp_path):
    from types import SimpleNamespace

    from hf_nlm.training.run import MAX_BASELINE_TOKENS, baseline_skipped

    model, tokenizer = SimpleNamespace(config=SimpleNamespace()), SimpleNamespace()
    splits = {"train": [], "validation": []}
    assert baseline_skipped(model, tokenizer, splits, MAX_BASELINE_TOKENS) is None
    assert "more than" in baseline_skipped(model, tokenizer, splits, MAX_BASELINE_TOKENS + 1)
    assert "no validation split" in baseline_skipped(model, tokenizer, {"train": []}, 10)


def test_the_mixture_is_fitted_on_validation_and_scored_on_test(tmp_path):
    """With ``ngram_mixture`` the run reports the 5-gram on test too and the mixture
    a P_model + (1 - a) P_5gram: a maximises the validation likelihood (no weight 0.01 away does better), and
    each split's perplexity is the mixture's of the two models' per-token probabilities, computed here from
    the saved model and a 5-gram fitted independently."""
    import numpy as np
    from transformers import AutoModelForCausalLM

    from hf_nlm.evaluation import token_log_probs

    write_text(tmp_path / "test.txt", 12, 2)
    spec = tiny_spec(tmp_path, test_file=str(tmp_path / "test.txt"), ngram_mixture=True, max_steps=20)
    result = train(spec)
    run = tmp_path / "run"
    model, tokenizer = AutoModelForCausalLM.from_pretrained(run).eval(), AutoTokenizer.from_pretrained(run)
    kn5 = KneserNeyLM.from_texts((tmp_path / "train.txt").read_text().splitlines(), tokenizer, 5)
    scores = {}
    for split in ("valid", "test"):
        lines = (tmp_path / f"{split}.txt").read_text().splitlines()
        ids, log_p, _ = token_log_probs(model, lines, tokenizer)
        scores[split] = (np.exp(log_p.double().numpy()), np.exp(kn5.stream_log_probs(ids.numpy())))

    def mixture_nll(split: str, a: float) -> float:
        p_model, p_kn = scores[split]
        return float(-np.log(a * p_model + (1 - a) * p_kn).mean())

    saved = json.loads((run / "results.json").read_text(encoding="utf-8"))
    for results in (result.metrics, saved):
        baseline = results["ngram_baseline"]
        assert baseline["test"]["perplexity"] == pytest.approx(
            math.exp(-float(np.log(scores["test"][1]).mean())), rel=1e-9)
        a = baseline["mixture"]["weight"]
        assert 0 < a < 1
        for other in (a - 0.01, a + 0.01):
            assert mixture_nll("valid", a) <= mixture_nll("valid", min(max(other, 0.0), 1.0)) + 1e-12
        assert baseline["mixture"]["validation"]["perplexity"] == pytest.approx(
            math.exp(mixture_nll("valid", a)), rel=1e-6)
        assert baseline["mixture"]["test"]["perplexity"] == pytest.approx(math.exp(mixture_nll("test", a)),
                                                                          rel=1e-6)
    card = (run / "README.md").read_text(encoding="utf-8")
    assert f"with a = {a:.3f} fitted on validation" in card
    # The file also says where its numbers were made: the versions and the thread count.
    import torch
    import transformers

    environment = saved["environment"]
    assert environment["versions"]["torch"] == torch.__version__
    assert environment["versions"]["transformers"] == transformers.__version__
    assert environment["torch_threads"] == torch.get_num_threads()
