"""Every model type x head x recipe through every door, with one behaviour.

The cases come from the registries: every model type of ``MODEL_TYPES``, every registered head a run of it
builds (``run_heads``), every recipe of the type. A new model type, head or recipe enters by
existing; a registered head that no model type accepts fails :func:`test_every_head_is_in_the_matrix`.

For each case, at tiny sizes and 3 updates, with the default flags otherwise:

* training: ``hf-nlm train``'s flags make the spec that ``RunSpec.from_recipe`` makes (every case);
  ``train(spec)`` trains every head at the default recipe and every recipe at the type's default head; at
  each type's default head and recipe, ``hf-nlm train`` and ``accelerate launch examples/train_lm.py`` (one
  process, launched beside the in-process cases) give the weights of ``train(spec)`` bit for bit;
  transformers' ``Trainer`` with our collator trains every head;
* generation from the saved folder with its saved generation config: ``model.generate``, ``pipeline`` (causal
  LMs: transformers 5 has no text-to-text pipeline), ``hf-nlm generate`` and the web page (causal LMs) give
  the same continuation, and it holds a word, not punctuation and end of text alone;
* evaluation: ``hf-nlm evaluate``, the Python evaluator (``evaluate_lm`` / ``evaluate_seq2seq``) and the
  ``perplexity`` evaluate module fed the model's own token log-probabilities give the same perplexity.

A test that needs a trained case asks the module fixture ``python_runs``, which trains it the first time and
keeps it: each test passes run alone (by node id or ``-k``) and in any order.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file
from tiny_text import lm_lines
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    Trainer,
    TrainingArguments,
    pipeline,
)

from hf_nlm.app.explore import continue_prompt, load_page_run, saved_search
from hf_nlm.data import DataCollatorForCausalLM, check_collator, collate_pairs, tokenize_pairs
from hf_nlm.data.lm import tokenize_stream
from hf_nlm.evaluation import decode_generated, evaluate_lm, evaluate_seq2seq
from hf_nlm.evaluation.lm import token_log_probs
from hf_nlm.heads import HEAD_REGISTRY
from hf_nlm.metrics import load_metric
from hf_nlm.models import MODEL_TYPES
from hf_nlm.training import RunSpec, train
from hf_nlm.training.arguments import spec_from_arguments
from hf_nlm.training.run import build_model, run_heads
from hf_nlm_cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "the city paid"
STEPS = 3




def write_data(folder: Path) -> dict[str, dict[str, Path]]:
    """Text files for the causal LMs and (source, target) CSV files for the encoder-decoders."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"lm": {}, "pairs": {}}
    for split, num, seed in (("train", 80, 0), ("validation", 10, 1)):
        path = folder / f"{split}.txt"
        path.write_text("\n".join(lm_lines(num, seed)) + "\n", encoding="utf-8")
        files["lm"][split] = path
        path = folder / f"{split}.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["source", "target"])
            for line in lm_lines(num // 2, seed + 10):
                writer.writerow([" ".join(line.split()[:3]), line])
        files["pairs"][split] = path
    return files


def data_kind(model_type: str) -> str:
    return "pairs" if MODEL_TYPES[model_type].seq2seq_lm_class is not None else "lm"


def head_setting(model_type: str) -> str:
    """The run setting (and flag) that names the head: ``head``, or its alias in the config's attribute_map
    (the numeracy LM's ``numeral_strategy``)."""
    aliases = MODEL_TYPES[model_type].config_class.attribute_map
    return next((name for name, field in aliases.items() if field == "head"), "head")


def tiny_sizes(model_type: str) -> dict[str, int]:
    fields = {f.name for f in dataclasses.fields(MODEL_TYPES[model_type].config_class)}
    return {"embedding_size": 8, **({"hidden_size": 8} if "embedding_size" in fields else {})}


def settings(model_type: str, head: str, recipe: str, files: dict, output_dir: Path) -> dict:
    kind = data_kind(model_type)
    return {"recipe": recipe, head_setting(model_type): head, **tiny_sizes(model_type),
            "train_file": str(files[kind]["train"]), "validation_file": str(files[kind]["validation"]),
            "max_steps": STEPS, "output_dir": str(output_dir)}


def argv(model_type: str, values: dict) -> list[str]:
    """``hf-nlm train`` flags for the settings ``values``."""
    flags = ["train", "--model", model_type]
    for name, value in values.items():
        flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags


CASES = [(t, h, r) for t in MODEL_TYPES for h in run_heads(t) for r in MODEL_TYPES[t].recipes]
DEFAULT_CASES = [(t, h) for t, h, r in CASES if r == "default"]


def default_head(model_type: str) -> str:
    return MODEL_TYPES[model_type].recipe().model.get("head") or next(
        f.default for f in dataclasses.fields(MODEL_TYPES[model_type].config_class) if f.name == "head")


#: What trains: every head at the default recipe, and every other recipe at the type's default head.
TRAINED = [(t, h, r) for t, h, r in CASES if r == "default" or h == default_head(t)]


def test_every_head_is_in_the_matrix():
    """Each registered head trains with some model type, and each model type with some head."""
    assert {h for _, h, _ in CASES} == set(HEAD_REGISTRY)
    assert {t for t, _, _ in CASES} == set(MODEL_TYPES)


# --- accelerate launch: started once, beside the in-process cases ---


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("matrix")


@pytest.fixture(scope="module")
def files(workdir):
    return write_data(workdir / "data")


@pytest.fixture(scope="module")
def launches(workdir, files):
    """``accelerate launch examples/train_lm.py`` (one CPU process) for each model type at its default head
    and recipe, one after another in a background thread while the in-process cases run. ``finished[t]`` is
    set when type ``t``'s launch is done; at the module's end a launch still running is stopped."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    runs = {t: settings(t, default_head(t), "default", files, workdir / "accelerate" / t)
            for t in MODEL_TYPES}
    results: dict[str, subprocess.CompletedProcess] = {}
    finished = {t: threading.Event() for t in runs}
    stop = threading.Event()
    running: list[subprocess.Popen] = []

    def launch_all():
        for model_type, values in runs.items():
            if stop.is_set():
                break
            command = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1",
                       "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                       str(ROOT / "examples" / "train_lm.py"), *argv(model_type, values)[1:]]
            with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) as process:
                running[:] = [process]
                try:
                    stdout, stderr = process.communicate(timeout=300)
                except subprocess.TimeoutExpired:
                    process.kill()
                    stdout, stderr = process.communicate()
                    stderr += "\n(killed after 300 s)"
            results[model_type] = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
            finished[model_type].set()

    thread = threading.Thread(target=launch_all, daemon=True)
    thread.start()
    yield finished, runs, results
    stop.set()
    for process in running:
        if process.poll() is None:
            process.kill()
    thread.join(timeout=60)


# --- the in-process doors ---


def run_cli(*args: str) -> str:
    """``hf-nlm ARGS`` in this process; its stdout (a usage error fails the test with its message)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(args))
    except SystemExit as exit_:
        if exit_.code:
            pytest.fail(f"hf-nlm {' '.join(args)} exited {exit_.code}: {err.getvalue()[-2000:]}")
    return out.getvalue()


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), f"{name} differs between {a} and {b}"


