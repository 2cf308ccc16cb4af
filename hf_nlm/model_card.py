"""Model cards (README.md in a saved model folder), as the Hub shows them."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

PAPERS = {
    "nplm": "Bengio, Ducharme, Vincent & Jauvin, *A Neural Probabilistic Language Model*, JMLR 3 (2003)",
    "lbl": "Mnih & Hinton, *Three New Graphical Models for Statistical Language Modelling*, ICML 2007",
    "hlbl": "Mnih & Hinton, *A Scalable Hierarchical Distributed Language Model*, NIPS 2008",
    "awd_lstm": "Merity, Keskar & Socher, *Regularizing and Optimizing LSTM Language Models*, ICLR 2018",
}


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) >= 1 else f"{value:.4g}"
    return str(value)


def render_model_card(
    config,
    results: Mapping[str, Mapping[str, float | int]] | None = None,
    dataset: str | None = None,
    training: Mapping[str, object] | None = None,
    num_parameters: int | None = None,
    samples: Mapping[str, str] | None = None,
) -> str:
    """Markdown with Hub metadata (YAML front matter), the architecture, results per split and
    how to load the model. ``results`` maps a split name to ``evaluate_lm``'s output."""
    model_type = config.model_type
    lines = ["---", "library_name: transformers", "pipeline_tag: text-generation", "tags:", "- hf-nlm", f"- {model_type}"]
    if dataset:
        lines += ["datasets:", f"- {dataset}"]
    lines += ["---", "", f"# {model_type.upper()} language model" + (f" trained on {dataset}" if dataset else ""), ""]
    if model_type in PAPERS:
        lines += [f"Architecture: {PAPERS[model_type]}, implemented by [hf-nlm](https://pypi.org/project/hf-nlm/).", ""]
    lines += ["## Use", "", "```python", "import hf_nlm  # registers the model type with transformers",
              "from transformers import AutoModelForCausalLM, AutoTokenizer", "",
              'model = AutoModelForCausalLM.from_pretrained("path/to/this/folder")',
              'tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")',
              'ids = tokenizer("the president said", return_tensors="pt").input_ids',
              "print(tokenizer.decode(model.generate(ids, num_beams=5, max_new_tokens=20)[0]))", "```", ""]
    if results:
        lines += ["## Results", "", "| split | perplexity | per-word perplexity | tokens | `<unk>` targets |", "|---|---|---|---|---|"]
        for split, r in results.items():
            lines.append(
                f"| {split} | {_fmt(r['perplexity'])} | {_fmt(r.get('word_perplexity', float('nan')))} | "
                f"{r.get('num_tokens', '')} | {r.get('num_unk', '')} |"
            )
        lines.append("")
    if samples:
        lines += ["## Samples (beam search)", ""]
        lines += [f"- *{prompt}* -> {text}" for prompt, text in samples.items()]
        lines.append("")
    lines += ["## Configuration", ""]
    if num_parameters is not None:
        lines += [f"Parameters: {num_parameters:,}", ""]
    cfg = {k: v for k, v in config.to_diff_dict().items() if k not in ("transformers_version", "architectures")}
    lines += ["```json", json.dumps(cfg, indent=2, sort_keys=True), "```", ""]
    if training:
        lines += ["## Training", "", "```json", json.dumps(dict(training), indent=2, sort_keys=True, default=str), "```", ""]
    return "\n".join(lines)


def write_model_card(output_dir: str | os.PathLike, config, **kwargs) -> str:
    """Write ``README.md`` into ``output_dir``; returns its path."""
    path = os.path.join(os.fspath(output_dir), "README.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_model_card(config, **kwargs))
    return path
