"""EleutherAI's lm-evaluation-harness loads and scores our run folders, offline, with local tasks.

Tiny runs (``train(RunSpec.from_recipe(...))``, a few updates) of every causal model type at its default
head, plus NPLM's other heads and the numeracy LM's, go through ``lm_eval.simple_evaluate(model="hf",
model_args="pretrained=RUN,trust_remote_code=True", ...)`` with three tasks written into a temporary folder
(JSON lines read by ``dataset_path: json``):

* ``loglikelihood_rolling``: each document's log-likelihood equals the sum of the log-softmax of the model's
  logits for each token given its prefix, computed here, after lm-eval's prefix token (the tokenizer's bos;
  a document shorter than the model's max length is one window);
* ``multiple_choice``: each choice's log-likelihood equals the direct computation, and lm-eval picks the
  choice the direct computation ranks first;
* ``generate_until``: each continuation has at most ``max_gen_toks`` tokens and is what ``model.generate``
  gives greedily for the same prompt and length, with the saved generation defaults;

batch size 4 gives the log-likelihoods of batch size 1, and the plain ``lm_eval`` command line, in a process
that knows hf_nlm only through the folder's ``auto_map``, gives the rolling log-likelihood of the Python API.
The encoder-decoder (``story_seq2seq``) goes through ``backend=seq2seq``: its multiple-choice log-likelihoods
equal a direct pass of the encoder over the prompt and the decoder over the choice.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import lm_eval  # at module level: without lm-eval the file fails to import, it does not skip
import pytest
import torch
from lm_eval.tasks import TaskManager
from tiny_text import lm_lines
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from hf_nlm.models import MODEL_TYPES
from hf_nlm.training import RunSpec, train

ROOT = Path(__file__).resolve().parents[1]
STEPS = 3
RELATIVE = 1e-5
MAX_GEN_TOKS = 3
ROLLING_DOCS = ["the city paid w1 w2 of 12 . <eos> a w3 w4 the w5 .",
                "w7 w8 paid 2.5 w9 . <eos> the city of w10 . <eos> a w11 paid the w12 ."]
CHOICE_DOCS = [{"prompt": "the city paid", "choices": ["w1 .", "the w2 of", "12 w3"], "label": 0},
               {"prompt": "a w4 of", "choices": ["the city", "w5 w6 .", "30"], "label": 1},
               {"prompt": "w7 w8", "choices": ["paid", "of the w9"], "label": 1}]
PROMPTS = ["the city paid", "a w3 of the", "w5"]




def is_seq2seq(model_type: str) -> bool:
    return MODEL_TYPES[model_type].seq2seq_lm_class is not None


def default_head(model_type: str) -> str:
    return MODEL_TYPES[model_type].recipe().model.get("head") or next(
        f.default for f in dataclasses.fields(MODEL_TYPES[model_type].config_class) if f.name == "head")


def head_setting(model_type: str) -> str:
    """``head``, or its alias in the config's attribute_map (the numeracy LM's ``numeral_strategy``)."""
    aliases = MODEL_TYPES[model_type].config_class.attribute_map
    return next((name for name, field in aliases.items() if field == "head"), "head")


def tiny_sizes(model_type: str) -> dict[str, int]:
    fields = {f.name for f in dataclasses.fields(MODEL_TYPES[model_type].config_class)}
    return {"embedding_size": 8, **({"hidden_size": 8} if "embedding_size" in fields else {})}


CAUSAL_TYPES = [t for t in MODEL_TYPES if not is_seq2seq(t)]
CASES = ([(t, default_head(t)) for t in CAUSAL_TYPES]
         + [("nplm", "split"), ("nplm", "tree")]
         + [("numeracy_lm", h) for h in ("softmax_digits", "hsoftmax", "drnn", "mog", "combination", "dexp")])
IDS = [f"{t}-{h}" for t, h in CASES]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def task_yaml(folder: Path, name: str, data_file: Path, body: str) -> None:
    """An lm-eval task reading the JSON lines of ``data_file`` as its test split."""
    (folder / f"{name}.yaml").write_text(
        f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data_file}\n"
        f"test_split: test\n{body}", encoding="utf-8")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("lm_eval")


@pytest.fixture(scope="module")
def files(workdir):
    """Text files for the causal LMs and (source, target) CSV files for the encoder-decoder."""
    data = workdir / "data"
    data.mkdir()
    files = {}
    for split, num, seed in (("train", 80, 0), ("validation", 10, 1)):
        lines = lm_lines(num, seed)
        files[split] = data / f"{split}.txt"
        files[split].write_text("\n".join(lines) + "\n", encoding="utf-8")
        files[f"{split}_pairs"] = data / f"{split}.csv"
        pairs = ["source,target"] + [f"{' '.join(line.split()[:3])},{line}" for line in lines[: num // 2]]
        files[f"{split}_pairs"].write_text("\n".join(pairs) + "\n", encoding="utf-8")
    return files


@pytest.fixture(scope="module")
def tasks(workdir):
    """The task folder (``include_path``) and a TaskManager that indexes it alone (lm-eval's own few
    thousand task files take seconds to index and no test reads them)."""
    folder = workdir / "tasks"
    folder.mkdir()
    rolling = write_jsonl(folder / "rolling.jsonl", [{"text": d} for d in ROLLING_DOCS])
    task_yaml(folder, "hfnlm_rolling", rolling,
              'output_type: loglikelihood_rolling\ndoc_to_text: ""\ndoc_to_target: "{{text}}"\n'
              "metric_list:\n  - metric: word_perplexity\n")
    task_yaml(folder, "hfnlm_choice", write_jsonl(folder / "choice.jsonl", CHOICE_DOCS),
              'output_type: multiple_choice\ndoc_to_text: "{{prompt}}"\ndoc_to_choice: "{{choices}}"\n'
              'doc_to_target: "{{label}}"\nmetric_list:\n  - metric: acc\n')
    prompts = write_jsonl(folder / "generate.jsonl", [{"prompt": p} for p in PROMPTS])
    task_yaml(folder, "hfnlm_generate", prompts,
              f'output_type: generate_until\ndoc_to_text: "{{{{prompt}}}}"\ndoc_to_target: ""\n'
              f'generation_kwargs:\n  until: ["<eos>"]\n  max_gen_toks: {MAX_GEN_TOKS}\n  do_sample: false\n'
              "metric_list:\n  - metric: exact_match\n")
    return folder, TaskManager(include_path=str(folder), include_defaults=False)


@pytest.fixture(scope="module")
def runs(files, workdir):
    """``runs(model_type, head)``: the folder of a tiny run, trained the first time a test asks for it."""
    done = {}

    def get(model_type: str, head: str) -> Path:
        if (model_type, head) not in done:
            pairs = "_pairs" if is_seq2seq(model_type) else ""
            output_dir = workdir / "runs" / f"{model_type}-{head}"
            train(RunSpec.from_recipe(
                model_type, **{head_setting(model_type): head}, **tiny_sizes(model_type),
                train_file=str(files[f"train{pairs}"]), validation_file=str(files[f"validation{pairs}"]),
                max_steps=STEPS, output_dir=str(output_dir), ngram_baseline=False))
            done[model_type, head] = output_dir
        return done[model_type, head]

    return get


@pytest.fixture(scope="module")
def scored(runs, tasks):
    """``scored(model_type, head, batch_size)``: lm-eval's logged samples of the three causal tasks."""
    done = {}

    def get(model_type: str, head: str, batch_size: int = 1) -> dict[str, list[dict]]:
        key = (model_type, head, batch_size)
        if key not in done:
            out = lm_eval.simple_evaluate(
                model="hf", model_args=f"pretrained={runs(model_type, head)},trust_remote_code=True",
                tasks=["hfnlm_rolling", "hfnlm_choice", "hfnlm_generate"], task_manager=tasks[1],
                device="cpu", batch_size=batch_size, log_samples=True, bootstrap_iters=0)
            done[key] = {task: sorted(samples, key=lambda s: s["doc_id"])
                         for task, samples in out["samples"].items()}
        return done[key]

    return get


