"""Tests of the evaluate metrics shipped in hf_nlm/metrics (perplexity from NLL sums, sacrebleu BLEU)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import evaluate
import pytest
import sacrebleu

from hf_nlm.metrics import AVAILABLE_METRICS, Bleu, Perplexity, load_metric, metric_path

# Three "batches" of an evaluation: summed NLL in nats, predicted tokens, words of the text.
NLL = [12.5, 3.25, 40.0]
TOKENS = [5, 2, 17]
WORDS = [4, 1, 11]


@pytest.fixture
def offline(monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
        monkeypatch.setenv(var, "1")


# ----- perplexity ---------------------------------------------------------------------------------


def test_perplexity_over_several_add_calls_is_exp_of_mean_token_nll():
    metric = Perplexity(keep_in_memory=True)
    metric.add(nll=NLL[0], num_tokens=TOKENS[0])
    metric.add_batch(nll=NLL[1:], num_tokens=TOKENS[1:])
    result = metric.compute()

    mean_nll = (12.5 + 3.25 + 40.0) / (5 + 2 + 17)
    assert result["perplexity"] == pytest.approx(math.exp(mean_nll), rel=1e-12)
    assert result["nll_per_token"] == pytest.approx(mean_nll, rel=1e-12)
    assert result["bits_per_token"] == pytest.approx(mean_nll / math.log(2), rel=1e-12)
    assert result["total_nll"] == pytest.approx(55.75)
    assert result["num_tokens"] == 24
    assert "word_perplexity" not in result and "num_words" not in result


def test_perplexity_is_not_the_mean_of_batch_perplexities():
    # Batches of different sizes: the corpus value weights each token equally.
    result = Perplexity(keep_in_memory=True).compute(nll=[1.0, 30.0], num_tokens=[1, 10])
    assert result["perplexity"] == pytest.approx(math.exp(31.0 / 11))
    assert result["perplexity"] != pytest.approx((math.exp(1.0) + math.exp(3.0)) / 2)


def test_word_perplexity_uses_the_same_nll_over_word_counts():
    metric = Perplexity(keep_in_memory=True)
    for nll, tokens, words in zip(NLL, TOKENS, WORDS, strict=True):
        metric.add(nll=nll, num_tokens=tokens, num_words=words)
    result = metric.compute()
    assert result["num_words"] == 16
    assert result["nll_per_word"] == pytest.approx(55.75 / 16)
    assert result["word_perplexity"] == pytest.approx(math.exp(55.75 / 16), rel=1e-12)
    assert result["perplexity"] == pytest.approx(math.exp(55.75 / 24), rel=1e-12)


def test_perplexity_accepts_tensors_and_resets_after_compute():
    torch = pytest.importorskip("torch")
    metric = Perplexity(keep_in_memory=True)
    metric.add(nll=torch.tensor(2.0), num_tokens=torch.tensor(2))
    metric.add_batch(nll=torch.tensor([1.0, 3.0]), num_tokens=torch.tensor([1, 3]))
    assert metric.compute()["perplexity"] == pytest.approx(math.exp(6.0 / 6))
    # evaluate empties the metric after compute: a second evaluation starts from scratch.
    assert metric.compute(nll=[4.0], num_tokens=[2])["perplexity"] == pytest.approx(math.exp(2.0))


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({"nll": [1.0, float("nan")], "num_tokens": [1, 1]}, "finite"),
        ({"nll": [float("inf")], "num_tokens": [1]}, "finite"),
        ({"nll": [1.0], "num_tokens": [-3]}, ">= 0"),
        ({"nll": [1.0], "num_tokens": [2.5]}, "whole numbers"),
        ({"nll": [1.0], "num_tokens": [1], "num_words": [-1]}, ">= 0"),
        ({"nll": [0.0, 0.0], "num_tokens": [0, 0]}, "zero tokens"),
        ({"nll": [1.0], "num_tokens": [1], "num_words": [0]}, "zero words"),
    ],
)
def test_perplexity_rejects_bad_input(inputs, message):
    with pytest.raises(ValueError, match=message):
        Perplexity(keep_in_memory=True).compute(**inputs)


def test_perplexity_rejects_word_counts_for_only_some_batches():
    metric = Perplexity(keep_in_memory=True)
    metric.add(nll=1.0, num_tokens=1, num_words=1)
    metric.add(nll=1.0, num_tokens=1)
    with pytest.raises(ValueError, match="all or none"):
        metric.compute()


def test_negative_nll_is_an_error_unless_allowed_for_continuous_densities():
    # -log p of a discrete distribution is >= 0: a negative sum is a sign error, not a perplexity below 1.
    with pytest.raises(ValueError, match=r"nll must be >= 0 .* got -2.0 for batch 1: were log-probabilities"):
        Perplexity(keep_in_memory=True).compute(nll=[3.0, -2.0], num_tokens=[1, 4])
    # A Gaussian numeral head can assign density > 1: summed NLL below zero is legitimate there.
    result = Perplexity(keep_in_memory=True).compute(nll=[-2.0], num_tokens=[4], allow_negative_nll=True)
    assert result["perplexity"] == pytest.approx(math.exp(-0.5))
    assert Perplexity(keep_in_memory=True).compute(nll=[0.0], num_tokens=[4])["perplexity"] == 1.0


def test_perplexity_without_batches_is_a_clear_error():
    with pytest.raises(ValueError, match="perplexity has no data"):
        Perplexity(keep_in_memory=True).compute()
    with pytest.raises(ValueError, match="empty list of batches"):
        Perplexity(keep_in_memory=True).compute(nll=[], num_tokens=[])


def test_huge_nll_gives_infinite_perplexity_instead_of_overflow():
    result = Perplexity(keep_in_memory=True).compute(nll=[1e6], num_tokens=[1])
    assert result["perplexity"] == math.inf
    assert result["nll_per_token"] == 1e6


# ----- BLEU ---------------------------------------------------------------------------------------

PREDICTIONS = ["the cat sat on the mat", "a quick brown fox jumps over the lazy dog", "Hello, World!"]
REFERENCES = [
    ["the cat sat on a mat", "there is a cat on the mat"],
    ["the quick brown fox jumped over the lazy dog", "a fast brown fox leaps over a lazy dog"],
    ["hello world !", "Hello World!"],
]


def test_bleu_matches_sacrebleu_corpus_bleu():
    result = Bleu(keep_in_memory=True).compute(predictions=PREDICTIONS, references=REFERENCES)
    expected = sacrebleu.corpus_bleu(PREDICTIONS, [[refs[k] for refs in REFERENCES] for k in range(2)])
    assert result["score"] == pytest.approx(expected.score, abs=1e-9)
    assert 0.0 < result["score"] < 100.0
    assert result["counts"] == expected.counts
    assert result["totals"] == expected.totals
    assert result["precisions"] == pytest.approx(expected.precisions)
    assert result["bp"] == pytest.approx(expected.bp)
    assert (result["sys_len"], result["ref_len"]) == (expected.sys_len, expected.ref_len)


def test_bleu_options_are_passed_to_sacrebleu():
    kwargs = {"tokenize": "char", "lowercase": True, "smooth_method": "floor", "smooth_value": 0.1}
    result = Bleu(keep_in_memory=True).compute(predictions=PREDICTIONS, references=REFERENCES, **kwargs)
    expected = sacrebleu.corpus_bleu(
        PREDICTIONS, [[refs[k] for refs in REFERENCES] for k in range(2)], **kwargs
    )
    assert result["score"] == pytest.approx(expected.score, abs=1e-9)
    lowercase_only = Bleu(keep_in_memory=True).compute(
        predictions=["The Cat sat on THE mat"], references=["the cat sat on the mat"], lowercase=True
    )
    assert lowercase_only["score"] == pytest.approx(100.0)
    case_sensitive = Bleu(keep_in_memory=True).compute(
        predictions=["The Cat sat on THE mat"], references=["the cat sat on the mat"]
    )
    assert case_sensitive["score"] < 50.0


def test_bleu_is_100_for_identical_strings_and_accepts_single_references():
    sentences = ["the cat sat on the mat .", "numbers like 3.14 and 42 count too"]
    result = Bleu(keep_in_memory=True).compute(predictions=sentences, references=sentences)
    assert result["score"] == pytest.approx(100.0)
    assert result["precisions"] == pytest.approx([100.0] * 4)
    assert result["bp"] == 1.0


def test_bleu_with_a_varying_number_of_references():
    references = [["the cat sat on a mat", "there is a cat on the mat"], ["the quick brown fox"]]
    predictions = ["the cat sat on the mat", "the quick brown fox"]
    result = Bleu(keep_in_memory=True).compute(predictions=predictions, references=references)
    expected = sacrebleu.corpus_bleu(
        predictions, [["the cat sat on a mat", "the quick brown fox"], [references[0][1], None]]
    )
    assert result["score"] == pytest.approx(expected.score, abs=1e-9)


def test_bleu_rejects_a_prediction_without_reference():
    with pytest.raises(ValueError, match="prediction 1 has no reference"):
        Bleu(keep_in_memory=True).compute(predictions=["a b c d", "e f g h"], references=[["a b c d"], []])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda bleu: bleu.compute(predictions=[], references=[]), "empty list of predictions"),
        (lambda bleu: bleu.compute(), "BLEU has no segments"),
        (lambda bleu: bleu._compute(predictions=[], references=[]), "zero segments"),
        (lambda bleu: bleu.compute(predictions=["a b"], references=[]), "1 predictions but 0 references"),
    ],
)
def test_bleu_without_segments_is_a_clear_error(call, message):
    # Before: "max() arg is an empty sequence" from sacrebleu, or an IndexError inside evaluate.
    with pytest.raises(ValueError, match=message):
        call(Bleu(keep_in_memory=True))


# ----- loading ------------------------------------------------------------------------------------


def test_load_metric_returns_working_instances(offline):
    ppl = load_metric("perplexity", keep_in_memory=True)
    assert isinstance(ppl, evaluate.Metric)
    assert type(ppl).__name__ == "Perplexity"
    assert ppl.compute(nll=NLL, num_tokens=TOKENS)["perplexity"] == pytest.approx(math.exp(55.75 / 24))
    bleu = load_metric("bleu", keep_in_memory=True)
    assert bleu.compute(predictions=["a b c d"], references=[["a b c d"]])["score"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="unknown metric"):
        load_metric("rouge")


def test_metric_scripts_are_where_evaluate_expects_them():
    for name in AVAILABLE_METRICS:
        path = Path(metric_path(name))
        assert path.is_absolute() and path.is_file()
        assert path.parent.name == name  # evaluate.load(folder) looks for <folder>/<folder name>.py


_LOAD_BY_PATH = """
import json, sys, evaluate
ppl_file, bleu_dir = sys.argv[1], sys.argv[2]
ppl = evaluate.load(ppl_file, keep_in_memory=True)
bleu = evaluate.load(bleu_dir, keep_in_memory=True)
print(json.dumps({
    "ppl": ppl.compute(nll=[12.5, 3.25, 40.0], num_tokens=[5, 2, 17])["perplexity"],
    "bleu": bleu.compute(predictions=["the cat sat on the mat"],
                         references=[["the cat sat on the mat"]])["score"],
    "classes": [type(ppl).__name__, type(bleu).__name__],
}))
"""


@pytest.mark.slow  # a fresh interpreter importing evaluate takes several seconds
def test_evaluate_load_by_file_and_by_folder_works_offline_with_an_empty_cache(tmp_path):
    # A fresh process: evaluate reads the offline flags and cache locations when it is imported.
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_EVALUATE_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf_home"),  # nothing cached: the scripts must come from the package
        HF_MODULES_CACHE=str(tmp_path / "modules"),
    )
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            _LOAD_BY_PATH,
            metric_path("perplexity"),
            str(Path(metric_path("bleu")).parent),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["classes"] == ["Perplexity", "Bleu"]
    assert result["ppl"] == pytest.approx(math.exp(55.75 / 24))
    assert result["bleu"] == pytest.approx(100.0)


# ----- discovery ----------------------------------------------------------------------------------


def test_available_metrics_are_the_metric_folders(tmp_path):
    from hf_nlm.metrics import discover_metrics

    package = Path(metric_path("perplexity")).parent.parent
    folders = sorted(p.name for p in package.iterdir() if (p / f"{p.name}.py").is_file())
    assert list(AVAILABLE_METRICS) == folders
    assert {"perplexity", "adjusted_perplexity", "bleu", "story_cloze"} <= set(AVAILABLE_METRICS)
    # Only <name>/<name>.py counts: a folder without its script, a loose file and a helper are no metric.
    for path in ("zeta/zeta.py", "alpha/alpha.py", "alpha/helper.py", "loose.py", "empty/notes.txt"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert discover_metrics(tmp_path) == ("alpha", "zeta")


_PROBE_METRIC = '''
import datasets
import evaluate


class Probe(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="a probe", citation="", inputs_description="",
                                   features=datasets.Features({"x": datasets.Value("float64")}))

    def _compute(self, x):
        return {"total": sum(x)}
'''


@pytest.mark.slow  # a fresh interpreter importing evaluate takes several seconds
def test_a_metric_folder_dropped_into_the_package_is_available_with_no_other_edit(tmp_path):
    import uuid

    name = f"probe_{uuid.uuid4().hex[:8]}"
    folder = Path(metric_path("perplexity")).parent.parent / name
    folder.mkdir()
    try:
        (folder / f"{name}.py").write_text(_PROBE_METRIC)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1",
               "HF_HOME": str(tmp_path / "hf_home"), "HF_MODULES_CACHE": str(tmp_path / "modules"),
               "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join([str(folder.parents[2]), os.environ.get("PYTHONPATH", "")])}
        script = ("import sys\nfrom hf_nlm.metrics import AVAILABLE_METRICS, load_metric\n"
                  "assert sys.argv[1] in AVAILABLE_METRICS, AVAILABLE_METRICS\n"
                  "print(load_metric(sys.argv[1], keep_in_memory=True).compute(x=[1.5, 2.0])['total'])")
        completed = subprocess.run([sys.executable, "-c", script, name], env=env, capture_output=True,
                                   text=True, timeout=120)
    finally:
        for path in sorted(folder.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        folder.rmdir()
    assert completed.returncode == 0, completed.stderr
    assert float(completed.stdout.strip().splitlines()[-1]) == 3.5
    assert name not in AVAILABLE_METRICS  # this process read the folders before the probe existed
