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
* :data:`MODEL_DOCS`: the text per model type; :class:`CorpusCard`: what a card says about the training
  corpus. The caller, who knows the corpus, passes its card: each corpus declares one with its entry
  (:mod:`hf_nlm.data.corpora`), and :func:`hf_nlm.data.registry.corpus_card` finds it by name.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LICENSE = "apache-2.0"  # the license of this package's code, which the saved models run on
LANGUAGE = "en"
PIPELINE_TAG = "text-generation"
#: The Hub's task of model types that are not causal LMs.
PIPELINE_TAGS = {"story_seq2seq": "text2text-generation"}
LIBRARY_NAME = "transformers"
TASK = {"type": "text-generation", "name": "Language modelling"}
RESULTS_NAME = "results.json"
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


@dataclass(frozen=True)
class ModelDoc:
    """What a card says about a model type: its name, paper and what it is."""

    title: str
    summary: str
    paper: Paper
    extra_tags: tuple[str, ...] = ()


BENGIO_2003 = Paper(
    "Bengio, Ducharme, Vincent & Jauvin, *A Neural Probabilistic Language Model*, JMLR 3 (2003)",
    """@article{bengio2003neural,
  title   = {A Neural Probabilistic Language Model},
  author  = {Bengio, Yoshua and Ducharme, R{\\'e}jean and Vincent, Pascal and Jauvin, Christian},
  journal = {Journal of Machine Learning Research},
  volume  = {3},
  pages   = {1137--1155},
  year    = {2003}
}""",
)
MNIH_HINTON_2007 = Paper(
    "Mnih & Hinton, *Three New Graphical Models for Statistical Language Modelling*, ICML 2007",
    """@inproceedings{mnih2007three,
  title     = {Three New Graphical Models for Statistical Language Modelling},
  author    = {Mnih, Andriy and Hinton, Geoffrey},
  booktitle = {Proceedings of the 24th International Conference on Machine Learning (ICML)},
  pages     = {641--648},
  year      = {2007}
}""",
)
MNIH_HINTON_2008 = Paper(
    "Mnih & Hinton, *A Scalable Hierarchical Distributed Language Model*, NIPS 2008",
    """@inproceedings{mnih2008scalable,
  title     = {A Scalable Hierarchical Distributed Language Model},
  author    = {Mnih, Andriy and Hinton, Geoffrey E.},
  booktitle = {Advances in Neural Information Processing Systems 21 (NIPS 2008)},
  pages     = {1081--1088},
  year      = {2008}
}""",
)
MERITY_2018 = Paper(
    "Merity, Keskar & Socher, *Regularizing and Optimizing LSTM Language Models*, ICLR 2018",
    """@inproceedings{merity2018regularizing,
  title     = {Regularizing and Optimizing {LSTM} Language Models},
  author    = {Merity, Stephen and Keskar, Nitish Shirish and Socher, Richard},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2018}
}""",
)
SPITHOURAKIS_RIEDEL_2018 = Paper(
    "Spithourakis & Riedel, *Numeracy for Language Models: Evaluating and Improving their Ability to Predict "
    "Numbers*, ACL 2018",
    """@inproceedings{spithourakis2018numeracy,
  title     = {Numeracy for Language Models: Evaluating and Improving their Ability to Predict Numbers},
  author    = {Spithourakis, Georgios and Riedel, Sebastian},
  booktitle = {Proceedings of the 56th Annual Meeting of the Association for Computational Linguistics},
  year      = {2018}
}""",
)
LUONG_2015 = Paper(
    "Luong, Pham & Manning, *Effective Approaches to Attention-based Neural Machine Translation*, EMNLP 2015",
    """@inproceedings{luong2015effective,
  title     = {Effective Approaches to Attention-based Neural Machine Translation},
  author    = {Luong, Thang and Pham, Hieu and Manning, Christopher D.},
  booktitle = {Proceedings of the 2015 Conference on Empirical Methods in Natural Language Processing},
  year      = {2015}
}""",
)
CHEN_GOODMAN_1998 = Paper(
    "Kneser & Ney, *Improved Backing-off for M-gram Language Modeling*, ICASSP 1995; Chen & Goodman, "
    "*An Empirical Study of Smoothing Techniques for Language Modeling*, TR-10-98, Harvard (1998)",
    """@inproceedings{kneser1995improved,
  title     = {Improved Backing-off for {M}-gram Language Modeling},
  author    = {Kneser, Reinhard and Ney, Hermann},
  booktitle = {Proceedings of ICASSP},
  pages     = {181--184},
  year      = {1995}
}
@techreport{chen1998empirical,
  title       = {An Empirical Study of Smoothing Techniques for Language Modeling},
  author      = {Chen, Stanley F. and Goodman, Joshua},
  institution = {Harvard University},
  number      = {TR-10-98},
  year        = {1998}
}""",
)
JELINEK_MERCER_1980 = Paper(
    "Jelinek & Mercer, *Interpolated Estimation of Markov Source Parameters from Sparse Data*, 1980",
    """@inproceedings{jelinek1980interpolated,
  title     = {Interpolated Estimation of {M}arkov Source Parameters from Sparse Data},
  author    = {Jelinek, Frederick and Mercer, Robert L.},
  booktitle = {Proceedings of the Workshop on Pattern Recognition in Practice},
  pages     = {381--397},
  year      = {1980}
}""",
)

