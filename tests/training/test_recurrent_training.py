"""Recurrent models in the training loop: stream columns, (variable) truncated BPTT with a carried
state, stateful evaluation, NT-ASGD and fine-tuning, exact resumption, two-process data parallelism."""

from __future__ import annotations

import copy
import json
import textwrap

import pytest
import torch
from datasets import Dataset, DatasetDict
from test_training import assert_bitwise_equal, read_log, run_two_processes_and_one, toy_sentences, weights

from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM
from hf_nlm.data.lm import tokenize_corpus
from hf_nlm.data.stream import MIN_BPTT, bptt_chunks, stream_columns
from hf_nlm.evaluation import evaluate_lm
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, list_checkpoints, train_lm
from hf_nlm.training.optim import WeightAverager, nt_asgd_triggered


@pytest.fixture(scope="module")
def data() -> DatasetDict:
    return DatasetDict(
        {
            "train": Dataset.from_dict({"text": toy_sentences(60, 0)}),
            "validation": Dataset.from_dict({"text": toy_sentences(10, 1)}),
            "test": Dataset.from_dict({"text": toy_sentences(10, 2)}),
        }
    )


@pytest.fixture(scope="module")
def tokenizer(data):
    return train_word_level_tokenizer(data["train"]["text"])


def tiny_awd(tokenizer, seed: int = 0, dropout: bool = True) -> AWDLSTMForCausalLM:
    torch.manual_seed(seed)
    p = 0.2 if dropout else 0.0
    config = AWDLSTMConfig(
        vocab_size=len(tokenizer), embedding_size=8, hidden_size=12, num_hidden_layers=2, dropout=p,
        dropout_hidden=p, dropout_input=p, dropout_embedding=p / 2, weight_drop=p,
        alpha=2.0 if dropout else 0.0, beta=1.0 if dropout else 0.0,
    )
    return AWDLSTMForCausalLM(config)


def config(output_dir, **overrides) -> TrainingConfig:
    values = dict(output_dir=str(output_dir), block_size=6, batch_size=3, num_epochs=2, optimizer="sgd",
                  learning_rate=1.0, lr_scheduler="constant", weight_decay=0.0, logging_steps=1,
                  progress_bar=False, early_stopping_patience=None, save_total_limit=None)
    values.update(overrides)
    return TrainingConfig(**values)


# ----------------------------------------------------------------------------- columns and chunks


def test_stream_columns_hand_example():
    # Targets 2..11 in 3 columns of 4: inputs are the tokens just before, <bos>=1 before the first.
    columns = stream_columns(torch.arange(2, 12), num_columns=3, bos_token_id=1, pad_token_id=0)
    assert columns.input_ids.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 0, 0]]
    assert columns.labels.tolist() == [[2, 3, 4, 5], [6, 7, 8, 9], [10, 11, -100, -100]]
    chunk = columns.chunk(1, 2, slice(1, 3))
    assert chunk["input_ids"].tolist() == [[6, 7], [10, 0]]
    assert chunk["shift_labels"].tolist() == [[7, 8], [11, -100]]


@pytest.mark.parametrize("n, columns", [(1, 1), (17, 4), (40, 5), (9, 4)])
def test_every_token_is_a_target_once_after_its_predecessor(n, columns):
    ids = torch.randint(2, 50, (n,))
    c = stream_columns(ids, columns, bos_token_id=1)
    keep = c.labels != -100
    assert torch.equal(c.labels[keep], ids)  # row-major order == stream order, nothing lost or repeated
    assert torch.equal(c.input_ids[keep], torch.cat([torch.tensor([1]), ids[:-1]]))


def test_bptt_chunks_cover_the_columns():
    assert bptt_chunks(20, 6) == [(0, 6), (6, 6), (12, 6), (18, 2)]
    for seed in range(5):
        chunks = bptt_chunks(5000, 70, variable=True, seed=seed)
        assert chunks == bptt_chunks(5000, 70, variable=True, seed=seed)  # a function of the seed
        starts = [s for s, _ in chunks]
        assert starts == sorted(starts) and starts[0] == 0
        assert all(s + n == t for (s, n), (t, _) in zip(chunks, chunks[1:], strict=False))
        assert sum(n for _, n in chunks) == 5000
        assert all(n >= MIN_BPTT for _, n in chunks[:-1])
    lengths = [n for seed in range(20) for _, n in bptt_chunks(5000, 70, variable=True, seed=seed)[:-1]]
    short = sum(n < 50 for n in lengths) / len(lengths)
    assert 0.01 < short < 0.12  # about 5% of chunks come from N(35, 5)
    assert 66 < sum(n for n in lengths if n >= 50) / sum(n >= 50 for n in lengths) < 70


