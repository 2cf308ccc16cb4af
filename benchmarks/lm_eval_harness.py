"""EleutherAI's lm-evaluation-harness on run folders of ``hf-nlm train``, through its own command line.

For each model type (``--models``, default NPLM and AWD-LSTM) the script trains a small run on a generated
text (``hf-nlm train ... --max-steps``), then runs, in a process that never imports hf_nlm::

    lm_eval --model hf --model_args pretrained=RUN,trust_remote_code=True --device cpu \\
        --tasks hfnlm_rolling,hfnlm_generate --include_path TASKS --log_samples --output_path OUT

with two local tasks written beside the runs: ``hfnlm_rolling`` (``loglikelihood_rolling`` over the test
text) and ``hfnlm_generate`` (``generate_until``, a few prompts). The rolling task's document is the test file
as the model's own evaluation reads it: one stream, each line followed by the ``<eos>`` that the tokenizer
reads as its sentence-end token, scored after one ``<eos>`` (lm-eval's prefix token, the tokenizer's bos). Its
total log-likelihood is compared with ``hf_nlm.evaluation.evaluate_lm`` on the same file (batch 1: the exact
stream). One JSON line per result on stdout, e.g.
{"benchmark": "lm_eval_harness", "case": "rolling_loglikelihood", "model": "nplm", "value": 1.2e-08,
 "unit": "relative difference", "better": "lower", "target": 1e-06, "lm_eval_nll": ..., "hf_nlm_nll": ...}

    python benchmarks/lm_eval_harness.py            # about a minute per model on 2 CPU cores

Without lm-eval installed (``pip install lm-eval``) it says so on stderr and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCHMARK = "lm_eval_harness"
TARGET = 1e-6  # relative difference of the rolling log-likelihoods
PROMPTS = ["the cat", "a dog saw", "the old man"]
# Small networks: the comparison is of the scoring, not of the models.
SIZES = {"nplm": ["--context-size", "3", "--embedding-size", "16", "--hidden-size", "32"],
         "awd_lstm": ["--embedding-size", "16", "--hidden-size", "32", "--num-hidden-layers", "2"]}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(row: dict) -> None:
    print(json.dumps({"benchmark": BENCHMARK, **row}), flush=True)


def generated_lines(n: int, seed: int) -> list[str]:
    """``n`` sentences of a small random grammar: a text a model learns something of in a few steps."""
    rng = random.Random(seed)
    subjects = ["the cat", "a dog", "the old man", "my sister", "the teacher", "a bird"]
    verbs = ["saw", "liked", "found", "chased", "heard", "painted"]
    objects = ["the house", "a red ball", "the river", "an apple", "the garden", "a small boat"]
    tails = ["", " today", " in the morning", " again", " with care"]
    return [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}{rng.choice(tails)}"
            for _ in range(n)]


def write_data(folder: Path) -> dict[str, Path]:
    """train / valid / test text files (one sentence a line) and the tasks' JSON lines files."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, (n, seed) in {"train": (2000, 0), "valid": (100, 1), "test": (100, 2)}.items():
        files[split] = folder / f"{split}.txt"
        files[split].write_text("\n".join(generated_lines(n, seed)) + "\n", encoding="utf-8")
    test = files["test"].read_text(encoding="utf-8").splitlines()
    files["rolling"] = folder / "rolling.jsonl"
    stream = " <eos> ".join(test) + " <eos>"  # the tokenizer reads the written <eos> as the sentence end
    files["rolling"].write_text(json.dumps({"text": stream}) + "\n", encoding="utf-8")
    files["generate"] = folder / "generate.jsonl"
    prompts = "".join(json.dumps({"prompt": p, "continuation": ""}) + "\n" for p in PROMPTS)
    files["generate"].write_text(prompts, encoding="utf-8")
    return files


def task_yaml(name: str, data_file: Path, body: str) -> str:
    """An lm-eval task reading the JSON lines of ``data_file`` as its test split, then ``body``."""
    return (f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data_file}\n"
            f"test_split: test\n{body}")


def write_tasks(folder: Path, files: dict[str, Path]) -> Path:
    """The two task YAML files of lm-eval's ``--include_path``."""
    tasks = folder / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    (tasks / "hfnlm_rolling.yaml").write_text(task_yaml("hfnlm_rolling", files["rolling"], """\
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{text}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
"""), encoding="utf-8")
    (tasks / "hfnlm_generate.yaml").write_text(task_yaml("hfnlm_generate", files["generate"], """\
output_type: generate_until
doc_to_text: "{{prompt}}"
doc_to_target: "{{continuation}}"
generation_kwargs:
  until: ["<eos>"]
  max_gen_toks: 8
  do_sample: false
metric_list:
  - metric: exact_match
"""), encoding="utf-8")
    return tasks


