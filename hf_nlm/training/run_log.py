"""The run's JSONL log and the loss / perplexity curves drawn from it."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash
    return records


def truncate_log(path: str | os.PathLike, global_step: int) -> None:
    """Drop records written after ``global_step``: a resumed run redoes those steps and logs them again."""
    records = read_jsonl(path)
    if not records:
        return
    kept = [r for r in records if r.get("global_step", 0) <= global_step]
    tmp = Path(f"{path}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in kept:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    os.replace(tmp, path)


def plot_curves(log_path: str | os.PathLike, out_path: str | os.PathLike) -> str | None:
    """Draw training loss (per logged step and per epoch) and validation perplexity to a PNG.

    Returns the file written, or None when the log holds nothing to draw.
    """
    records = read_jsonl(log_path)
    steps = [r for r in records if r.get("type") == "step"]
    epochs = [r for r in records if r.get("type") == "epoch"]
    # Validation at the end of a run stopped inside an epoch (x: the epochs done, a fraction).
    evals = [r for r in records if r.get("type") == "eval"]
    if not steps and not epochs and not evals:
        return None

    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, safe on servers and under DDP
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(11, 4))
    if steps:
        ax_loss.plot([r["global_step"] for r in steps], [r["train_loss"] for r in steps], lw=1, label="train (logged steps)")
    if epochs:
        ax_loss.plot([r["global_step"] for r in epochs], [r["train_loss"] for r in epochs], "o-", label="train (epoch mean)")
        val = [r for r in epochs if r.get("val_loss") is not None]
        if val:
            ax_loss.plot([r["global_step"] for r in val], [r["val_loss"] for r in val], "s-", label="validation")
            ax_ppl.plot([r["epoch"] + 1 for r in val], [r["val_ppl"] for r in val], "s-", color="C2", label="validation")
        ax_ppl.plot(
            [r["epoch"] + 1 for r in epochs],
            [math.exp(min(r["train_loss"], 50.0)) for r in epochs],
            "o-",
            color="C1",
            label="train",
        )
    if evals:
        ax_loss.plot([r["global_step"] for r in evals], [r["val_loss"] for r in evals], "D", color="C2",
                     label="validation (run end)")
        ax_ppl.plot([r["epoch"] for r in evals], [r["val_ppl"] for r in evals], "D", color="C2",
                    label="validation (run end)")
    ax_loss.set(xlabel="update", ylabel="NLL per token (nats)", title="loss")
    ax_ppl.set(xlabel="epoch", ylabel="perplexity", title="perplexity", yscale="log")
    for ax in (ax_loss, ax_ppl):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.tight_layout()
    fig.savefig(out_path, dpi=100)
    plt.close(fig)
    return os.fspath(out_path)
