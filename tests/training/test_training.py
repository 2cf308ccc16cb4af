"""The training loop: learning, schedules, weight decay, exact resumption, early stopping,
non-finite losses, wrong checkpoints and two-process data parallelism."""

from __future__ import annotations

import json
import math
import os
import random
import runpy
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from datasets import Dataset, DatasetDict
from safetensors.torch import load_file

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import (
    BlockBatchSampler,
    TrainingConfig,
    bengio_lr,
    build_lr_scheduler,
    build_optimizer,
    list_checkpoints,
    param_groups,
    train_lm,
)


def toy_sentences(n: int, seed: int) -> list[str]:
    """A learnable toy language: subject verb object, each drawn from a few choices."""
    rng = random.Random(seed)
    subjects = ["the cat", "a dog", "the bird", "my fish"]
    verbs = ["sat on", "ran to", "saw"]
    objects = ["the mat", "a log", "the house"]
    return [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}" for _ in range(n)]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run fastest on one thread, and on a busy 2-core machine two OpenMP threads can
    make each step 100x slower (spin-waiting for a core)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def toy_data() -> DatasetDict:
    return DatasetDict(
        {
            "train": Dataset.from_dict({"text": toy_sentences(120, 0)}),
            "validation": Dataset.from_dict({"text": toy_sentences(20, 1)}),
            "test": Dataset.from_dict({"text": toy_sentences(20, 2)}),
        }
    )


@pytest.fixture(scope="module")
def toy_tokenizer(toy_data):
    return train_word_level_tokenizer(toy_data["train"]["text"])


def tiny_model(tokenizer, seed: int = 0, dropout: float = 0.0) -> NPLMForCausalLM:
    torch.manual_seed(seed)
    config = NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=8, hidden_size=12,
                        dropout=dropout)
    return NPLMForCausalLM(config)


def tiny_config(output_dir: Path, **overrides) -> TrainingConfig:
    values = dict(
        output_dir=str(output_dir),
        block_size=8,
        batch_size=4,
        num_epochs=2,
        learning_rate=0.5,
        logging_steps=3,
        progress_bar=False,
        early_stopping_patience=None,
    )
    values.update(overrides)
    return TrainingConfig(**values)


def read_log(output_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (output_dir / "log.jsonl").read_text().splitlines()]


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


# ----------------------------------------------------------------------------- pieces


def test_bengio_schedule_values(toy_tokenizer, tmp_path):
    eps0, r = 0.3, 0.05  # a large r so the decay is visible after a few steps
    config = tiny_config(tmp_path, learning_rate=eps0, lr_scheduler="bengio", lr_decay=r)
    model = tiny_model(toy_tokenizer)
    optimizer = build_optimizer(model, config)
    scheduler = build_lr_scheduler(optimizer, config)
    seen = {}
    for t in range(0, 101):
        seen[t] = [g["lr"] for g in optimizer.param_groups]
        optimizer.step()
        scheduler.step()
    for t in (0, 1, 2, 10, 37, 100):
        expected = eps0 / (1 + r * t)
        assert all(math.isclose(lr, expected, rel_tol=1e-12) for lr in seen[t]), (t, seen[t], expected)
        assert math.isclose(bengio_lr(t, eps0, r), expected)
    # The paper's values: eps_0 = 1e-3, r = 1e-8.
    assert math.isclose(bengio_lr(10**6, 1e-3, 1e-8), 1e-3 / 1.01)


def test_linear_and_cosine_schedules_reach_zero(toy_tokenizer, tmp_path):
    for name in ("linear", "cosine"):
        config = tiny_config(tmp_path, lr_scheduler=name, learning_rate=1.0, warmup_steps=2)
        optimizer = build_optimizer(tiny_model(toy_tokenizer), config)
        scheduler = build_lr_scheduler(optimizer, config, total_steps=10)
        lrs = []
        for _ in range(10):
            lrs.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        assert lrs[0] < lrs[1] < lrs[2] == 1.0  # warm-up, then the peak
        assert all(a >= b for a, b in zip(lrs[2:], lrs[3:], strict=False))  # then non-increasing
        assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)


