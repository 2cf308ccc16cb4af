"""What a finished run leaves in its folder besides the checkpoints: the model with its tokenizer and generation
config, the model card (``README.md``, written once, with the results), ``results.json`` and ``curves.png``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..hub.model_card import RESULTS_NAME, write_model_card
from .checkpoint import quiet_progress_bars
from .run_log import plot_curves


def save_final_model(output_dir: str | os.PathLike, model, tokenizer) -> None:
    """The trained model, its tokenizer and generation config in ``output_dir``; the card comes with the results
    (:func:`write_results`), so that a run that dies while evaluating still leaves its model."""
    with quiet_progress_bars():
        model.save_pretrained(output_dir, safe_serialization=True, model_card=False)
    tokenizer.save_pretrained(output_dir)


def write_results(output_dir: str | os.PathLike, config, results: dict, evaluations: dict, dataset: str | None,
                  training: dict, num_parameters: int, log_path: str | os.PathLike) -> None:
    """The model card (``config``'s model type, the ``evaluations``, the corpus and training settings),
    ``results.json`` (``results``: what ``hf-nlm card`` needs to write the card again) and ``curves.png`` (from
    the run's ``log_path``)."""
    output_dir = Path(output_dir)
    write_model_card(output_dir, config, results=evaluations, dataset=dataset, training=training,
                     num_parameters=num_parameters)
    with open(output_dir / RESULTS_NAME, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, sort_keys=True)
    plot_curves(log_path, output_dir / "curves.png", results=results)


__all__ = ["save_final_model", "write_results"]