MODEL_DOCS: dict[str, ModelDoc] = {
    "nplm": ModelDoc(
        "NPLM",
        "Bengio et al.'s neural probabilistic language model: the n-1 previous words' feature vectors "
        "(a shared table C) are concatenated, passed through a tanh hidden layer (and optionally straight to "
        "the output, the direct connections), and a softmax over the vocabulary gives the next word.",
        BENGIO_2003,
        ("feed-forward",),
    ),
    "lbl": ModelDoc(
        "LBL (log-bilinear)",
        "Mnih & Hinton's log-bilinear model: the predicted feature vector is a linear combination of the "
        "context words' feature vectors (one matrix C_i per position), scored against every word's feature "
        "vector by a softmax.",
        MNIH_HINTON_2007,
        ("log-bilinear",),
    ),
    "hlbl": ModelDoc(
        "HLBL (hierarchical log-bilinear)",
        "Mnih & Hinton's hierarchical log-bilinear model: the LBL's predicted vector, with the softmax replaced "
        "by a binary tree over the vocabulary (a word's probability is the product of the logistic decisions "
        "on its path), so a training step costs O(log |V|) instead of O(|V|).",
        MNIH_HINTON_2008,
        ("log-bilinear", "hierarchical-softmax"),
    ),
    "awd_lstm": ModelDoc(
        "AWD-LSTM",
        "Merity et al.'s ASGD weight-dropped LSTM: a multi-layer LSTM language model with DropConnect on the "
        "hidden-to-hidden weights, variational (locked) dropout, embedding dropout, activation regularisation "
        "(AR / TAR), tied input and output embeddings, and non-monotonically triggered averaged SGD (NT-ASGD).",
        MERITY_2018,
        ("lstm",),
    ),
    "numeracy_lm": ModelDoc(
        "Numeracy LM",
        "Spithourakis & Riedel's numeracy language model: an LSTM over tokens that are words or numerals (a "
        "numeral keeps its value and precision), with an output strategy for numerals chosen by "
        "`numeral_strategy`: one softmax, a softmax whose numeral rows add a character-RNN encoding of their "
        "digits, or a hierarchical softmax p(class | h) p(token | class, h) over the classes word and numeral. "
        "Evaluated by perplexity and adjusted perplexity over words and numerals.",
        SPITHOURAKIS_RIEDEL_2018,
        ("lstm", "numeracy"),
    ),
    "story_seq2seq": ModelDoc(
        "Attention seq2seq",
        "An LSTM encoder (optionally bidirectional) and an LSTM decoder with global attention (dot, general, "
        "additive or concat scores, or none), the attention context joined with the decoder state before the output "
        "head, optional input feeding (Luong et al. 2015; Bahdanau et al. 2015): the storyline-to-story stage of a "
        "Plan-and-Write story generator (Yao et al. 2019). Loaded with `AutoModelForSeq2SeqLM`.",
        LUONG_2015,
        ("seq2seq", "attention", "lstm"),
    ),
    "kneser_ney": ModelDoc(
        "Kneser-Ney n-gram",
        "An interpolated modified Kneser-Ney n-gram model (Chen & Goodman's variant: three discounts per order "
        "from the count-of-counts, continuation counts for the lower orders), `hf_nlm.ngram.KneserNeyLM`.",
        CHEN_GOODMAN_1998,
        ("n-gram", "kneser-ney"),
    ),
    "interpolated": ModelDoc(
        "Interpolated (deleted-interpolation) n-gram",
        "A Jelinek-Mercer interpolated n-gram model whose weights, bucketed by context count, are fitted by EM "
        "on the validation split: Bengio et al.'s \"interpolated trigram\" baseline, `hf_nlm.ngram.InterpolatedLM`.",
        JELINEK_MERCER_1980,
        ("n-gram", "deleted-interpolation"),
    ),
}
NGRAM_TYPES = ("kneser_ney", "interpolated")


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
) -> str:
    """The YAML front matter (without the ``---`` lines): ``perplexities`` maps a split to the
    perplexity measured on it, written as the ``model-index``."""
    from huggingface_hub import EvalResult, ModelCardData

    doc = MODEL_DOCS.get(model_type)
    all_tags = ["hf-nlm", model_type, *(doc.extra_tags if doc else ()), *tags]
    eval_results = None
    if perplexities and corpus is not None:
        eval_results = [
            EvalResult(
                task_type=TASK["type"], task_name=TASK["name"], dataset_type=corpus.hub_id or corpus.key,
                dataset_name=corpus.name, dataset_split=split, metric_type="perplexity", metric_name="Perplexity",
                metric_value=float(value),
            )
            for split, value in perplexities.items()
        ]
    data = ModelCardData(
        language=LANGUAGE,
        license=LICENSE,
        library_name=library_name,
        pipeline_tag=PIPELINE_TAGS.get(model_type, PIPELINE_TAG),
        tags=list(dict.fromkeys(all_tags)),
        datasets=[corpus.hub_id] if corpus is not None and corpus.hub_id else None,
        model_name=model_name if eval_results else None,
        eval_results=eval_results,
    )
    return data.to_yaml()