def test_weight_decay_only_on_weights(toy_tokenizer, tmp_path):
    model = tiny_model(toy_tokenizer)
    decay, no_decay = param_groups(model, weight_decay=0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)] for p in decay["params"]} == {"model.C.weight", "model.H.weight", "lm_head.weight"}
    assert {names[id(p)] for p in no_decay["params"]} == {"model.H.bias", "lm_head.bias"}
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0

    # With zero gradients an SGD step is pure weight decay: weights shrink, biases stay.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)  # biases start at zero; make them non-zero so decay would show
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = build_optimizer(model, tiny_config(tmp_path, optimizer="sgd", learning_rate=0.5,
                                                   weight_decay=0.1))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for name, p in model.named_parameters():
        if p.ndim >= 2:
            torch.testing.assert_close(p.detach(), before[name] * (1 - 0.5 * 0.1))
        else:
            assert torch.equal(p.detach(), before[name]), name


def test_sampler_splits_global_batch_like_one_process():
    one = BlockBatchSampler(23, batch_size=6, num_processes=1, seed=5)
    two = [BlockBatchSampler(23, batch_size=3, num_processes=2, process_index=p, seed=5) for p in range(2)]
    for epoch in (0, 1):
        one.set_epoch(epoch)
        for s in two:
            s.set_epoch(epoch)
        whole = list(one)
        halves = list(zip(*two, strict=True))
        # 23 = 3 x 6 + 5: the short last batch (5 >= 2 processes) is kept, split 3 + 2.
        assert len(whole) == len(halves) == 4
        for batch, (a, b) in zip(whole, halves, strict=True):
            assert a + b == batch
        assert sorted(i for batch in whole for i in batch) == list(range(23))
    one.set_epoch(0), one.set_epoch(1)
    assert list(one) != [list(b) for b in BlockBatchSampler(23, 6, seed=5)]  # reshuffled per epoch
    resumed = BlockBatchSampler(23, 6, seed=5)
    resumed.set_epoch(1, start_step=2)
    assert list(resumed) == list(one)[2:] and len(resumed) == 2


# ----------------------------------------------------------------------------- training runs


def test_loss_decreases_and_outputs(toy_data, toy_tokenizer, tmp_path):
    model = tiny_model(toy_tokenizer)
    results = train_lm(model, toy_tokenizer, toy_data, tiny_config(tmp_path, num_epochs=4))
    epochs = [r for r in read_log(tmp_path) if r["type"] == "epoch"]
    steps = [r for r in read_log(tmp_path) if r["type"] == "step"]
    assert len(epochs) == 4
    assert epochs[-1]["val_ppl"] < 0.6 * epochs[0]["val_ppl"]
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    assert all(r["tokens_per_s"] > 0 and r["lr"] > 0 for r in steps)
    # Validation perplexity uses every validation token once; the final evaluation agrees.
    assert results["validation"]["num_tokens"] == sum(len(t.split()) + 1
                                                      for t in toy_data["validation"]["text"])
    assert results["validation"]["perplexity"] == pytest.approx(results["best_val_ppl"], rel=1e-5)
    assert results["test"]["perplexity"] < 0.6 * len(toy_tokenizer)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "README.md", "results.json",
                 "curves.png"):
        assert (tmp_path / name).is_file(), name
    assert json.loads((tmp_path / "results.json").read_text())["stop_reason"] == "num_epochs"


class FailAt:
    """Wraps a model's forward: raises (or returns a NaN loss) at the `at`-th training call."""

    def __init__(self, model, at: int, mode: str = "raise") -> None:
        self.forward, self.at, self.mode, self.calls = model.forward, at, mode, 0
        model.forward = self

    def __call__(self, *args, **kwargs):
        out = self.forward(*args, **kwargs)
        if torch.is_grad_enabled():  # count training steps, not evaluation
            self.calls += 1
            if self.calls == self.at:
                if self.mode == "raise":
                    raise KeyboardInterrupt("simulated Ctrl-C")
                out.loss = out.loss * float("nan")
        return out


