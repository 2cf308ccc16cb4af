"""Model cards (``README.md`` in a saved model folder), as the Hub shows them.

Every card starts with YAML metadata that ``huggingface_hub.ModelCard`` loads (license, language,
library_name, pipeline_tag, tags, the Hub datasets where the corpus has one) and a ``model-index`` with
the measured perplexities (``huggingface_hub.repocard_data.model_index_to_eval_results`` reads it), then
what the model is, its results, training data and procedure, intended use and limitations, how to load
it, its configuration and the paper's BibTeX.

* :func:`render_model_card` / :func:`write_model_card`: the card of a trained model (the training loop's,
  ``hf-nlm card RUN_DIR`` through :func:`write_run_card`) or, with no results, the basic card
  ``save_pretrained`` writes;
* :func:`render_card`: the layout itself, also used for the reference cards in ``model_cards/``
  (``model_cards/generate.py``);
* :class:`CardText`: what a card says about a model type, declared with the model type (its folder's
  ``card.toml``, read into ``config.card_text``; the n-gram baselines' in :mod:`hf_nlm.ngram.cards`), so this
  module knows no model type; :class:`CorpusCard`: what a card says about the training corpus. The caller, who
  knows the corpus, passes its card: each corpus declares one with its entry (:mod:`hf_nlm.data.corpora`), and
  :func:`hf_nlm.data.registry.corpus_card` finds it by name.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..saved_files import check_model_folder

LICENSE = "apache-2.0"  # the license of this package's code, which the saved models run on
LANGUAGE = "en"
LIBRARY_NAME = "transformers"
TASK = {"type": "text-generation", "name": "Language modelling"}
RESULTS_NAME = "results.json"
#: ``results.json``'s key for the count baseline a training run reports beside its model
#: (:func:`hf_nlm.training.train`).
BASELINE_KEY = "ngram_baseline"
CARD_NAME = "README.md"


@dataclass(frozen=True)
class CorpusCard:
    """A corpus as model cards name it: ``hub_id`` goes into ``datasets`` and is the model-index dataset type
    (None: no Hub dataset holds this exact corpus, so ``datasets`` lists none and the type is ``key``)."""

    key: str
    name: str
    description: str
    hub_id: str | None = None


def named_corpus(name: str) -> CorpusCard:
    """The card of a corpus known only by its name: a plain description, no Hub dataset."""
    return CorpusCard(name, name, f"the corpus `{name}`.")


@dataclass(frozen=True)
class Paper:
    short: str  # "Authors, *Title*, Venue (year)"
    bibtex: str


#: How a card loads a causal LM; ``{where}`` is the Hub repo id or the folder.
CAUSAL_LM_LOADING = """import hf_nlm  # registers the model types with transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained("{where}")
tokenizer = AutoTokenizer.from_pretrained("{where}")
ids = tokenizer("the president said", return_tensors="pt").input_ids
print(tokenizer.decode(model.generate(ids, num_beams=5, max_new_tokens=20)[0]))"""


@dataclass(frozen=True)
class CardText:
    """What a card says about a model type: its name, what it is, its paper, and how it is loaded.

    A model type declares it beside its code (``hf_nlm/models/<type>/card.toml``, read by
    :meth:`from_toml` into ``card_text`` on its config class, where every card writer finds it:
    ``save_pretrained``, the training loop and ``hf-nlm card`` all hold the config), so that a new model
    type's card needs no edit here."""

    title: str
    summary: str
    paper: Paper
    extra_tags: tuple[str, ...] = ()
    #: The Hub's task (``pipeline_tag``).
    pipeline_tag: str = "text-generation"
    #: Python code that loads the model, ``{where}`` standing for the repo id or folder.
    how_to_load: str = CAUSAL_LM_LOADING

    @classmethod
    def from_toml(cls, path: str | os.PathLike, **defaults) -> CardText:
        """The card text a model type's folder declares in ``card.toml``: ``title``, ``summary``,
        ``extra_tags``, optionally ``pipeline_tag`` and ``how_to_load``, and a ``[paper]`` table with
        ``short`` and ``bibtex``; ``defaults`` give the fields the file leaves out."""
        with open(path, "rb") as f:
            values = {**defaults, **tomllib.load(f)}
        paper = values.pop("paper")
        return cls(paper=Paper(paper["short"], paper["bibtex"]),
                   extra_tags=tuple(values.pop("extra_tags", ())), **values)