def load_snippet(model_type: str, where: str) -> list[str]:
    """Markdown lines: how to load the model from ``where`` (a Hub repo id or a folder)."""
    if model_type in NGRAM_TYPES:
        return ["```python", "from hf_nlm.ngram import NgramLM", "from transformers import AutoTokenizer", "",
                f'lm = NgramLM.load("{where}")  # ngram.json + ngram.npz, no pickle',
                f'tokenizer = AutoTokenizer.from_pretrained("{where}")  # the tokenizer it was counted with',
                'lm.evaluate(test_split, tokenizer)["perplexity"]', "```"]
    if model_type == "story_seq2seq":  # an encoder-decoder: the source is encoded, the output generated
        return ["```python", "import hf_nlm  # registers the model types with transformers",
                "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer", "",
                f'model = AutoModelForSeq2SeqLM.from_pretrained("{where}")',
                f'tokenizer = AutoTokenizer.from_pretrained("{where}")',
                'ids = tokenizer("dog # park # ball", return_tensors="pt").input_ids',
                "print(tokenizer.decode(model.generate(ids, num_beams=5, max_new_tokens=40)[0], skip_special_tokens=True))",
                "```"]
    return ["```python", "import hf_nlm  # registers the model types with transformers",
            "from transformers import AutoModelForCausalLM, AutoTokenizer", "",
            f'model = AutoModelForCausalLM.from_pretrained("{where}")',
            f'tokenizer = AutoTokenizer.from_pretrained("{where}")',
            'ids = tokenizer("the president said", return_tensors="pt").input_ids',
            "print(tokenizer.decode(model.generate(ids, num_beams=5, max_new_tokens=20)[0]))", "```"]


