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


# Each split keeps its colour in every panel and every run.
SPLIT_COLORS = {"train": "tab:blue", "validation": "tab:orange", "test": "tab:green"}

# A series with this many points or fewer gets its values written beside its markers.
_ANNOTATE_AT_MOST = 3


def _annotate(ax, xs, ys, color, fmt: str) -> None:
    if len(xs) <= _ANNOTATE_AT_MOST:
        for x, y in zip(xs, ys, strict=True):
            ax.annotate(format(y, fmt), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8,
                        color=color)


def logging_windows(records: list[dict]) -> list[tuple[int, int, float]]:
    """The logging windows of a run's ``step`` records: ``(first update, last update, mean train loss)``.

    A window runs from the update after the previous ``step`` record (or the run's start) to its own
    update; its loss is the mean NLL per token over those updates, as the trainer logged it."""
    windows, previous = [], 0
    for r in records:
        if r.get("type") == "step":
            windows.append((previous + 1, r["global_step"], r["train_loss"]))
            previous = r["global_step"]
    return windows


def curves_figure(log_path: str | os.PathLike, results: dict | None = None):
    """The matplotlib Figure of :func:`plot_curves` (two axes: loss per update, perplexity per epoch),
    or None when the log holds nothing to draw. ``results`` (``results.json``'s dict) adds the test split."""
    records = read_jsonl(log_path)
    windows = logging_windows(records)
    epochs = [r for r in records if r.get("type") == "epoch"]
    # Validation at the end of a run stopped inside an epoch (x: the epochs done, a fraction).
    evals = [r for r in records if r.get("type") == "eval"]
    test = (results or {}).get("test") or {}
    if not windows and not epochs and not evals:
        return None

    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, safe on servers and under DDP
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    train, val_color, test_color = SPLIT_COLORS["train"], SPLIT_COLORS["validation"], SPLIT_COLORS["test"]
    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(11, 4))
    if windows:
        # Each window's mean drawn at the window's centre, where a mean over those updates belongs.
        xs = [(first + last) / 2 for first, last, _ in windows]
        ax_loss.plot(xs, [loss for *_, loss in windows], "^--", lw=1, ms=6, mfc="white", color=train,
                     zorder=3, label="train, mean of each logging window")
    starts = [0] + [r["global_step"] for r in epochs[:-1]]
    if epochs:
        # An epoch's mean at the epoch's centre update too, so the two train curves are comparable.
        xs = [(start + 1 + r["global_step"]) / 2 for start, r in zip(starts, epochs, strict=True)]
        ys = [r["train_loss"] for r in epochs]
        ax_loss.plot(xs, ys, "o-", color=train, label="train, mean of each epoch")
        _annotate(ax_loss, xs, ys, train, ".3f")
        x_ep = [r["epoch"] + 1 for r in epochs]
        ppl = [math.exp(min(y, 50.0)) for y in ys]
        ax_ppl.plot(x_ep, ppl, "o-", color=train, label="train, mean of each epoch")
        _annotate(ax_ppl, x_ep, ppl, train, ".4g")
        val = [r for r in epochs if r.get("val_loss") is not None]
        if val:
            xs, ys = [r["global_step"] for r in val], [r["val_loss"] for r in val]
            ax_loss.plot(xs, ys, "s-", color=val_color, label="validation, at each epoch's end")
            _annotate(ax_loss, xs, ys, val_color, ".3f")
            xs, ys = [r["epoch"] + 1 for r in val], [r["val_ppl"] for r in val]
            ax_ppl.plot(xs, ys, "s-", color=val_color, label="validation, at each epoch's end")
            _annotate(ax_ppl, xs, ys, val_color, ".4g")
    if evals:
        for ax, x_key, y_key, fmt in ((ax_loss, "global_step", "val_loss", ".3f"),
                                      (ax_ppl, "epoch", "val_ppl", ".4g")):
            xs, ys = [r[x_key] for r in evals], [r[y_key] for r in evals]
            ax.plot(xs, ys, "D", color=val_color, label="validation, at the run's end")
            _annotate(ax, xs, ys, val_color, fmt)
    if test.get("loss") is not None:
        last = records[-1] if records else {}
        done = max([r["epoch"] + 1 for r in epochs] + [r["epoch"] for r in evals] + [0])
        for ax, x, y, fmt in ((ax_loss, last.get("global_step", 0), test["loss"], ".3f"),
                              (ax_ppl, done, math.exp(min(test["loss"], 50.0)), ".4g")):
            ax.plot([x], [y], "*", ms=11, color=test_color, label="test, final model")
            ax.annotate(format(y, fmt), (x, y), textcoords="offset points", xytext=(-6, -12), ha="right",
                        fontsize=8, color=test_color)
    ax_loss.set(xlabel="update", ylabel="NLL per token (nats)", title="loss")
    ax_ppl.set(xlabel="epoch", ylabel="perplexity", title="perplexity", yscale="log")
    ax_ppl.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:.6g}"))  # 15.4, not 1.54 x 10^1
    if ax_ppl.lines:
        low, high = ax_ppl.get_ylim()
        # Within a decade the ticks are minor ones: label them; over decades, the decades only.
        ax_ppl.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: f"{y:.6g}") if high < 10 * low
                                         else NullFormatter())
    for ax in (ax_loss, ax_ppl):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_curves(log_path: str | os.PathLike, out_path: str | os.PathLike,
                results: dict | None = None) -> str | None:
    """Draw the training loss (the mean of each logging window and of each epoch), validation and
    (with ``results``) test loss per update, and the perplexities per epoch, to a PNG; train, validation
    and test keep one colour each (:data:`SPLIT_COLORS`) in both panels and every run.

    Returns the file written, or None when the log holds nothing to draw.
    """
    fig = curves_figure(log_path, results)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    fig.savefig(out_path, dpi=100)
    plt.close(fig)
    return os.fspath(out_path)