@pytest.mark.parametrize("model_type, head, recipe", CASES)
def test_cli_flags_make_the_spec_of_python(model_type, head, recipe, files, workdir):
    values = settings(model_type, head, recipe, files, workdir / "spec")
    args = build_parser("train").parse_args(argv(model_type, values))
    assert spec_from_arguments(args).to_dict() == RunSpec.from_recipe(model_type, **values).to_dict()


@pytest.fixture(scope="module")
def python_runs(files, workdir):
    """``python_runs(model_type, head, recipe)``: the result of ``train(spec)`` for the case, trained the
    first time a test asks for it and kept for the module, so that each test that needs a trained case
    (training, generation, evaluation, accelerate's weights) passes run alone and in any order. A case
    whose training raises raises again in every test that asks for it."""
    done = {}

    def get(model_type: str, head: str, recipe: str = "default"):
        key = (model_type, head, recipe)
        if key not in done:
            output_dir = workdir / "python" / f"{model_type}-{head}-{recipe}"
            if output_dir.exists():  # what a failed attempt left
                shutil.rmtree(output_dir)
            done[key] = train(RunSpec.from_recipe(model_type, **settings(*key, files, output_dir)))
        return done[key]

    return get


def fixed_batch_loss(model, tokenizer, model_type: str, files: dict) -> float:
    """The model's mean loss per target token on the first lines (pairs) of the training data, dropout off."""
    model.eval()
    train_file = files[data_kind(model_type)]["train"]
    with torch.no_grad():
        if model.config.is_encoder_decoder:
            data = RunSpec.from_recipe(model_type, train_file=str(train_file), output_dir="unused").data
            pairs = data.load(pair_columns=("source", "target"))["train"].select(range(8))
            return evaluate_seq2seq(model, pairs, tokenizer)["loss"]
        lines = train_file.read_text(encoding="utf-8").splitlines()[:16]
        return evaluate_lm(model, lines, tokenizer, batch_size=4)["loss"]