def _fmt(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.2f}" if abs(value) >= 1 else f"{value:.4g}"
    return "" if value is None else str(value)


def card_metadata(
    model_type: str,
    model_name: str,
    perplexities: Mapping[str, float] | None = None,
    corpus: CorpusCard | None = None,
    library_name: str = LIBRARY_NAME,
    tags: Sequence[str] = (),
    card_text: CardText | None = None,
) -> str:
    """The YAML front matter (without the ``---`` lines): ``perplexities`` maps a split to the
    perplexity measured on it, written as the ``model-index``; ``card_text`` gives the tags and task."""
    from huggingface_hub import EvalResult, ModelCardData

    all_tags = ["hf-nlm", model_type, *(card_text.extra_tags if card_text else ()), *tags]
    eval_results = None
    if perplexities and corpus is not None:
        eval_results = [
            EvalResult(
                task_type=TASK["type"], task_name=TASK["name"], dataset_type=corpus.hub_id or corpus.key,
                dataset_name=corpus.name, dataset_split=split, metric_type="perplexity",
                metric_name="Perplexity", metric_value=float(value),
            )
            for split, value in perplexities.items()
        ]
    data = ModelCardData(
        language=LANGUAGE,
        license=LICENSE,
        library_name=library_name,
        pipeline_tag=card_text.pipeline_tag if card_text else "text-generation",
        tags=list(dict.fromkeys(all_tags)),
        datasets=[corpus.hub_id] if corpus is not None and corpus.hub_id else None,
        model_name=model_name if eval_results else None,
        eval_results=eval_results,
    )
    return data.to_yaml()


def load_snippet(card_text: CardText | None, where: str) -> list[str]:
    """Markdown lines: how to load the model from ``where`` (a Hub repo id or a folder)."""
    code = card_text.how_to_load if card_text else CAUSAL_LM_LOADING
    return ["```python", *code.replace("{where}", where).splitlines(), "```"]


INTENDED_USE = [
    "Research and teaching: reproducing and comparing classic language models, as baselines, and for "
    "perplexity measurements on the corpus it was trained on (scored with the same tokenizer).",
    "",
    "Limitations: a small model trained on a small corpus. Its vocabulary is closed (words outside it are "
    "`<unk>`), it knows only the language, period and topics of its training text and repeats their biases, "
    "and its generations are not fluent text: do not use it to produce text for people to read as fact. "
    "Perplexities are comparable only between models scored on the same split with the same tokenizer (every "
    "token, `<eos>` and `<unk>` included, is predicted).",
]