@pytest.mark.parametrize("interruption", ["exception", "max_steps"])
def test_resume_equals_uninterrupted(toy_data, toy_tokenizer, tmp_path, interruption):
    # Momentum, weight decay, clipping and a decaying rate: optimizer and scheduler state must round-trip.
    settings = dict(num_epochs=2, optimizer="sgd", momentum=0.9, weight_decay=1e-3, max_grad_norm=1.0,
                    lr_scheduler="bengio", lr_decay=0.01, learning_rate=0.3, save_total_limit=None)
    # Dropout: the checkpoint written after an exception inside an update must hold the RNG state from
    # before that update, so that the resumed run redoes it with the same masks.
    dropout = 0.2
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    train_lm(tiny_model(toy_tokenizer, dropout=dropout), toy_tokenizer, toy_data,
             tiny_config(full_dir, **settings))

    # Interrupt in the middle of the second epoch.
    steps_per_epoch = read_log(full_dir)[-1]["global_step"] // 2
    stop = steps_per_epoch + steps_per_epoch // 2
    model = tiny_model(toy_tokenizer, dropout=dropout)
    if interruption == "exception":
        FailAt(model, at=stop + 1)  # update stop + 1 never happens
        with pytest.raises(KeyboardInterrupt):
            train_lm(model, toy_tokenizer, toy_data, tiny_config(cut_dir, **settings))
    else:
        train_lm(model, toy_tokenizer, toy_data, tiny_config(cut_dir, max_steps=stop, **settings))
    assert list_checkpoints(cut_dir)[-1].name == f"checkpoint-{stop}"
    state = json.loads((cut_dir / "checkpoints" / f"checkpoint-{stop}" / "trainer_state.json").read_text())
    assert (state["epoch"], state["step_in_epoch"], state["global_step"]) == (1, stop - steps_per_epoch, stop)

    # other weights: all come from the checkpoint
    resumed = tiny_model(toy_tokenizer, seed=123, dropout=dropout)
    train_lm(resumed, toy_tokenizer, toy_data,
             tiny_config(cut_dir, resume_from_checkpoint="latest", **settings))

    last = f"checkpoint-{2 * steps_per_epoch}"
    assert_bitwise_equal(weights(full_dir / "checkpoints" / last), weights(cut_dir / "checkpoints" / last))
    assert_bitwise_equal(weights(full_dir), weights(cut_dir))  # the best model
    opt_full = torch.load(full_dir / "checkpoints" / last / "optimizer.pt", weights_only=True)
    opt_cut = torch.load(cut_dir / "checkpoints" / last / "optimizer.pt", weights_only=True)
    for k, v in opt_full["state"].items():
        assert torch.equal(v["momentum_buffer"], opt_cut["state"][k]["momentum_buffer"])
    # The log of the resumed run tells the same story (timings aside).
    def story(d):
        return [(r["type"], r["global_step"], r["train_loss"], r.get("val_ppl"), r["lr"])
                for r in read_log(d)]

    assert story(full_dir) == story(cut_dir)


def test_early_stopping_keeps_best_weights(toy_tokenizer, tmp_path):
    # Train on one pattern, validate on a contradicting one: validation gets worse every epoch.
    data = DatasetDict(
        {
            "train": Dataset.from_dict({"text": ["the cat sat on the mat"] * 60}),
            "validation": Dataset.from_dict({"text": ["mat the on sat cat the"] * 5}),
        }
    )
    config = tiny_config(tmp_path, num_epochs=10, early_stopping_patience=2, save_total_limit=None,
                         learning_rate=1.0)
    results = train_lm(tiny_model(toy_tokenizer), toy_tokenizer, data, config)
    epochs = [r for r in read_log(tmp_path) if r["type"] == "epoch"]
    assert results["stop_reason"] == "early_stopping"
    # best at epoch 0, then 2 without improvement
    assert len(epochs) == 3 and results["epochs_completed"] == 3
    assert results["best_epoch"] == 0
    assert epochs[1]["val_ppl"] > epochs[0]["val_ppl"] and epochs[2]["val_ppl"] > epochs[0]["val_ppl"]
    checkpoints = list_checkpoints(tmp_path)
    assert len(checkpoints) == 3
    # the weights after epoch 1, not the last
    assert_bitwise_equal(weights(tmp_path), weights(checkpoints[0]))
    assert not torch.equal(weights(tmp_path)["lm_head.weight"], weights(checkpoints[-1])["lm_head.weight"])


def test_time_budget_starts_no_epoch_that_would_overrun(toy_data, toy_tokenizer, tmp_path):
    # Any budget shorter than two epochs: the first epoch always runs, the second would end too late.
    config = tiny_config(tmp_path, num_epochs=5, max_time_s=1e-3)
    results = train_lm(tiny_model(toy_tokenizer), toy_tokenizer, toy_data, config)
    assert results["stop_reason"] == "max_time" and results["epochs_completed"] == 1
    generous = tiny_config(tmp_path / "generous", num_epochs=2, max_time_s=3600)
    assert (train_lm(tiny_model(toy_tokenizer), toy_tokenizer, toy_data, generous)["stop_reason"]
            == "num_epochs")


