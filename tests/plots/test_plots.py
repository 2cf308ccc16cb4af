"""The pictures, checked on their matplotlib figures: training curves, a numeral density, an attention map."""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import pytest
import torch

from hf_nlm.plots.attention import attention_figure
from hf_nlm.plots.numerals import density_figure
from hf_nlm.training.run_folder import SPLIT_COLORS, curves_figure, logging_windows, plot_curves

matplotlib.use("Agg")


def write_log(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def epoch(e, step, train, val):
    return {"type": "epoch", "epoch": e, "global_step": step, "train_loss": train,
            "train_ppl": float(np.exp(train)), "val_loss": val, "val_ppl": float(np.exp(val))}


def steps_and_epochs():
    """Two epochs of 6 updates, logged every 4: windows 1-4, 5-8, 9-12."""
    return [
        {"type": "step", "epoch": 0, "global_step": 4, "train_loss": 6.0},
        epoch(0, 6, 5.5, 5.0),
        {"type": "step", "epoch": 1, "global_step": 8, "train_loss": 4.5},
        {"type": "step", "epoch": 1, "global_step": 12, "train_loss": 4.0},
        epoch(1, 12, 4.2, 4.4),
    ]


def lines_by_label(ax):
    return {line.get_label(): line for line in ax.lines}


def close(fig):
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_each_split_keeps_its_colour_in_both_panels_and_across_runs(tmp_path):
    long_run = curves_figure(write_log(tmp_path / "a.jsonl", steps_and_epochs()),
                             results={"test": {"loss": 4.3}})
    # A second run stopped inside its first epoch: no epoch record, validation at the run's end.
    short_run = curves_figure(write_log(tmp_path / "b.jsonl", [
        {"type": "step", "epoch": 0, "global_step": 5, "train_loss": 6.0},
        {"type": "eval", "epoch": 0.5, "global_step": 7, "val_loss": 5.8, "val_ppl": float(np.exp(5.8))}]),
        results={"test": {"loss": 5.9}})
    colours = {}
    for fig in (long_run, short_run):
        for ax in fig.axes:
            for label, line in lines_by_label(ax).items():
                split = label.split(",")[0]
                colour = matplotlib.colors.to_hex(line.get_color())
                assert colour == matplotlib.colors.to_hex(SPLIT_COLORS[split]), label
                assert colours.setdefault(label, colour) == colour
    loss_ax, ppl_ax = long_run.axes
    # The same series carry the same names in both panels.
    assert (set(lines_by_label(ppl_ax))
            == set(lines_by_label(loss_ax)) - {"train, mean of each logging window"})
    assert {"test, final model", "validation, at the run's end"} <= set(lines_by_label(short_run.axes[0]))
    close(long_run), close(short_run)


def test_the_window_curve_is_the_logged_window_means_at_the_windows_centres(tmp_path):
    log = write_log(tmp_path / "log.jsonl", steps_and_epochs())
    assert logging_windows(json.loads(line) for line in log.read_text().splitlines()) == [
        (1, 4, 6.0), (5, 8, 4.5), (9, 12, 4.0)]
    fig = curves_figure(log)
    window = lines_by_label(fig.axes[0])["train, mean of each logging window"]
    np.testing.assert_allclose(window.get_xdata(), [2.5, 6.5, 10.5])
    np.testing.assert_allclose(window.get_ydata(), [6.0, 4.5, 4.0])
    # The epoch means sit at their epochs' centres (updates 1-6 and 7-12), validation at the epochs' ends.
    epochs = lines_by_label(fig.axes[0])["train, mean of each epoch"]
    np.testing.assert_allclose(epochs.get_xdata(), [3.5, 9.5])
    np.testing.assert_allclose(lines_by_label(fig.axes[0])["validation, at each epoch's end"].get_xdata(),
                               [6, 12])
    close(fig)


def test_the_curves_of_a_real_run_hold_its_logged_windows_and_test_loss(tiny_run):
    records = [json.loads(line) for line in (tiny_run / "log.jsonl").read_text().splitlines()]
    results = json.loads((tiny_run / "results.json").read_text())
    fig = curves_figure(tiny_run / "log.jsonl", results)
    lines = lines_by_label(fig.axes[0])
    np.testing.assert_allclose(lines["train, mean of each logging window"].get_ydata(),
                               [r["train_loss"] for r in records if r["type"] == "step"])
    np.testing.assert_allclose(lines["test, final model"].get_ydata(), [results["test"]["loss"]])
    close(fig)


def test_a_run_shorter_than_one_logging_window_draws_markers_with_their_values(tmp_path):
    log = write_log(tmp_path / "log.jsonl", [epoch(0, 3, 5.5, 5.0)])
    fig = curves_figure(log)
    for ax in fig.axes:
        for line in ax.lines:
            assert line.get_marker() not in (None, "None", "", " ")
        texts = [t.get_text() for t in ax.texts]
        assert len(texts) == 2  # train and validation, each written out
    assert {t.get_text() for t in fig.axes[0].texts} == {"5.500", "5.000"}
    close(fig)
    assert plot_curves(log, tmp_path / "curves.png") == str(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert plot_curves(write_log(tmp_path / "empty.jsonl", []), tmp_path / "none.png") is None


def gaussian(v, mean, std):
    return np.exp(-0.5 * ((v - mean) / std) ** 2) / (std * np.sqrt(2 * np.pi))


@pytest.mark.parametrize(("low", "high", "log_space", "scale"), [
    (0.3, 3000.0, True, "log"),        # positive numerals only: a log axis
    (-50.0, 3000.0, True, "symlog"),   # negative ones hold mass too
    (-2.0, 9.0, False, "linear"),      # the untransformed mixture
])
def test_the_density_axis_fits_where_the_mass_is(low, high, log_space, scale):
    u = np.linspace(np.sign(low) * np.log1p(abs(low)), np.log1p(high), 500)
    v = np.sign(u) * np.expm1(np.abs(u))
    fig = density_figure(v, gaussian(u, u.mean(), 1.0), float(np.median(v)), value=3.5, log_space=log_space)
    ax = fig.axes[0]
    assert ax.get_xscale() == scale
    assert ax.get_xlim() == pytest.approx((v[0], v[-1]))  # the grid: the 0.001-0.999 quantiles
    assert ax.get_ylim()[0] == 0
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all("^" not in label for label in labels)  # plain numbers
    close(fig)


def test_the_attention_colours_run_from_zero_to_the_largest_weight():
    weights = torch.softmax(torch.randn(4, 6, generator=torch.Generator().manual_seed(0)) * 0.1, dim=-1)
    fig = attention_figure(weights, list("abcdef"), list("wxyz"))
    heatmap, colorbar_ax = fig.axes
    image = heatmap.images[0]
    assert image.get_clim() == pytest.approx((0.0, float(weights.max())))
    assert image.colorbar is not None and colorbar_ax is image.colorbar.ax
    assert f"{float(weights.max()):.3g}" in heatmap.get_title()
    assert len(heatmap.texts) == weights.numel()  # a small grid has each weight written out
    close(fig)