def load(run: Path, kind=AutoModelForCausalLM):
    model = kind.from_pretrained(run, trust_remote_code=True).eval()
    return model, AutoTokenizer.from_pretrained(run, trust_remote_code=True)


@torch.no_grad()
def direct_log_likelihood(model, context: list[int], continuation: list[int]) -> float:
    """log p(continuation | context) from one forward pass over context + continuation[:-1]: the sum of the
    log-softmax of the logits at the positions that predict the continuation's tokens."""
    inputs = torch.tensor([context + continuation[:-1]])
    log_probs = torch.log_softmax(model(input_ids=inputs).logits[0].float(), dim=-1)
    positions = torch.arange(len(context) - 1, inputs.shape[1])
    return log_probs[positions, torch.tensor(continuation)].double().sum().item()


def prefix_token(tokenizer) -> int:
    """lm-eval's prefix token for rolling documents and empty contexts: bos, else eos."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


def choice_log_likelihood(model, tokenizer, prompt: str, choice: str, delimiter: str = " ") -> float:
    """The continuation's tokens are those of prompt + delimiter + choice after the prompt's (lm-eval's split
    of a pair; with a word-level tokenizer they are the choice's words)."""
    context = tokenizer.encode(prompt)
    whole = tokenizer.encode(prompt + delimiter + choice)
    assert whole[: len(context)] == context
    return direct_log_likelihood(model, context, whole[len(context):])


def assert_close(theirs: float, ours: float) -> None:
    assert abs(theirs - ours) <= RELATIVE * abs(ours), (theirs, ours)


@pytest.mark.parametrize("model_type, head", CASES, ids=IDS)
def test_rolling_log_likelihood_is_the_direct_forward_pass(model_type, head, runs, scored):
    model, tokenizer = load(runs(model_type, head))
    for doc, sample in zip(ROLLING_DOCS, scored(model_type, head)["hfnlm_rolling"], strict=True):
        assert sample["doc"]["text"] == doc
        tokens = tokenizer.encode(doc)
        assert 1 < len(tokens) < 2048  # one window: lm-eval's max length here is its default, 2048
        ours = direct_log_likelihood(model, [prefix_token(tokenizer)], tokens)
        assert_close(float(sample["filtered_resps"][0]), ours)


@pytest.mark.parametrize("model_type, head", CASES, ids=IDS)
def test_multiple_choice_log_likelihoods_are_the_direct_forward_pass(model_type, head, runs, scored):
    model, tokenizer = load(runs(model_type, head))
    for doc, sample in zip(CHOICE_DOCS, scored(model_type, head)["hfnlm_choice"], strict=True):
        ours = [choice_log_likelihood(model, tokenizer, doc["prompt"], c) for c in doc["choices"]]
        theirs = [float(ll) for ll, _ in sample["filtered_resps"]]
        for a, b in zip(theirs, ours, strict=True):
            assert_close(a, b)
        picked = max(range(len(ours)), key=ours.__getitem__)
        assert sample["acc"] == float(picked == doc["label"])


@pytest.mark.parametrize("model_type, head", CASES, ids=IDS)
def test_generate_until_obeys_max_gen_toks_and_is_greedy_generate(model_type, head, runs, scored):
    model, tokenizer = load(runs(model_type, head))
    lengths = []
    for prompt, sample in zip(PROMPTS, scored(model_type, head)["hfnlm_generate"], strict=True):
        ids = tokenizer.encode(prompt)
        with torch.no_grad():
            generated = model.generate(torch.tensor([ids]), max_length=len(ids) + MAX_GEN_TOKS,
                                       do_sample=False)
        new = generated[0, len(ids):].tolist()
        assert 1 <= len(new) <= MAX_GEN_TOKS
        expected = tokenizer.decode(new, skip_special_tokens=True).split("<eos>")[0]
        (continuation,) = sample["filtered_resps"]
        assert continuation == expected
        assert len(tokenizer.encode(continuation)) <= MAX_GEN_TOKS
        lengths.append(len(new))
    assert MAX_GEN_TOKS in lengths  # the limit cut some continuation, rather than an early end of text


@pytest.mark.parametrize("model_type, head", CASES, ids=IDS)
def test_batch_size_4_gives_the_log_likelihoods_of_batch_size_1(model_type, head, scored):
    one, four = scored(model_type, head, 1), scored(model_type, head, 4)
    for task in ("hfnlm_rolling", "hfnlm_choice"):
        for a, b in zip(one[task], four[task], strict=True):
            for x, y in zip(a["filtered_resps"], b["filtered_resps"], strict=True):
                x, y = (x, y) if task == "hfnlm_rolling" else (x[0], y[0])
                assert_close(float(y), float(x))


def test_the_lm_eval_command_line_scores_a_run(runs, tasks, workdir):
    """``python -m lm_eval`` as a user types it, in a fresh process: transformers finds the model classes
    through the folder's ``auto_map`` (``trust_remote_code``), not through an ``import hf_nlm`` of the
    caller."""
    run, out = runs("nplm", "softmax"), workdir / "cli"
    command = [sys.executable, "-m", "lm_eval", "--model", "hf",
               "--model_args", f"pretrained={run},trust_remote_code=True",
               "--tasks", "hfnlm_rolling,hfnlm_choice",
               "--include_path", str(tasks[0]), "--device", "cpu", "--batch_size", "1", "--log_samples",
               "--output_path", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    samples = [json.loads(line) for line in next(out.rglob("samples_hfnlm_rolling_*.jsonl")).open()]
    model, tokenizer = load(run)
    for sample in sorted(samples, key=lambda s: s["doc_id"]):
        tokens = tokenizer.encode(sample["doc"]["text"])
        ours = direct_log_likelihood(model, [prefix_token(tokenizer)], tokens)
        assert_close(float(sample["filtered_resps"][0]), ours)
    (results,) = out.rglob("results_*.json")
    assert "acc,none" in json.loads(results.read_text())["results"]["hfnlm_choice"]


def test_the_seq2seq_backend_scores_the_story_model(runs, tasks):
    """``backend=seq2seq`` loads the encoder-decoder with ``AutoModelForSeq2SeqLM`` and scores each choice as
    the target given the prompt as the source: the decoder reads the decoder start token and the choice's
    tokens but the last, and the log-likelihood is that of the choice's tokens."""
    run = runs("story_seq2seq", default_head("story_seq2seq"))
    out = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={run},trust_remote_code=True,backend=seq2seq",
        tasks=["hfnlm_choice"], task_manager=tasks[1], device="cpu", batch_size=1, log_samples=True,
        bootstrap_iters=0)
    model, tokenizer = load(run, AutoModelForSeq2SeqLM)
    start = model.config.decoder_start_token_id
    samples = sorted(out["samples"]["hfnlm_choice"], key=lambda s: s["doc_id"])
    for doc, sample in zip(CHOICE_DOCS, samples, strict=True):
        source = torch.tensor([tokenizer.encode(doc["prompt"])])
        ours = []
        for choice in doc["choices"]:
            target = tokenizer.encode(" " + choice)  # lm-eval encodes the continuation alone here
            with torch.no_grad():
                decoder_inputs = torch.tensor([[start] + target[:-1]])
                logits = model(input_ids=source, decoder_input_ids=decoder_inputs).logits
            log_probs = torch.log_softmax(logits[0].float(), dim=-1)
            ours.append(log_probs[torch.arange(len(target)), torch.tensor(target)].double().sum().item())
        for theirs, mine in zip(sample["filtered_resps"], ours, strict=True):
            assert_close(float(theirs[0]), mine)
        picked = max(range(len(ours)), key=ours.__getitem__)
        assert sample["acc"] == float(picked == doc["label"])