# ----------------------------------------------------------------------------- stateful evaluation


def test_stateful_evaluation_equals_one_pass_over_the_stream(data, tokenizer):
    model = tiny_awd(tokenizer).eval()
    texts = data["validation"]["text"]
    ids, _ = tokenize_corpus(texts, tokenizer)
    # Independent: the whole stream in one forward, labels shifted the transformers way.
    stream = torch.cat([torch.tensor([tokenizer.eos_token_id]), ids])[None]
    with torch.no_grad():
        expected = model(input_ids=stream, labels=stream).loss.item()
    for block in (1, 5, 1000):
        got = evaluate_lm(model, texts, tokenizer, block_size=block, batch_size=1)
        assert got["num_tokens"] == ids.numel()
        assert got["loss"] == pytest.approx(expected, rel=1e-5)
    # More columns: each restarts from an empty state -- close, not equal.
    several = evaluate_lm(model, texts, tokenizer, block_size=5, batch_size=4)
    assert several["num_tokens"] == ids.numel() and several["loss"] != pytest.approx(expected, rel=1e-7)


# ----------------------------------------------------------------------------- truncated BPTT


@pytest.mark.parametrize("variable", [False, True])
def test_training_carries_the_state_and_scales_the_rate(data, tokenizer, tmp_path, variable):
    """Three updates of the loop == three hand-written truncated-BPTT steps on the same columns."""
    model = tiny_awd(tokenizer, dropout=False)
    reference = copy.deepcopy(model)
    settings = dict(max_steps=3, variable_bptt=variable, block_size=7, max_grad_norm=0.5)
    train_lm(model, tokenizer, data, config(tmp_path, **settings))
    trained = weights(tmp_path / "checkpoints" / "checkpoint-3")

    ids, _ = tokenize_corpus(data["train"]["text"], tokenizer)
    usable = ids.numel() // 3 * 3
    columns = stream_columns(ids[:usable], 3, tokenizer.eos_token_id)
    optimizer = torch.optim.SGD(reference.parameters(), lr=1.0)
    state = None
    for start, length in bptt_chunks(columns.length, 7, variable, seed=42)[:3]:
        out = reference(**columns.chunk(start, length), cache=state, use_cache=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        for group in optimizer.param_groups:
            group["lr"] = length / 7 if variable else 1.0
        optimizer.step()
        optimizer.zero_grad()
        state = out.cache.detach()
    expected = reference.state_dict()
    for name, value in trained.items():  # the tied lm_head.weight is saved once, as the embedding
        torch.testing.assert_close(value, expected[name], rtol=1e-5, atol=1e-6, msg=name)


# ----------------------------------------------------------------------------- NT-ASGD


def test_nt_asgd_trigger_hand_cases():
    assert not nt_asgd_triggered([3.0], 1)
    assert not nt_asgd_triggered([3.0, 2.0], 1)  # improving
    assert nt_asgd_triggered([3.0, 2.0, 2.5], 1)  # 2.5 > min(3, 2)
    assert not nt_asgd_triggered([3.0, 2.0, 2.5], 2)  # 2.5 < min(3): the last two epochs are left out
    assert not nt_asgd_triggered([5.0, 4.0, 3.0, 2.0, 2.0], 5)  # needs more than n epochs
    assert nt_asgd_triggered([5.0, 4.0, 3.0, 2.0, 2.0, 2.5, 2.4, 2.3, 2.2, 2.1, 2.05], 5)


def test_weight_averager_is_the_mean_of_the_iterates():
    model = torch.nn.Linear(3, 2)
    averager = WeightAverager(model)
    snapshots = []
    for _ in range(4):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        averager.update()
        snapshots.append({n: p.detach().clone() for n, p in model.named_parameters()})
    current = {n: p.detach().clone() for n, p in model.named_parameters()}
    with averager.swapped_in():
        for n, p in model.named_parameters():
            torch.testing.assert_close(p, torch.stack([s[n] for s in snapshots]).mean(0))
    for n, p in model.named_parameters():
        assert torch.equal(p, current[n])  # restored


def test_trainer_switches_to_averaging_exactly_when_triggered(data, tokenizer, tmp_path, monkeypatch):
    """Scripted validation losses 5, 4, 4.5, 3: with nonmono=1 the trigger fires after epoch 3; the
    best model (epoch 4) is the mean of the weights after each update of epoch 4."""
    from hf_nlm.training import LMTrainer

    model = tiny_awd(tokenizer)
    trainer = LMTrainer(model, tokenizer, data, config(tmp_path, num_epochs=4, nt_asgd=True, nonmono=1))
    losses = iter([5.0, 4.0, 4.5, 3.0])
    monkeypatch.setattr(trainer, "validation_loss", lambda: next(losses))
    snapshots = []
    trainer.optimizer.register_step_post_hook(
        lambda *_: snapshots.append({n: p.detach().clone() for n, p in model.named_parameters()})
    )
    results = trainer.train()
    steps = trainer.batches.steps(0)
    assert results["averaging_since_step"] == 3 * steps
    epochs = [r for r in read_log(tmp_path) if r["type"] == "epoch"]
    assert [r.get("asgd_from_step") for r in epochs] == [None, None, 3 * steps, None]
    assert [r["averaged"] for r in epochs] == [False, False, False, True]
    assert results["best_epoch"] == 3
    averaged = {n: torch.stack([s[n] for s in snapshots[3 * steps :]]).mean(0) for n in snapshots[0]}
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), averaged[n], rtol=1e-5, atol=1e-6, msg=n)