def test_time_budget_within_epoch_stops_mid_epoch_validates_and_resumes(toy_data, toy_tokenizer, tmp_path):
    # A budget spent by the first update: with max_time_within_epoch the run stops right after it.
    settings = dict(num_epochs=2, save_total_limit=None)
    cut = tiny_config(tmp_path / "cut", max_time_s=1e-9, max_time_within_epoch=True, **settings)
    results = train_lm(tiny_model(toy_tokenizer), toy_tokenizer, toy_data, cut)
    assert (results["stop_reason"] == "max_time" and results["global_step"] == 1
            and results["epochs_completed"] == 0)
    (point,) = [r for r in read_log(tmp_path / "cut") if r["type"] == "eval"]
    assert point["global_step"] == 1 and 0 < point["epoch"] < 1
    # The validated point is the model kept, and it is the weights after exactly one update.
    assert point["val_ppl"] == pytest.approx(results["validation"]["perplexity"], rel=1e-5)
    one_step = train_lm(tiny_model(toy_tokenizer), toy_tokenizer, toy_data,
                        tiny_config(tmp_path / "one", max_steps=1, **settings))
    assert one_step["validation"]["perplexity"] == pytest.approx(point["val_ppl"], rel=1e-6)
    assert_bitwise_equal(weights(tmp_path / "cut"), weights(tmp_path / "one"))

    # Resumed without a budget, the run finishes both epochs exactly as an uninterrupted one.
    train_lm(tiny_model(toy_tokenizer, seed=123), toy_tokenizer, toy_data,
             tiny_config(tmp_path / "cut", resume_from_checkpoint="latest", **settings))
    train_lm(tiny_model(toy_tokenizer), toy_tokenizer, toy_data, tiny_config(tmp_path / "full", **settings))
    assert_bitwise_equal(weights(tmp_path / "cut"), weights(tmp_path / "full"))


def test_non_finite_loss_raises_and_checkpoints(toy_data, toy_tokenizer, tmp_path):
    model = tiny_model(toy_tokenizer)
    FailAt(model, at=5, mode="nan")
    with pytest.raises(FloatingPointError, match=r"update 5 \(epoch 1, batch 5\)"):
        train_lm(model, toy_tokenizer, toy_data, tiny_config(tmp_path))
    (checkpoint,) = list_checkpoints(tmp_path)
    assert checkpoint.name == "checkpoint-4"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == 4
    saved = weights(checkpoint)
    assert all(torch.isfinite(t).all() for t in saved.values())
    assert_bitwise_equal(saved, {k: v for k, v in model.state_dict().items()})


def test_resume_from_other_model_type_errors(toy_data, toy_tokenizer, tmp_path):
    folder = tmp_path / "checkpoints" / "checkpoint-3"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 3, "config": {}}))
    for name in ("optimizer.pt", "scheduler.pt"):  # a complete checkpoint, as transformers' Trainer writes
        torch.save({}, folder / name)
    config = tiny_config(tmp_path / "out", resume_from_checkpoint=str(folder))
    with pytest.raises(ValueError, match="model_type='gpt2'"):
        train_lm(tiny_model(toy_tokenizer), toy_tokenizer, toy_data, config)


def test_config_rejects_bad_values(tmp_path):
    for bad in [dict(batch_size=0), dict(optimizer="rmsprop"), dict(learning_rate=-1.0),
                dict(momentum=0.9, optimizer="adam"), dict(max_grad_norm=0.0), dict(lr_scheduler="exp"),
                dict(max_time_within_epoch=True), dict(max_time_s=0.0), dict(max_time_s=float("nan"))]:
        with pytest.raises(ValueError):
            tiny_config(tmp_path, **bad)


# ----------------------------------------------------------------------------- two processes

def run_to_completion(cmd: list[str], cwd: Path, env: dict, timeout: float = 180) -> None:
    """Run ``cmd``; on a timeout kill its whole process group (torchrun's workers too)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, err[-3000:]


DDP_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import torch
    from hf_nlm import NPLMConfig, NPLMForCausalLM
    from hf_nlm.data import load_text_files
    from hf_nlm.tokenization import train_word_level_tokenizer
    from hf_nlm.training import TrainingConfig, train_lm

    out, batch_size = sys.argv[1], int(sys.argv[2])
    data = load_text_files(train="train.txt", validation="valid.txt")
    tokenizer = train_word_level_tokenizer(data["train"]["text"])
    torch.manual_seed(0)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=8,
                                       hidden_size=12))
    config = TrainingConfig(output_dir=out, block_size=8, batch_size=batch_size, num_epochs=2,
                            learning_rate=0.5, lr_scheduler="constant", weight_decay=0.0, logging_steps=1,
                            progress_bar=False, early_stopping_patience=None, save_total_limit=None,
                            eval_test=False)
    train_lm(model, tokenizer, data, config)
    torch.save(dict(model.state_dict()), os.path.join(out, f"rank{os.environ.get('RANK', '0')}.pt"))
    """
)