def render_card(
    *,
    model_type: str,
    card_text: CardText | None,
    model_name: str,
    title: str,
    perplexities: Mapping[str, float] | None = None,
    corpus: CorpusCard | None = None,
    about: Sequence[str] = (),
    results: Sequence[str] = (),
    training: Sequence[str] = (),
    load_from: str = "path/to/this/folder",
    config: Mapping | None = None,
    library_name: str = LIBRARY_NAME,
    tags: Sequence[str] = (),
    extra_sections: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """A card: metadata, then ``# title``, what the model type is (``card_text``), ``about`` lines, then the
    sections Results (``results``: markdown lines), Training data, Training procedure (``training``),
    Intended use and limitations, How to load, ``extra_sections``, Configuration (``config`` as JSON) and
    Citation."""
    metadata = card_metadata(model_type, model_name, perplexities, corpus, library_name, tags, card_text)
    lines = ["---", metadata.rstrip("\n"), "---", "", f"# {title}", ""]
    if card_text is not None:
        lines += [card_text.summary, "", f"Paper: {card_text.paper.short}. Implementation: "
                  "[hf-nlm](https://pypi.org/project/hf-nlm/) (Apache-2.0).", ""]
    if about:
        lines += [*about, ""]
    if results:
        lines += ["## Results", "", *results, ""]
    lines += ["## Training data", "",
              f"Trained on {corpus.description}" if corpus else "Not recorded in this card.", ""]
    if training:
        lines += ["## Training procedure and hyperparameters", "", *training, ""]
    lines += ["## Intended use and limitations", "", *INTENDED_USE, ""]
    lines += ["## How to load", "", *load_snippet(card_text, load_from), ""]
    for heading, body in (extra_sections or {}).items():
        lines += [f"## {heading}", "", *body, ""]
    if config:
        lines += ["## Configuration", "", "```json", json.dumps(dict(config), indent=2, sort_keys=True),
                  "```", ""]
    if card_text is not None:
        lines += ["## Citation", "", "```bibtex", card_text.paper.bibtex, "```", ""]
    return "\n".join(lines)


def results_table(results: Mapping[str, Mapping]) -> list[str]:
    """Markdown lines: one row per split of ``evaluate_lm`` outputs."""
    lines = ["| split | perplexity | per-word perplexity | tokens | `<unk>` targets |",
             "|---|---|---|---|---|"]
    for split, r in results.items():
        lines.append(f"| {split} | {_fmt(r['perplexity'])} | {_fmt(r.get('word_perplexity'))} | "
                     f"{_fmt(r.get('num_tokens'))} | {_fmt(r.get('num_unk'))} |")
    return lines


def render_model_card(
    config,
    results: Mapping[str, Mapping[str, float | int]] | None = None,
    dataset: CorpusCard | None = None,
    training: Mapping[str, object] | None = None,
    num_parameters: int | None = None,
    samples: Mapping[str, str] | None = None,
    model_name: str | None = None,
    load_from: str = "path/to/this/folder",
    baseline: Mapping | None = None,
) -> str:
    """The card of a model with ``config``: ``results`` maps a split name to ``evaluate_lm``'s output
    (written as the results table and the model-index), ``dataset`` what the card says about the training
    corpus (a :class:`CorpusCard`: :func:`hf_nlm.data.registry.corpus_card` gives a corpus's by name),
    ``training`` the training settings, ``baseline`` the n-gram model a training run measured on the same
    split (``results.json``'s :data:`BASELINE_KEY`: ``model``, ``validation``, ``ratio``, and ``test`` and
    ``mixture`` where the run measured them). With none of them,
    the basic card that ``save_pretrained`` writes.
    What the card says about the model type is ``config.card_text``, declared with the model type
    (:class:`CardText`)."""
    if dataset is not None and not isinstance(dataset, CorpusCard):
        raise TypeError("dataset= takes a CorpusCard (hf_nlm.data.registry.corpus_card(name)), "
                        f"got {dataset!r}")
    model_type = config.model_type
    doc = getattr(config, "card_text", None)
    corpus = dataset
    name = model_name or (f"{model_type}-{corpus.key}" if corpus else model_type)
    title = (f"{doc.title if doc else model_type.upper()} language model"
             + (f" trained on the {corpus.name}" if corpus else ""))
    results = dict(results or {})
    perplexities = {split: r["perplexity"] for split, r in results.items() if r.get("perplexity") is not None}
    about = []
    if num_parameters is not None:
        about.append(f"Parameters: {num_parameters:,}.")
    if not results:
        about.append("This card was written when the model was saved: it has no evaluation results yet.")
    table = results_table(results) if results else []
    if table and training and training.get("stop_reason"):
        table += ["", f"Training stopped by `{training['stop_reason']}` after "
                      f"{training.get('epochs_completed', '?')} epoch(s), {training.get('global_step', '?')} "
                      "updates; the perplexities are those of the saved weights (the best by validation "
                      "perplexity when there is a validation split), every token scored, `<eos>` and `<unk>` "
                      "included."]
    if table and baseline and "validation" in results:
        table += ["", f"A {baseline['model']} fitted on the same training split with the same tokenizer has "
                      f"validation perplexity {_fmt(baseline['validation']['perplexity'])}: this model's is "
                      f"{baseline['ratio']:.2f} times that"
                      + (f"; on test, {_fmt(baseline['test']['perplexity'])}." if "test" in baseline
                         else ".")]
        mixture = baseline.get("mixture")
        if mixture:
            ngram = mixture.get("model", baseline["model"])
            how = "fitted on validation" if mixture.get("fitted", True) else "fixed"
            table += ["", ("Mixed with it" if ngram == baseline["model"] else f"Mixed with a {ngram}")
                          + f", a P_model + (1 - a) P_{ngram.split()[-1]} with a = {mixture['weight']:.3f} "
                          f"{how} (Bengio et al. 2003, Table 1), the perplexity is "
                          + ", ".join(f"{_fmt(mixture[split]['perplexity'])} on {split}"
                                      for split in ("validation", "test") if split in mixture)
                          + "."]
    train_lines = []
    if training:
        train_lines = ["Trained with `hf_nlm.training.train_lm` (`hf-nlm train`), these settings "
                       "(`TrainingConfig`):", "", "```json",
                       json.dumps(dict(training), indent=2, sort_keys=True, default=str), "```"]
    extra = {}
    if samples:
        extra["Samples (beam search)"] = [f"- *{prompt}* -> {text}" for prompt, text in samples.items()]
    cfg = {k: v for k, v in config.to_diff_dict().items()
           if k not in ("transformers_version", "architectures")}
    return render_card(
        model_type=model_type, card_text=doc, model_name=name, title=title, perplexities=perplexities,
        corpus=corpus, about=about, results=table, training=train_lines, load_from=load_from, config=cfg,
        extra_sections=extra,
    )


def write_model_card(output_dir: str | os.PathLike, config, **kwargs) -> str:
    """Write ``README.md`` into ``output_dir``; returns its path. ``kwargs``: :func:`render_model_card`'s."""
    path = os.path.join(os.fspath(output_dir), CARD_NAME)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_model_card(config, **kwargs))
    return path