def offline_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def train_run(model_type: str, files: dict[str, Path], run: Path, max_steps: int) -> None:
    command = [shutil.which("hf-nlm") or "hf-nlm", "train", "--model", model_type,
               "--train-file", str(files["train"]), "--validation-file", str(files["valid"]),
               "--output-dir", str(run), "--max-steps", str(max_steps), "--batch-size", "16",
               "--no-ngram-baseline", "--no-progress-bar", "--overwrite-output-dir", *SIZES[model_type]]
    log("$ " + " ".join(command))
    subprocess.run(command, check=True, env=offline_env(), stdout=subprocess.DEVNULL)


def run_lm_eval(run: Path, tasks: Path, out: Path) -> tuple[dict, dict[str, list[dict]]]:
    """``lm_eval`` on ``run`` (a fresh process: it imports no hf_nlm of its own); its results and samples."""
    lm_eval = shutil.which("lm_eval") or shutil.which("lm-eval")
    command = [lm_eval, "--model", "hf", "--model_args", f"pretrained={run},trust_remote_code=True",
               "--tasks", "hfnlm_rolling,hfnlm_generate", "--include_path", str(tasks), "--device", "cpu",
               "--batch_size", "1", "--log_samples", "--output_path", str(out)]
    log("$ " + " ".join(command))
    done = subprocess.run(command, env=offline_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"lm_eval failed:\n{done.stderr[-4000:]}")
    (results_file,) = sorted(out.rglob("results_*.json"))
    samples = {task: [json.loads(line) for line in next(out.rglob(f"samples_{task}_*.jsonl")).open()]
               for task in ("hfnlm_rolling", "hfnlm_generate")}
    return json.loads(results_file.read_text()), samples


def hf_nlm_scores(run: Path, test_file: Path) -> dict:
    """The model's own evaluation of ``test_file``: the stream of its lines, each followed by <eos>."""
    from hf_nlm.data import load_text_files
    from hf_nlm.evaluation import evaluate_lm
    from hf_nlm.training import load_run

    model, tokenizer = load_run(run)
    return evaluate_lm(model.eval(), load_text_files(test=str(test_file))["test"], tokenizer, batch_size=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["nplm", "awd_lstm"])
    parser.add_argument("--max-steps", type=int, default=200, help="training updates of each run")
    parser.add_argument("--output-dir", default=None, help="where the runs and lm_eval's output go "
                                                           "(default: a temporary folder)")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("lm_eval") is None:
        log(f"{BENCHMARK}: skipped, lm-eval is not installed (pip install lm-eval)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.output_dir or tmp)
        files = write_data(folder / "data")
        tasks = write_tasks(folder, files)
        for model_type in args.models:
            run = folder / "runs" / model_type
            train_run(model_type, files, run, args.max_steps)
            results, samples = run_lm_eval(run, tasks, folder / "lm_eval" / model_type)
            ours = hf_nlm_scores(run, files["test"])
            (rolling,) = samples["hfnlm_rolling"]
            lm_eval_nll = -float(rolling["filtered_resps"][0])
            relative = abs(lm_eval_nll - ours["total_nll"]) / ours["total_nll"]
            theirs = results["results"]["hfnlm_rolling"]
            emit({"case": "rolling_loglikelihood", "model": model_type, "value": relative,
                  "unit": "relative difference", "better": "lower", "target": TARGET,
                  "lm_eval_nll": lm_eval_nll, "hf_nlm_nll": ours["total_nll"],
                  "lm_eval_word_perplexity": theirs["word_perplexity,none"],
                  "hf_nlm_word_perplexity": ours["word_perplexity"], "hf_nlm_perplexity": ours["perplexity"],
                  "num_tokens": ours["num_tokens"], "num_words": ours["num_words"],
                  "max_steps": args.max_steps})
            continuations = {s["doc"]["prompt"]: s["filtered_resps"][0] for s in samples["hfnlm_generate"]}
            emit({"case": "generate_until", "model": model_type, "value": len(continuations),
                  "unit": "prompts", "better": "higher", "continuations": continuations})
    return 0


if __name__ == "__main__":
    sys.exit(main())