INTENDED_USE = [
    "Research and teaching: reproducing and comparing classic language models, as baselines, and for perplexity "
    "measurements on the corpus it was trained on (scored with the same tokenizer).",
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
    """A card: metadata, then ``# title``, ``about`` lines, then the sections Results (``results``: markdown
    lines), Training data, Training procedure (``training``), Intended use and limitations, How to load,
    ``extra_sections``, Configuration (``config`` as JSON) and Citation."""
    doc = MODEL_DOCS.get(model_type)
    lines = ["---", card_metadata(model_type, model_name, perplexities, corpus, library_name, tags).rstrip("\n"),
             "---", "", f"# {title}", ""]
    if doc is not None:
        lines += [doc.summary, "", f"Paper: {doc.paper.short}. Implementation: "
                  "[hf-nlm](https://pypi.org/project/hf-nlm/) (Apache-2.0).", ""]
    if about:
        lines += [*about, ""]
    if results:
        lines += ["## Results", "", *results, ""]
    lines += ["## Training data", "", f"Trained on {corpus.description}" if corpus else "Not recorded in this card.", ""]
    if training:
        lines += ["## Training procedure and hyperparameters", "", *training, ""]
    lines += ["## Intended use and limitations", "", *INTENDED_USE, ""]
    lines += ["## How to load", "", *load_snippet(model_type, load_from), ""]
    for heading, body in (extra_sections or {}).items():
        lines += [f"## {heading}", "", *body, ""]
    if config:
        lines += ["## Configuration", "", "```json", json.dumps(dict(config), indent=2, sort_keys=True), "```", ""]
    if doc is not None:
        lines += ["## Citation", "", "```bibtex", doc.paper.bibtex, "```", ""]
    return "\n".join(lines)


def results_table(results: Mapping[str, Mapping]) -> list[str]:
    """Markdown lines: one row per split of ``evaluate_lm`` outputs."""
    lines = ["| split | perplexity | per-word perplexity | tokens | `<unk>` targets |", "|---|---|---|---|---|"]
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
) -> str:
    """The card of a model with ``config``: ``results`` maps a split name to ``evaluate_lm``'s output
    (written as the results table and the model-index), ``dataset`` what the card says about the training
    corpus (a :class:`CorpusCard`: :func:`hf_nlm.data.registry.corpus_card` gives a corpus's by name),
    ``training`` the training settings. With none of them, the basic card that ``save_pretrained`` writes."""
    if dataset is not None and not isinstance(dataset, CorpusCard):
        raise TypeError(f"dataset= takes a CorpusCard (hf_nlm.data.registry.corpus_card(name)), got {dataset!r}")
    model_type = config.model_type
    doc = MODEL_DOCS.get(model_type)
    corpus = dataset
    name = model_name or (f"{model_type}-{corpus.key}" if corpus else model_type)
    title = f"{doc.title if doc else model_type.upper()} language model" + (f" trained on the {corpus.name}" if corpus else "")
    results = dict(results or {})
    perplexities = {split: r["perplexity"] for split, r in results.items() if r.get("perplexity") is not None}
    about = []
    if num_parameters is not None:
        about.append(f"Parameters: {num_parameters:,}.")
    if not results:
        about.append("This card was written when the model was saved: it has no evaluation results yet.")
    table = results_table(results) if results else []
    if table and training and training.get("stop_reason"):
        table += ["", f"Training stopped by `{training['stop_reason']}` after {training.get('epochs_completed', '?')} "
                      f"epoch(s), {training.get('global_step', '?')} updates; the perplexities are those of the saved "
                      "weights (the best by validation perplexity when there is a validation split), every token "
                      "scored, `<eos>` and `<unk>` included."]
    train_lines = []
    if training:
        train_lines = ["Trained with `hf_nlm.training.train_lm` (`hf-nlm train`), these settings "
                       "(`TrainingConfig`):", "", "```json",
                       json.dumps(dict(training), indent=2, sort_keys=True, default=str), "```"]
    extra = {}
    if samples:
        extra["Samples (beam search)"] = [f"- *{prompt}* -> {text}" for prompt, text in samples.items()]
    cfg = {k: v for k, v in config.to_diff_dict().items() if k not in ("transformers_version", "architectures")}
    return render_card(
        model_type=model_type, model_name=name, title=title, perplexities=perplexities, corpus=corpus,
        about=about, results=table, training=train_lines, load_from=load_from, config=cfg, extra_sections=extra,
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
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} is not a saved model folder (no config.json)")
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
    )