def test_fine_tune_averages_from_the_first_update(data, tokenizer, tmp_path):
    model = tiny_awd(tokenizer)
    results = train_lm(model, tokenizer, data, config(tmp_path, num_epochs=1, fine_tune=True))
    assert results["averaging_since_step"] == 0
    assert all(r["averaged"] for r in read_log(tmp_path) if r["type"] == "epoch")


def test_nt_asgd_needs_validation_and_excludes_fine_tune(data, tokenizer, tmp_path):
    with pytest.raises(ValueError, match="validation"):
        train_lm(tiny_awd(tokenizer), tokenizer, DatasetDict({"train": data["train"]}),
                 config(tmp_path, nt_asgd=True))
    with pytest.raises(ValueError, match="choose one"):
        config(tmp_path, nt_asgd=True, fine_tune=True)


# ----------------------------------------------------------------------------- exact resumption


def test_resume_mid_epoch_equals_uninterrupted(data, tokenizer, tmp_path):
    """Carried state, averaged weights, variable BPTT and dropout masks all round-trip."""
    settings = dict(num_epochs=3, variable_bptt=True, fine_tune=True, max_grad_norm=0.25, weight_decay=1e-4)
    full, cut = tmp_path / "full", tmp_path / "cut"
    train_lm(tiny_awd(tokenizer), tokenizer, data, config(full, **settings))
    steps = [r for r in read_log(full) if r["type"] == "epoch"][0]["global_step"]
    stop = steps + steps // 2
    train_lm(tiny_awd(tokenizer), tokenizer, data, config(cut, max_steps=stop, **settings))
    assert list_checkpoints(cut)[-1].name == f"checkpoint-{stop}"
    train_lm(tiny_awd(tokenizer, seed=7), tokenizer, data,
             config(cut, resume_from_checkpoint="latest", **settings))
    last = list_checkpoints(full)[-1].name
    assert_bitwise_equal(weights(full / "checkpoints" / last), weights(cut / "checkpoints" / last))
    assert_bitwise_equal(weights(full), weights(cut))

    def story(d):
        return [(r["type"], r["global_step"], r["train_loss"], r.get("val_ppl")) for r in read_log(d)]

    assert story(full) == story(cut)


# ----------------------------------------------------------------------------- two processes