@pytest.mark.parametrize("model_type, head, recipe", TRAINED)
def test_it_trains(model_type, head, recipe, files, workdir, launches, python_runs):
    """``train(spec)``, and at the type's default head and recipe ``hf-nlm train`` too, bit for bit."""
    values = settings(model_type, head, recipe, files, workdir / "python" / f"{model_type}-{head}-{recipe}")
    result = python_runs(model_type, head, recipe)
    assert result.model.config.head == head
    assert all(torch.isfinite(p).all() for p in result.model.parameters())
    # It learns: on a fixed batch of its training data, the trained model's loss is below that of the model
    # it started from (the run's own initialisation, rebuilt from its spec and seed, on the same word tree).
    head = getattr(result.model, "lm_head", None)
    tree = head.tree() if callable(getattr(head, "tree", None)) else None
    train_texts = files[data_kind(model_type)]["train"].read_text(encoding="utf-8").splitlines()
    untrained = build_model(result.spec, result.tokenizer, train_texts, tree=tree)
    before = fixed_batch_loss(untrained, result.tokenizer, model_type, files)
    after = fixed_batch_loss(result.model, result.tokenizer, model_type, files)
    assert after < before, f"the loss on a fixed training batch went from {before:.4f} to {after:.4f}"
    if head == "split":  # no cutoffs given: one tail behind the |V| / 10 most frequent ids
        assert result.model.config.cutoffs == [max(1, len(result.tokenizer) // 10)]
    if (head, recipe) == (default_head(model_type), "default"):
        cli_dir = workdir / "cli" / model_type
        run_cli(*argv(model_type, {**values, "output_dir": str(cli_dir)}))
        assert_same_weights(result.output_dir, cli_dir)


def lm_examples(tokenizer, texts: list[str], block: int = 12) -> Dataset:
    """The stream of ``texts`` (``<eos>`` after each line, the numeracy tokenizer's token features too) cut
    into blocks: the rows a user hands to ``Trainer``."""
    stream, _ = tokenize_stream(texts, tokenizer)
    n = stream["input_ids"].numel() // block * block
    return Dataset.from_dict({name: values[:n].reshape(-1, block, *values.shape[1:]).tolist()
                              for name, values in stream.items()})


class PairCollator:
    """``collate_pairs`` over rows of a ``datasets.Dataset`` of token ids."""

    def __init__(self, pad_token_id: int) -> None:
        self.pad_token_id = pad_token_id

    def __call__(self, rows):
        return collate_pairs([(torch.tensor(r["source"]), torch.tensor(r["target"])) for r in rows],
                             self.pad_token_id)


@pytest.mark.parametrize("model_type, head", DEFAULT_CASES)
def test_transformers_trainer_trains_it(model_type, head, files, workdir):
    """transformers' ``Trainer`` with our collator: 3 updates change the weights and the loss stays finite."""
    values = settings(model_type, head, "default", files, workdir / "trainer" / f"{model_type}-{head}")
    spec = RunSpec.from_recipe(model_type, **values)
    datasets = spec.data.load(pair_columns=("source", "target") if data_kind(model_type) == "pairs" else None)
    texts = datasets["train"]["text"] if data_kind(model_type) == "lm" else \
        [*datasets["train"]["source"], *datasets["train"]["target"]]
    tokenizer = spec.tokenizer.resolve(texts).train(texts)
    model = build_model(spec, tokenizer, texts)
    if data_kind(model_type) == "lm":
        data = lm_examples(tokenizer, datasets["train"]["text"])
        collator = DataCollatorForCausalLM(tokenizer)
        check_collator(collator, tokenizer)
    else:
        examples, _ = tokenize_pairs(datasets["train"], tokenizer)
        data = Dataset.from_dict({"source": [s.tolist() for s in examples.sources],
                                  "target": [t.tolist() for t in examples.targets]})
        collator = PairCollator(tokenizer.pad_token_id)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = TrainingArguments(output_dir=str(workdir / "trainer-out" / model_type / head), max_steps=STEPS,
                             per_device_train_batch_size=4, learning_rate=1e-2, report_to=[], use_cpu=True,
                             save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0,
                             remove_unused_columns=False)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator)
    out = trainer.train()
    assert out.global_step == STEPS and torch.isfinite(torch.tensor(out.training_loss))
    changed = [name for name, p in model.named_parameters() if not torch.equal(before[name], p)]
    assert changed, "no weight changed in 3 updates"


# --- generation and evaluation through every door, on the saved runs ---


def trained(python_runs, model_type: str, head: str):
    """``(folder, model, tokenizer)`` of the case's ``train(spec)`` run at the default recipe (trained here if
    no test has yet), loaded through the Auto classes."""
    folder = python_runs(model_type, head).output_dir
    seq2seq = MODEL_TYPES[model_type].seq2seq_lm_class
    model = (AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM).from_pretrained(folder).eval()
    return folder, model, AutoTokenizer.from_pretrained(folder)


def has_word(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


@pytest.mark.parametrize("model_type, head", DEFAULT_CASES)
def test_every_door_generates_the_same_words(model_type, head, python_runs):
    folder, model, tokenizer = trained(python_runs, model_type, head)
    ids = tokenizer(PROMPT, return_tensors="pt", add_special_tokens=False).input_ids
    if model.config.is_encoder_decoder:
        ids = torch.cat([ids, ids.new_full((1, 1), tokenizer.eos_token_id)], dim=1)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), return_dict_in_generate=True)
    start = 0 if model.config.is_encoder_decoder else ids.shape[1]
    found = (getattr(out, "numerals", None) or [{}])[0]
    by_generate = decode_generated(tokenizer, out.sequences[0, start:],
                                   {t - start: text for t, text in found.items() if t >= start})
    assert has_word(by_generate), f"generate() answered {by_generate!r}"
    by_cli = run_cli("generate", str(folder), PROMPT).strip()
    expected = by_generate if model.config.is_encoder_decoder else decode_generated(
        tokenizer, out.sequences[0, start:], {t - start: text for t, text in found.items() if t >= start},
        prompt=PROMPT)
    assert by_cli == expected
    if not model.config.is_encoder_decoder:  # the page's first answer, from the model's saved search
        run = load_page_run(folder)
        by_page = continue_prompt(run, PROMPT, **saved_search(run), num_return_sequences=1)
        assert by_page["hypotheses"][0]["full_text"] == expected
    if not model.config.is_encoder_decoder and not found:  # pipeline cannot write out an unseen numeral
        generator = pipeline("text-generation", model=model, tokenizer=tokenizer)
        by_pipeline = generator(PROMPT)[0]["generated_text"]
        assert by_pipeline == expected