def write_run_card(run_dir: str | os.PathLike, dataset: str | None = None, model_name: str | None = None,
                   load_from: str | None = None,
                   corpus_card: Callable[[str], CorpusCard | None] = named_corpus) -> str:
    """(Re)write the card of a training run's folder from its ``config.json`` and ``results.json``
    (``hf-nlm card RUN_DIR``); returns its path. ``dataset`` overrides the corpus name ``results.json``
    records; ``corpus_card`` turns that name into what the card says about the corpus (the caller's
    table of corpora, e.g. :func:`hf_nlm.data.registry.corpus_card`; by default a plain description).
    Raises FileNotFoundError / ValueError for a folder that is not a run."""
    # AutoConfig knows our model types: importing this module imported hf_nlm, which registers them.
    from transformers import AutoConfig

    folder = Path(run_dir)
    check_model_folder(folder)
    config = AutoConfig.from_pretrained(folder)
    saved = {}
    if (folder / RESULTS_NAME).is_file():
        try:
            saved = json.loads((folder / RESULTS_NAME).read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{folder / RESULTS_NAME}: not JSON ({err})") from err
    evaluations = {s: saved[s] for s in ("validation", "test") if isinstance(saved.get(s), Mapping)}
    name = dataset or saved.get("dataset")
    return write_model_card(
        folder, config, results=evaluations, dataset=corpus_card(name) if name else None,
        training=saved.get("training_config"), num_parameters=saved.get("num_parameters"),
        model_name=model_name, load_from=load_from or "path/to/this/folder",
        baseline=saved.get(BASELINE_KEY) if isinstance(saved.get(BASELINE_KEY), Mapping) else None,
    )