DDP_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import torch
    from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM
    from hf_nlm.data import load_text_files
    from hf_nlm.tokenization import train_word_level_tokenizer
    from hf_nlm.training import TrainingConfig, train_lm

    out, batch_size = sys.argv[1], int(sys.argv[2])
    data = load_text_files(train="train.txt", validation="valid.txt")
    tokenizer = train_word_level_tokenizer(data["train"]["text"])
    torch.manual_seed(0)
    config = AWDLSTMConfig(vocab_size=len(tokenizer), embedding_size=8, hidden_size=12, num_hidden_layers=2,
                           dropout=0.0, dropout_hidden=0.0, dropout_input=0.0, dropout_embedding=0.0,
                           weight_drop=0.0)
    model = AWDLSTMForCausalLM(config)
    training = TrainingConfig(output_dir=out, block_size=6, batch_size=batch_size, num_epochs=2,
                              learning_rate=1.0, lr_scheduler="constant", weight_decay=0.0, logging_steps=1,
                              progress_bar=False, early_stopping_patience=None, save_total_limit=None,
                              eval_test=False, variable_bptt=True, eval_batch_size=3)
    train_lm(model, tokenizer, data, training)
    torch.save(dict(model.state_dict()), os.path.join(out, f"rank{os.environ.get('RANK', '0')}.pt"))
    """
)


def test_two_process_bptt_equals_one_process_on_all_columns(tmp_path, monkeypatch):
    rank0, rank1, single = run_two_processes_and_one(tmp_path, monkeypatch, DDP_SCRIPT, batch_size=2)
    for name in single:
        assert torch.equal(rank0[name], rank1[name]), name
        torch.testing.assert_close(rank0[name], single[name], rtol=1e-5, atol=1e-6)
    val_two = [r["val_ppl"] for r in read_log(tmp_path / "two") if r["type"] == "epoch"]
    val_one = [r["val_ppl"] for r in read_log(tmp_path / "one") if r["type"] == "epoch"]
    assert val_two == pytest.approx(val_one, rel=1e-5)
    assert json.loads((tmp_path / "two" / "results.json").read_text())["num_processes"] == 2


# ----------------------------------------------------------------------------- the command line


def test_cli_trains_fine_tunes_evaluates_and_generates_an_awd_lstm(tmp_path, capsys):
    from hf_nlm_cli import main

    files = {}
    for split, n, seed in [("train", 60, 0), ("valid", 10, 1), ("test", 10, 2)]:
        files[split] = tmp_path / f"{split}.txt"
        files[split].write_text("\n".join(toy_sentences(n, seed)) + "\n")
    data = ["--train-file", str(files["train"]), "--validation-file", str(files["valid"]),
            "--test-file", str(files["test"])]
    loop = ["--block-size", "6", "--batch-size", "3", "--eval-batch-size", "2", "--optimizer", "adam",
            "--learning-rate", "0.02", "--max-grad-norm", "0.25", "--no-progress-bar",
            "--early-stopping-patience", "none"]
    run, tuned = tmp_path / "run", tmp_path / "tuned"
    assert main(["train", "--model", "awd_lstm", "--embedding-size", "8", "--hidden-size", "12",
                 "--num-hidden-layers", "2", "--weight-drop", "0.2", "--dropout-input", "0.1",
                 "--dropout-hidden", "0.1", "--dropout", "0.1", "--output-dir", str(run), "--num-epochs", "6",
                 "--variable-bptt", "--nt-asgd", "--nonmono", "1", *data, *loop]) == 0
    first = json.loads((run / "results.json").read_text())
    assert (first["test"]["perplexity"]
            < 0.5 * len(json.loads((run / "tokenizer.json").read_text())["model"]["vocab"]))

    capsys.readouterr()
    assert main(["evaluate", str(run), "--test-file", str(files["test"]), "--block-size", "6",
                 "--batch-size", "1"]) == 0
    assert (json.loads(capsys.readouterr().out)["perplexity"]
            == pytest.approx(first["test"]["perplexity"], rel=1e-5))

    assert main(["train", "--init-from", str(run), "--fine-tune", "--output-dir", str(tuned),
                 "--num-epochs", "1", *data, *loop]) == 0
    second = json.loads((tuned / "results.json").read_text())
    assert second["averaging_since_step"] == 0
    # It continued the trained model: one epoch from scratch is far worse than this.
    assert second["validation"]["perplexity"] < 1.2 * first["validation"]["perplexity"]

    capsys.readouterr()
    assert main(["generate", str(tuned), "the cat", "a", "--num-beams", "3", "--max-new-tokens", "4",
                 "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["prompt"] for r in lines] == ["the cat", "a"]

    with pytest.raises(SystemExit):
        main(["train", "--model", "awd_lstm", "--context-size", "3", "--output-dir", str(tmp_path / "x"),
              *data])


def test_token_log_probs_of_a_recurrent_model_carry_the_state(data, tokenizer):
    """What n-gram mixtures combine: per-token log-probs, equal to the exact (batch 1) evaluation."""
    from hf_nlm.evaluation import token_log_probs

    model = tiny_awd(tokenizer).eval()
    texts = data["validation"]["text"]
    ids, log_probs, _ = token_log_probs(model, texts, tokenizer, block_size=4)
    exact = evaluate_lm(model, texts, tokenizer, block_size=1000, batch_size=1)
    assert log_probs.numel() == ids.numel() == exact["num_tokens"]
    assert -float(log_probs.sum()) == pytest.approx(exact["total_nll"], rel=1e-5)