@pytest.mark.parametrize("model_type, head", DEFAULT_CASES)
def test_every_door_measures_the_same_perplexity(model_type, head, files, python_runs):
    folder, model, tokenizer = trained(python_runs, model_type, head)
    test_file = files[data_kind(model_type)]["validation"]
    by_cli = json.loads(run_cli("evaluate", str(folder), "--test-file", str(test_file), "--batch-size", "1")
                        .splitlines()[-1])
    metric = load_metric("perplexity")
    if model.config.is_encoder_decoder:
        data = RunSpec.from_recipe(model_type, train_file=str(test_file), output_dir="unused").data
        split = data.load(pair_columns=("source", "target"))["train"]
        by_python = evaluate_seq2seq(model, split, tokenizer)
        examples, stats = tokenize_pairs(split, tokenizer)
        nll = 0.0
        with torch.no_grad():
            for source, target in zip(examples.sources, examples.targets, strict=True):
                loss = model(**collate_pairs([(source, target)], tokenizer.pad_token_id)).loss
                nll += loss.item() * target.numel()
        metric.add_batch(nll=[nll], num_tokens=[stats["num_tokens"]], num_words=[stats["num_words"]])
    else:
        texts = test_file.read_text(encoding="utf-8").splitlines()
        by_python = evaluate_lm(model, texts, tokenizer, batch_size=1)
        _, log_probs, num_words = token_log_probs(model, texts, tokenizer, batch_size=1)
        metric.add_batch(nll=[-log_probs.double().sum().item()], num_tokens=[log_probs.numel()],
                         num_words=[num_words])
    by_metric = metric.compute()
    assert by_python["perplexity"] == pytest.approx(by_metric["perplexity"], rel=1e-5)
    assert by_cli["perplexity"] == pytest.approx(by_python["perplexity"], rel=1e-5)


@pytest.mark.parametrize("model_type", list(MODEL_TYPES))
def test_accelerate_launch_trains_the_same_model(model_type, launches, python_runs):
    """``accelerate launch examples/train_lm.py`` with one process gives the weights of ``train(spec)``."""
    finished, runs, results = launches
    python_dir = python_runs(model_type, default_head(model_type)).output_dir
    assert finished[model_type].wait(timeout=900), "accelerate launch did not finish"
    done = results[model_type]
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert_same_weights(Path(runs[model_type]["output_dir"]), python_dir)