def run_two_processes_and_one(tmp_path, monkeypatch, script: str, batch_size: int) -> tuple[dict, dict, dict]:
    """Run ``script`` under torchrun as 2 CPU processes (gloo) with ``batch_size`` each, and as one process
    with the global batch ``2 * batch_size``; return the final weights of rank 0, rank 1 and the single
    run."""
    (tmp_path / "train.txt").write_text("\n".join(toy_sentences(48, 0)) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(toy_sentences(8, 1)) + "\n")
    (tmp_path / "script.py").write_text(script)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("WORLD_SIZE", None)
    # --standalone: a free port on localhost, so parallel test runs do not collide.
    two = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "script.py", "two", str(batch_size)]
    run_to_completion(two, tmp_path, env)
    # The same script as one process with the global batch, run in this process (saves a start-up).
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["script.py", "one", str(2 * batch_size)])
    runpy.run_path(str(tmp_path / "script.py"), run_name="__main__")
    rank0, rank1 = (torch.load(tmp_path / "two" / f"rank{r}.pt") for r in (0, 1))
    return rank0, rank1, torch.load(tmp_path / "one" / "rank0.pt")


def test_two_process_ddp_equals_one_process_on_the_global_batch(tmp_path, monkeypatch):
    """torchrun, 2 CPU processes (gloo) with batch b == 1 process with batch 2b, same data order."""
    rank0, rank1, single = run_two_processes_and_one(tmp_path, monkeypatch, DDP_SCRIPT, batch_size=3)

    # The data give a short last global batch (split unevenly) and a padded last block.
    blocks = -(-sum(len(t.split()) + 1 for t in toy_sentences(48, 0)) // 8)
    assert blocks % 6 >= 2 and blocks % 6 != 0 and blocks % 2 == 1

    for name in single:
        assert torch.equal(rank0[name], rank1[name]), name  # both ranks end identical
        torch.testing.assert_close(rank0[name], single[name], rtol=1e-5, atol=1e-6)
    loss_two = [r["train_loss"] for r in read_log(tmp_path / "two") if r["type"] == "step"]
    loss_one = [r["train_loss"] for r in read_log(tmp_path / "one") if r["type"] == "step"]
    assert len(loss_two) == len(loss_one) == 2 * (blocks // 6 + 1)
    assert loss_two == pytest.approx(loss_one, rel=1e-5)
    assert json.loads((tmp_path / "two" / "results.json").read_text())["num_processes"] == 2


def test_fresh_run_refuses_a_folder_with_checkpoints(toy_data, toy_tokenizer, tmp_path):
    (tmp_path / "checkpoints" / "checkpoint-9").mkdir(parents=True)
    with pytest.raises(ValueError, match="holds the checkpoints of an unfinished run: to replace it, give "
                       "overwrite_output_dir; to continue it, resume_from_checkpoint; or give another "
                       "output_dir"):
        train_lm(tiny_model(toy_tokenizer), toy_tokenizer, toy_data, tiny_config(tmp_path))
    results = train_lm(tiny_model(toy_tokenizer), toy_tokenizer, toy_data,
                       tiny_config(tmp_path, num_epochs=1, overwrite_output_dir=True))
    assert [p.name for p in list_checkpoints(tmp_path)] == [f"checkpoint-{results['global_step']}"]


def test_split_head_with_unsorted_vocabulary_is_refused(tmp_path):
    # The tokenizer learns its (frequency-sorted) ids on one text; training text where its rarest
    # words dominate makes the head cluster miss the frequent training words.
    tokenizer = train_word_level_tokenizer(["a a a a b b b c c d"] * 3)
    data = DatasetDict({"train": Dataset.from_dict({"text": ["d d d d c c c b b a"] * 20})})
    torch.manual_seed(0)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=4,
                                       hidden_size=4, head="split", cutoffs=[3]))
    with pytest.raises(ValueError, match="not sorted by decreasing frequency"):
        train_lm(model, tokenizer, data, tiny_config(tmp_path))
