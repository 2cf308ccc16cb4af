"""A run against the numbers its recipe publishes (``hf-nlm train --recipe NAME --check``).

A recipe behind a published number records the figures a run of it gave (``TrainingRecipe.recorded``) and
the paper's for the same setting (``TrainingRecipe.paper``). :func:`check_run` sets a new run's figures beside
both and checks the recorded ones: a recipe is defined by work and a seed, so any machine reproduces them
within :data:`~hf_nlm.training.config.THREAD_TOLERANCE`. The paper's are shown, not checked: its copy of the
corpus, its tokenization and its vocabulary differ from ours.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..hub.model_card import BASELINE_KEY
from .config import THREAD_TOLERANCE


def _baseline(results: Mapping, split: str) -> float:
    return results[BASELINE_KEY][split]["perplexity"]


#: The figures a recipe can publish, each read from a run's ``results.json``.
FIGURES: dict[str, Callable[[Mapping], float]] = {
    "validation_perplexity": lambda r: r["validation"]["perplexity"],
    "test_perplexity": lambda r: r["test"]["perplexity"],
    "kn5_validation_perplexity": lambda r: _baseline(r, "validation"),
    "kn5_test_perplexity": lambda r: _baseline(r, "test"),
    "test_ratio_to_kn5": lambda r: r["test"]["perplexity"] / _baseline(r, "test"),
    "mixture_validation_perplexity": lambda r: r[BASELINE_KEY]["mixture"]["validation"]["perplexity"],
    "mixture_test_perplexity": lambda r: r[BASELINE_KEY]["mixture"]["test"]["perplexity"],
    "mixture_test_ratio_to_kn5": lambda r: (r[BASELINE_KEY]["mixture"]["test"]["perplexity"]
                                            / _baseline(r, "test")),
    # A numeracy LM's adjusted perplexity (Spithourakis & Riedel 2018, sec. 4): all tokens, words, numerals.
    "test_adjusted_perplexity": lambda r: r["test"]["adjusted_perplexity"],
    "test_adjusted_perplexity_words": lambda r: r["test"]["adjusted_perplexity_words"],
    "test_adjusted_perplexity_numerals": lambda r: r["test"]["adjusted_perplexity_numerals"],
}


@dataclass(frozen=True)
class FigureCheck:
    """One figure of a run beside the recipe's: ``measured`` None when the run has no such figure."""

    name: str
    paper: float | None
    recorded: float | None
    measured: float | None
    tolerance: float

    @property
    def ok(self) -> bool:
        """Within the tolerance of the recorded figure (a figure with none recorded is not checked)."""
        if self.recorded is None:
            return True
        return self.measured is not None and abs(self.measured - self.recorded) <= self.tolerance * abs(
            self.recorded)


def run_figures(results: Mapping) -> dict[str, float]:
    """The :data:`FIGURES` a run's ``results`` hold."""
    found = {}
    for name, read in FIGURES.items():
        try:
            found[name] = float(read(results))
        except (KeyError, TypeError):
            continue
    return found


def check_run(recipe, results: Mapping, tolerance: float = THREAD_TOLERANCE) -> list[FigureCheck]:
    """Each figure ``recipe`` (a :class:`~hf_nlm.models.registry.TrainingRecipe`) records or the paper gives,
    with the run's; ``ValueError`` if the recipe records none (it publishes no number to check)."""
    if not recipe.recorded:
        raise ValueError("this recipe records no numbers to check (--check needs a recipe behind a published "
                         "number)")
    unknown = sorted(set(recipe.recorded) - set(FIGURES))
    if unknown:
        raise ValueError(f"the recipe records unknown figures {unknown}; known: {', '.join(FIGURES)}")
    measured = run_figures(results)
    names = [name for name in FIGURES if name in recipe.recorded or name in recipe.paper]
    return [FigureCheck(name, recipe.paper.get(name), recipe.recorded.get(name), measured.get(name),
                        tolerance) for name in names]


def check_table(checks: list[FigureCheck]) -> str:
    """The checks as a plain-text table, one figure a line, and a last line saying whether the run holds."""

    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.4g}" if abs(value) < 10 else f"{value:.2f}"

    lines = [f"{'figure':<28}{'paper':>10}{'recorded':>11}{'this run':>11}  within {checks[0].tolerance:g}"]
    for c in checks:
        verdict = "yes" if c.recorded is not None and c.ok else "NO" if not c.ok else "(not checked)"
        values = f"{shown(c.paper):>10}{shown(c.recorded):>11}{shown(c.measured):>11}"
        lines.append(f"{c.name:<28}{values}  {verdict}")
    failed = [c.name for c in checks if not c.ok]
    lines.append("the run reproduces the recorded numbers" if not failed else
                 f"the run does not reproduce the recorded {', '.join(failed)}")
    return "\n".join(lines)


def recipe_rows(model_type: str | None = None) -> list[dict]:
    """Every recipe of every model type (of ``model_type`` when given), as ``hf-nlm recipes`` lists them: its
    name, model type, corpus, the figure it publishes (its test perplexity when it records or the paper gives
    one, else the first of :data:`FIGURES` it has) with the paper's and the recorded value, the recorded
    run's time on 2 quiet cores, and every figure."""
    from ..models import MODEL_TYPES

    if model_type is not None and model_type not in MODEL_TYPES:
        raise ValueError(f"--model {model_type}: choose from {', '.join(MODEL_TYPES)}")
    rows = []
    for type_name, kind in MODEL_TYPES.items():
        if model_type not in (None, type_name):
            continue
        for name, recipe in kind.recipes.items():
            given = {**recipe.paper, **recipe.recorded}
            figure = next((f for f in ("test_perplexity", *FIGURES) if f in given), None)
            rows.append({
                "recipe": name, "model_type": type_name, "corpus": recipe.data.get("corpus"),
                "figure": figure, "paper": recipe.paper.get(figure), "recorded": recipe.recorded.get(figure),
                "time_s": recipe.time_s, "paper_figures": dict(recipe.paper),
                "recorded_figures": dict(recipe.recorded), "description": recipe.description,
            })
    return rows


def recipes_table(rows: list[dict]) -> str:
    """:func:`recipe_rows` as a plain-text table, one recipe a line."""

    def shown(value) -> str:
        return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    def minutes(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"

    header = ("recipe", "model", "corpus", "figure", "paper", "recorded", "time")
    lines = [(r["recipe"], r["model_type"], shown(r["corpus"]), shown(r["figure"]), shown(r["paper"]),
              shown(r["recorded"]), minutes(r["time_s"])) for r in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in (header, *lines))


__all__ = ["FIGURES", "FigureCheck", "check_run", "check_table", "recipe_rows", "recipes_table",
           "run_figures"]
