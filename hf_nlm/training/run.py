"""A run from its specification to its saved folder: :func:`train` and :func:`load_run`.

``train(spec)`` reads top to bottom as the run goes:

    datasets  = spec.data.load()                       the corpus, checked against the run's when resuming
    tokenizer = spec.tokenizer.train(train texts)      or the saved model's (resume, init_from)
    model     = build_model(spec, tokenizer, ...)      sized for the tokenizer, seeded, its tree, generation
                                                       defaults
    check_training_memory(...)                         refuses what cannot train in the memory there is
    fit_ngram_baseline(tokenizer, datasets)            a Kneser-Ney 5-gram on the same split: the bar
    LMTrainer(model, tokenizer, datasets, ...).train() the loop; the best model, card, results in
                                                       output_dir
    ngram_mixture(model, tokenizer, datasets, lm, ...) with --ngram-mixture: the model mixed with the 5-gram
                                                       (or the n-gram --ngram-mixture-order / -smoothing name)

With ``spec.tree_mode`` (Mnih & Hinton's data-built word tree), :func:`train_data_tree` runs the loop twice:
on a random tree, then on the tree built from that model's predicted vectors.

``hf-nlm train``, ``examples/``, the benchmarks and the web demo's runs all go through it, so what one gets
(the recipe, the refusals, the generation defaults, the card) every other gets too.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..hub.model_card import BASELINE_KEY
from ..models import MODEL_TYPES
from ..saved_run import SavedRun, load_run
from .memory import check_training_memory
from .run_folder import update_results
from .spec import RunSpec, split_fingerprints
from .trainer import LMTrainer


def _say(line: str) -> None:
    """A line of the run's account on stderr, once (the main process): stdout stays for the caller's
    results."""
    if int(os.environ.get("RANK", "0")) == 0:
        print(line, file=sys.stderr)


@dataclass
class TrainResult:
    """What :func:`train` returns: the spec as run (tokenizer settings resolved, the data's content recorded),
    the trained model (the best weights) and its tokenizer, the results (also ``results.json``) and the
    folder."""

    spec: RunSpec
    model: object
    tokenizer: object
    metrics: dict
    output_dir: Path


def train(spec: RunSpec, accelerator=None) -> TrainResult:
    """Train the run ``spec`` describes (or resume it: ``spec.training.resume_from_checkpoint``) and save it
    in ``spec.training.output_dir``: the best model with its tokenizer and generation config, ``README.md``,
    ``results.json``, ``log.jsonl``, ``curves.png``, ``checkpoints/``. Bad settings or data raise
    ``ValueError`` / ``FileNotFoundError`` before training starts; Ctrl-C raises ``KeyboardInterrupt`` after
    the last completed update is checkpointed (:func:`report_interrupt` says how to go on)."""
    resuming = spec.training.resume_from_checkpoint is not None
    # An encoder-decoder model reads (source, target) pairs; its one vocabulary comes from both sides.
    pairs = ((spec.training.source_column, spec.training.target_column)
             if MODEL_TYPES[spec.model_type].seq2seq_lm_class is not None else None)
    datasets = spec.data.load(pair_columns=pairs)
    if "train" not in datasets:
        raise ValueError("the corpus has no train split (give --train-file)")
    fingerprints = split_fingerprints(datasets)
    if resuming and spec.data_sha256 is None:  # a spec not read back from the run folder
        recorded = recorded_fingerprints(spec.training.resume_from_checkpoint, spec.training.output_dir)
        spec = dataclasses.replace(spec, data_sha256=recorded)
    if spec.data_sha256 is not None:
        check_same_data(spec, fingerprints)
    texts = ([*datasets["train"][pairs[0]], *datasets["train"][pairs[1]]] if pairs
             else datasets["train"]["text"])
    if resuming or spec.init_from is not None:
        folder = spec.training.resume_from_checkpoint if resuming else spec.init_from
        model, tokenizer = load_run(folder)
        model.train()  # from_pretrained returns the model in eval mode
        spec = spec.with_model_config(model.config)  # what the run trains: the saved model's settings
        if resuming:
            _say(f"resuming {folder}: the run's model, tokenizer, data and training settings are kept"
                 + (f"; changed: {'; '.join(spec.resume_changes)}" if spec.resume_changes else ""))
        else:
            _say(f"starting from the weights and tokenizer of {folder}")
        _say(spec.recipe_line())
        # The memory check of a fresh run, on the saved model (its weights already held are not counted
        # twice); the vocabulary's comes with the trainer's count of unknown tokens.
        head = getattr(model, "lm_head", None)
        check_training_memory(type(model), model.config, training=spec.training,
                              tree=head.tree() if callable(getattr(head, "tree", None)) else None,
                              loaded=model)
    else:
        _say(spec.recipe_line())
        spec, tokenizer = train_tokenizer(spec, texts)
        if spec.tree_mode is not None:
            return train_data_tree(dataclasses.replace(spec, data_sha256=fingerprints), tokenizer, datasets,
                                   texts, accelerator)
        model = build_model(spec, tokenizer, texts)
    spec = dataclasses.replace(spec, data_sha256=fingerprints)
    trainer = make_trainer(spec, model, tokenizer, datasets, accelerator)
    if resuming or spec.init_from is not None:
        check_unknown_share(trainer.train_stats, folder)
    baseline = ngram_baseline(spec, model, tokenizer, datasets, trainer.train_stats["num_tokens"])
    return run_loop(spec, trainer, baseline)


def make_trainer(spec: RunSpec, model, tokenizer, datasets, accelerator=None) -> LMTrainer:
    """The :class:`LMTrainer` of the run ``spec`` (recorded in its checkpoints and results)."""
    return LMTrainer(model, tokenizer, datasets, spec.training, accelerator=accelerator,
                     dataset_name=spec.data.name, run_spec=spec.to_dict())


def run_loop(spec: RunSpec, trainer: LMTrainer, baseline: NgramBaseline | None) -> TrainResult:
    """``trainer``'s loop, with ``baseline`` (or none) reported beside the model and, with
    ``spec.training.ngram_mixture``, mixed with it; the comparison said at the end."""
    model, tokenizer, datasets = trainer.unwrapped_model, trainer.tokenizer, trainer.datasets
    trainer.ngram_baseline = baseline.figures if baseline is not None else None
    metrics = trainer.train()
    if metrics and BASELINE_KEY in metrics and spec.training.ngram_mixture:
        model.eval()
        training = spec.training
        metrics[BASELINE_KEY]["mixture"] = ngram_mixture(
            model, tokenizer, datasets, baseline.lm, order=training.ngram_mixture_order,
            smoothing=training.ngram_mixture_smoothing, weight=training.ngram_mixture_weight)
        update_results(spec.training.output_dir, metrics)
    if metrics and "validation" in metrics:
        _say(comparison_line(metrics))
    return TrainResult(spec, model, tokenizer, metrics, Path(spec.training.output_dir))


#: What a data-built tree run's results keep of its first stage (under ``random_tree``).
FIRST_STAGE_FIGURES = ("validation", "test", "best_val_ppl", "epochs_completed", "global_step", "stop_reason",
                       "train_tokens", "elapsed_s")


def train_data_tree(spec: RunSpec, tokenizer, datasets, texts, accelerator=None) -> TrainResult:
    """Mnih & Hinton's recipe for a data-built word tree (A. Mnih, G. Hinton, "A Scalable Hierarchical
    Distributed Language Model", NIPS 2008, sec. 4) on the fresh run ``spec`` (``spec.tree_mode`` set),
    with its ``tokenizer``, ``datasets`` and training ``texts``:

    1. a model on a random tree (``tree_seed``), trained as ``spec`` says for ``first_stage_epochs`` epochs
       (None: ``num_epochs``), saved in ``output_dir/random_tree`` (a run folder of its own);
    2-3. each word's average predicted vector r_hat over the contexts it occurs in, split by recursive
       two-component EM with the ``tree_mode`` rule (``tree_eps``: ADAPTIVE(eps)), saved as
       ``output_dir/word_tree.json`` (:func:`hf_nlm.training.tree_recipe.build_data_tree`);
    4. a fresh model on that tree (seeded as the first), trained as ``spec`` says: the run of ``output_dir``,
       which records ``spec``.

    Both stages share the Kneser-Ney 5-gram baseline. The result is the final model's; its metrics (and
    ``results.json``) add ``tree`` (the rule, eps, the tree's sizes and ``build_s``, the seconds steps 2-3
    took) and ``random_tree`` (the first stage's figures, :data:`FIRST_STAGE_FIGURES`)."""
    from .run_folder import prepare_output_dir
    from .tree_recipe import build_data_tree, tree_summary

    build_config(spec, tokenizer)  # refuses a head that takes no word tree, before any folder is claimed
    training, main_process = spec.training, int(os.environ.get("RANK", "0")) == 0
    out = Path(training.output_dir)
    # The folder is checked and claimed before step 1 writes into it (random_tree/, word_tree.json).
    prepare_output_dir(out, resuming=False, overwrite=training.overwrite_output_dir,
                       main_process=main_process)

    # 1. A model on a random tree.
    first_spec = dataclasses.replace(
        spec, tree="random", tree_mode=None, tree_eps=0.0, first_stage_epochs=None,
        training=dataclasses.replace(training, output_dir=os.fspath(out / "random_tree"),
                                     num_epochs=spec.first_stage_epochs or training.num_epochs))
    _say(f"data-built tree (--tree-mode {spec.tree_mode}, --tree-eps {spec.tree_eps}), step 1: a model on a "
         f"random tree in {first_spec.training.output_dir}")
    first_model = build_model(first_spec, tokenizer, texts)
    trainer = make_trainer(first_spec, first_model, tokenizer, datasets, accelerator)
    baseline = ngram_baseline(spec, first_model, tokenizer, datasets, trainer.train_stats["num_tokens"])
    first = run_loop(first_spec, trainer, baseline)

    # 2-3. Each word's average predicted vector, then the recursive EM tree over those vectors.
    start = time.perf_counter()
    tree = build_data_tree(first_model, list(texts), tokenizer, mode=spec.tree_mode, eps=spec.tree_eps,
                           block_size=training.block_size, batch_size=training.eval_batch_size,
                           seed=spec.tree_seed)
    built = {"mode": spec.tree_mode, "eps": spec.tree_eps, **tree_summary(tree),
             "build_s": time.perf_counter() - start}
    if main_process:
        tree.save(out / "word_tree.json")
    _say(f"data-built tree: {built['num_nodes']:,} nodes, depth {built['max_depth']}, "
         f"{built['words_with_several_codes']:,} words with several codes; step 4: a fresh model on it")

    # 4. A fresh model on the data-built tree.
    model = build_model(spec, tokenizer, texts, tree=tree)
    result = run_loop(spec, make_trainer(spec, model, tokenizer, datasets, accelerator), baseline)
    if result.metrics:  # the main process's
        result.metrics["tree"] = built
        result.metrics["random_tree"] = {k: first.metrics[k] for k in FIRST_STAGE_FIGURES
                                         if k in first.metrics}
        update_results(out, result.metrics)
    return result


# ------------------------------------------------------------------ the count baseline
# The count baseline a run reports beside its model: a Kneser-Ney 5-gram (Chen & Goodman 1998's modified
# Kneser-Ney, :class:`hf_nlm.ngram.KneserNeyLM`) fitted on the run's training split with the run's tokenizer
# and scored on its validation split with the conventions of :func:`hf_nlm.evaluation.evaluate_lm` (every
# token and each line's ``<eos>`` a target once), so its perplexity and the model's compare directly.
# Fitting it takes seconds on a text of a million words; it tells a user whether the network has learnt more
# than counts do.
#
# A run reports it where the two perplexities count the same events: a causal LM on word or subword tokens.
# A numeracy LM's perplexity scores each numeral with its numeral head (and a numeracy tokenizer's
# ``<unk_num>`` stands for every unseen numeral), and an encoder-decoder model scores targets given sources,
# so neither gets one.

#: The order of the baseline n-gram model.
BASELINE_ORDER = 5
#: What the run's account and ``results.json`` call it.
BASELINE_NAME = f"Kneser-Ney {BASELINE_ORDER}-gram"
#: A model whose validation perplexity is this many times the baseline's has learnt less than the counts:
#: near the unigram distribution, its continuations repeat the commonest words ("the the the , the").
WEAK_RATIO = 2.0
#: Training tokens above which a run fits no baseline: counting 5-grams holds about three of them per training
#: token in memory (2.4M on Brown's 0.84M tokens), gigabytes beyond this.
MAX_BASELINE_TOKENS = 50_000_000


def baseline_skipped(model, tokenizer, datasets, num_tokens: int) -> str | None:
    """Why a run of ``model`` with ``tokenizer`` on ``datasets`` (``num_tokens`` training tokens) gets no
    n-gram baseline, or None (it gets one)."""
    if getattr(model.config, "is_encoder_decoder", False):
        return "an encoder-decoder model scores targets given their sources, which a 5-gram never sees"
    if getattr(tokenizer, "numeral_vocab", None) is not None:
        return ("a numeracy LM scores numerals with its numeral head (see its adjusted perplexity), not as "
                "the tokens a 5-gram counts")
    if "validation" not in datasets:
        return "the run has no validation split"
    if num_tokens > MAX_BASELINE_TOKENS:
        return (f"{num_tokens:,} training tokens are more than its {MAX_BASELINE_TOKENS:,} (its counts would "
                "take gigabytes)")
    return None


class NgramBaseline(NamedTuple):
    """The baseline of a run: its figures (``results.json``'s) and the fitted model (for the mixture)."""

    figures: dict
    lm: object


def fit_ngram_baseline(tokenizer, datasets) -> NgramBaseline:
    """The baseline: its figures, ``model``, ``order``, ``validation`` and ``test``
    (:meth:`KneserNeyLM.evaluate`'s report on each split there is) and ``fit_s`` (seconds to fit and score
    it), and the fitted model."""
    from ..ngram import KneserNeyLM

    start = time.perf_counter()
    lm = KneserNeyLM.from_texts(datasets["train"]["text"], tokenizer, BASELINE_ORDER)
    scored = {split: lm.evaluate(datasets[split], tokenizer) for split in ("validation", "test")
              if split in datasets}
    figures = {"model": BASELINE_NAME, "order": BASELINE_ORDER, **scored,
               "fit_s": time.perf_counter() - start}
    return NgramBaseline(figures, lm)


def mixture_ngram(tokenizer, datasets, order: int, smoothing: str, baseline=None):
    """The n-gram a run's model is mixed with, fitted on the training split with the run's tokenizer: the
    baseline ``baseline`` itself for the Kneser-Ney 5-gram, else a Kneser-Ney (``smoothing="kneser_ney"``)
    or a deleted-interpolation (``"interpolated"``, its weights fitted on the validation split) model of
    ``order`` (Bengio et al. 2003, sec. 4.1: an interpolated trigram)."""
    from ..ngram import InterpolatedLM, KneserNeyLM

    if smoothing == "kneser_ney":
        if baseline is not None and order == BASELINE_ORDER:
            return baseline
        return KneserNeyLM.from_texts(datasets["train"]["text"], tokenizer, order)
    if smoothing == "interpolated":
        valid = datasets["validation"]["text"] if "validation" in datasets else None
        return InterpolatedLM.from_texts(datasets["train"]["text"], tokenizer, order=order, valid_texts=valid)
    raise ValueError(f"--ngram-mixture-smoothing {smoothing}: choose kneser_ney or interpolated")


#: What the account and ``results.json`` call each smoothing of a mixture's n-gram.
SMOOTHING_NAMES = {"kneser_ney": "Kneser-Ney", "interpolated": "deleted-interpolation"}


def ngram_mixture(model, tokenizer, datasets, lm, order: int = BASELINE_ORDER, smoothing: str = "kneser_ney",
                  weight: float | None = None) -> dict:
    """The mixture a P_model + (1 - a) P_ngram of a trained ``model`` and an n-gram (Bengio et al. 2003,
    Table 1: their best results mix the network with an interpolated trigram, a = 0.5): the baseline ``lm``
    (the Kneser-Ney 5-gram) by default, else the ``order``-gram of ``smoothing`` (:func:`mixture_ngram`);
    a = ``weight``, or fitted by EM on the validation split when None; then each split's perplexity, every
    token scored by both models as :func:`~hf_nlm.evaluation.evaluate_lm` scores it. Returns ``{"model":
    "Kneser-Ney 5-gram", "order": 5, "weight": a, "fitted": True, "validation": {"perplexity": ...}, "test":
    {...}}``."""
    from ..evaluation import token_log_probs
    from ..ngram.neural_interpolation import fit_mixture_weight, mix_log_probs

    ngram = mixture_ngram(tokenizer, datasets, order, smoothing, baseline=lm)
    scores = {}
    for split in ("validation", "test"):
        if split in datasets:
            ids, log_p, _ = token_log_probs(model, datasets[split], tokenizer)
            scores[split] = (log_p.double().numpy(), ngram.stream_log_probs(ids.numpy()))
    fitted = weight is None
    if fitted:
        weight = fit_mixture_weight(*scores["validation"])
    mixture = {"model": f"{SMOOTHING_NAMES[smoothing]} {order}-gram", "order": order, "weight": float(weight),
               "fitted": fitted}
    for split, (log_p_model, log_p_ngram) in scores.items():
        mixed = mix_log_probs(log_p_model, log_p_ngram, float(weight))
        mixture[split] = {"perplexity": float(np.exp(-mixed.mean()))}
    return mixture


def comparison_line(results: dict) -> str:
    """``validation perplexity 155.6 (Kneser-Ney 5-gram on the same split: 142.0, ratio 1.10)`` from a run's
    ``results`` (its ``validation`` and :data:`BASELINE_KEY` entries)."""
    model_ppl = results["validation"]["perplexity"]
    baseline = results.get(BASELINE_KEY)
    if baseline is None:
        return f"validation perplexity {model_ppl:.1f}"
    line = (f"validation perplexity {model_ppl:.1f} ({baseline['model']} on the same split: "
            f"{baseline['validation']['perplexity']:.1f}, ratio {baseline['ratio']:.2f})")
    if baseline["ratio"] >= WEAK_RATIO:
        line += ("; the model has learnt less than the 5-gram's counts and its continuations will repeat the "
                 "commonest words: train it longer (more epochs or updates) or with a recipe that converges "
                 "sooner")
    return line


def ngram_baseline(spec: RunSpec, model, tokenizer, datasets, num_tokens: int) -> NgramBaseline | None:
    """The Kneser-Ney 5-gram baseline of the run, fitted on the main process, said before
    training starts; None where ``spec.training.ngram_baseline`` is off or the run's perplexity and a 5-gram's
    do not compare (the reason is said)."""
    if not spec.training.ngram_baseline or int(os.environ.get("RANK", "0")) != 0:
        return None
    reason = baseline_skipped(model, tokenizer, datasets, num_tokens)
    if reason is not None:
        _say(f"no Kneser-Ney 5-gram baseline: {reason}")
        return None
    baseline = fit_ngram_baseline(tokenizer, datasets)
    figures = baseline.figures
    _say(f"{figures['model']} on the same training split and tokenizer: validation perplexity "
         f"{figures['validation']['perplexity']:.1f} ({figures['fit_s']:.1f} s; --no-ngram-baseline skips "
         "it)")
    return baseline


def recorded_fingerprints(resume_from_checkpoint: str | os.PathLike,
                          output_dir: str | os.PathLike) -> dict[str, str] | None:
    """Each split's SHA-256 as the checkpoint's run recorded it (``run_spec`` in ``trainer_state.json``), or
    None for a checkpoint that records none (not written by :func:`train`)."""
    from .checkpoint import read_trainer_state, resolve_checkpoint

    recorded = read_trainer_state(resolve_checkpoint(resume_from_checkpoint, output_dir)).get("run_spec")
    prints = recorded.get("data_sha256") if isinstance(recorded, dict) else None
    return prints if isinstance(prints, dict) else None


def check_same_data(spec: RunSpec, fingerprints: dict[str, str]) -> None:
    """Refuse data whose content differs from what the run recorded (``spec.data_sha256``), split by split.
    A resumed run continues on its own data only; training a saved model further on other data is a new run
    that starts from its weights (``--init-from``)."""
    changed = [split for split, digest in spec.data_sha256.items() if fingerprints.get(split) != digest]
    changed += [split for split in fingerprints if split not in spec.data_sha256]
    if changed:
        named = "; ".join(spec.data.describe(split) for split in changed)
        from .checkpoint import resolve_checkpoint

        folder = resolve_checkpoint(spec.training.resume_from_checkpoint, spec.training.output_dir)
        raise ValueError(f"the data is not the run's: {named} holds other text than when the run was saved "
                         "(compared by content). Resume with the run's data, or train its model on this data "
                         f"as a new run in another --output-dir (--init-from {folder})")


def check_unknown_share(train_stats: dict, folder: str | os.PathLike) -> None:
    """Refuse training the tokenizer saved in ``folder`` on a text of which it leaves more than
    :data:`~hf_nlm.tokenization.word_level.MAX_UNKNOWN_SHARE` of the tokens unknown (``train_stats``: the
    trainer's ``num_unk`` and ``num_tokens``): the check a fresh run's vocabulary gets
    (:func:`~hf_nlm.tokenization.word_level.check_vocabulary_coverage`)."""
    from ..tokenization.word_level import MAX_UNKNOWN_SHARE

    unknown, total = train_stats["num_unk"], train_stats["num_tokens"]
    if total and unknown > MAX_UNKNOWN_SHARE * total:
        raise ValueError(
            f"the tokenizer of {folder} leaves {unknown:,} of the {total:,} training tokens "
            f"({unknown / total:.1%}) unknown, more than {MAX_UNKNOWN_SHARE:.0%}: the training text is not "
            "what it was made for; train a fresh run on this text (without --resume / --init-from)"
        )


def train_tokenizer(spec: RunSpec, texts):
    """``(spec, tokenizer)``: the tokenizer trained on ``texts``, and the spec with its settings as applied. A
    recipe's frequency cut-off is meant for texts of many thousand words: where it would leave most of a small
    text unknown, every word is kept (and said); a cut-off the spec was given is refused instead."""
    tokenizer_spec = spec.tokenizer.resolve(texts)
    try:
        tokenizer = tokenizer_spec.train(texts)
    except ValueError:
        if "min_frequency" not in spec.recipe_values or tokenizer_spec.min_frequency == 1 \
                or not tokenizer_spec.word_level:
            raise
        _say(f"--min-frequency {tokenizer_spec.min_frequency} (the recipe's) would leave most of this small "
             "text unknown; using --min-frequency 1")
        tokenizer_spec = dataclasses.replace(tokenizer_spec, min_frequency=1)
        tokenizer = tokenizer_spec.train(texts)
        spec = dataclasses.replace(spec, recipe_values=spec.recipe_values - {"min_frequency"})
    return dataclasses.replace(spec, tokenizer=tokenizer_spec), tokenizer


@dataclass
class HeadSetup:
    """What a head's :meth:`~hf_nlm.heads.OutputHead.prepare_run` reads of a run: its spec, its training
    texts, the word tree the spec describes (built when the head asks: ``tree`` when the caller has one) and
    the run's account."""

    spec: RunSpec
    tokenizer: object
    train_texts: object = None
    tree: object = None

    def word_tree(self):
        return self.tree if self.tree is not None else build_tree(self.spec, self.tokenizer, self.train_texts)

    @staticmethod
    def say(line: str) -> None:
        _say(line)


def prepare_model(spec: RunSpec, tokenizer, train_texts=None, tree=None):
    """The model configuration ``spec`` describes, sized for ``tokenizer``, with what its head takes from the
    run (:meth:`~hf_nlm.heads.OutputHead.prepare_run`: a split head's cut-offs, a tree head's word tree,
    ``tree`` when given); and the keyword arguments the model is built with."""
    from ..heads import HEAD_REGISTRY

    config_class = MODEL_TYPES[spec.model_type].config_class
    fields = dict(spec.model)
    head = fields.get("head", next(f.default for f in dataclasses.fields(config_class) if f.name == "head"))
    head_class = HEAD_REGISTRY.get(head)
    if head_class is not None and not head_class.tieable:
        fields["tie_word_embeddings"] = False  # e.g. a tree head's node vectors are not word vectors
    if head_class is not None and not head_class.takes_word_tree:
        if spec.tree_mode is not None:
            raise ValueError(f"--tree-mode {spec.tree_mode} builds the word tree of a tree head (--head tree "
                             f"or --model hlbl), not --head {head}")
        if tree is not None or spec.tree is not None or spec.tree_file is not None:
            raise ValueError("--tree / --tree-file / --tree-mode need a tree head (--head tree or --model "
                             f"hlbl), not --head {head}")
    kwargs = {} if head_class is None else head_class.prepare_run(
        fields, tokenizer, HeadSetup(spec, tokenizer, train_texts, tree))
    if any(f.name == "numeral_vocab" for f in dataclasses.fields(config_class)):
        # Which ids are numerals, from a numeracy tokenizer (None from another: a numeral head then says so).
        fields["numeral_vocab"] = getattr(tokenizer, "numeral_vocab", None)
    # The vocabulary size, the special ids, the ids the generation settings name and the fingerprint; an
    # unknown head is refused here, naming the registered ones.
    return config_class.from_tokenizer(tokenizer, **fields), kwargs


def build_config(spec: RunSpec, tokenizer, train_texts=None):
    """The model configuration ``spec`` describes, sized for ``tokenizer`` (:func:`prepare_model`)."""
    return prepare_model(spec, tokenizer, train_texts)[0]


class _TrialRun:
    """The run :func:`run_heads` tries each head's config with: no data, no tree, nothing said."""

    spec = train_texts = None

    @staticmethod
    def word_tree():
        return None

    @staticmethod
    def say(line: str) -> None:
        pass


_TRIAL_RUN = _TrialRun()


def run_heads(model_type: str) -> list[str]:
    """The registered heads (:data:`hf_nlm.heads.HEAD_REGISTRY`, in its order) that a run of ``model_type``
    builds a config for: each tried on a small vocabulary, with the settings a run supplies itself (a split
    head's default cutoffs; a numeral vocabulary, where the config has the field). A new head or model type
    shows up here by being registered."""
    from ..heads import HEAD_REGISTRY

    config_class = MODEL_TYPES[model_type].config_class
    numerals = any(f.name == "numeral_vocab" for f in dataclasses.fields(config_class))
    heads = []
    for head, head_class in HEAD_REGISTRY.items():
        settings = {"vocab_size": 16, "head": head}
        head_class.prepare_run(settings, range(16), _TRIAL_RUN)  # what the head sets itself from a run
        if numerals:
            settings["numeral_vocab"] = {"<unk_num>": 2, "1": 3, "2.5": 4}
        try:
            config_class(**settings)
        except ValueError:
            continue
        heads.append(head)
    return heads


def build_tree(spec: RunSpec, tokenizer, train_texts=None):
    """The word tree of a tree head: ``tree_file``, or a random / balanced / Huffman (by the training texts'
    word frequencies) tree over the vocabulary."""
    from ..trees import WordTree, balanced_tree, huffman_tree, random_tree

    V = len(tokenizer)
    if spec.tree_file is not None:
        if not Path(spec.tree_file).is_file():
            raise FileNotFoundError(f"--tree-file {spec.tree_file}: no such file")
        try:
            tree = WordTree.load(spec.tree_file)
        except ValueError as err:  # the file named, and here the setting that gave it
            raise ValueError(f"--tree-file: {err}") from None
        if tree.vocab_size != V:
            raise ValueError(f"--tree-file {spec.tree_file}: the tree covers {tree.vocab_size} words "
                             f"but the vocabulary has {V}")
        return tree
    kind = spec.tree or "random"
    if kind == "random":
        return random_tree(V, seed=spec.tree_seed)
    if kind == "balanced":
        return balanced_tree(V)
    if train_texts is None:
        raise ValueError("--tree huffman needs the training texts to count word frequencies")
    from ..data.lm import tokenize_corpus

    ids, _ = tokenize_corpus(list(train_texts), tokenizer)
    return huffman_tree(torch.bincount(ids, minlength=V).numpy())


def build_model(spec: RunSpec, tokenizer, train_texts=None, tree=None):
    """A freshly initialised model (seeded with ``spec.training.seed``: the same weights on every process and
    every rerun) sized for ``tokenizer``, set up by its head from the run (:func:`prepare_model`: a tree head
    gets ``tree``, else the spec's, :func:`build_tree`; ``train_texts`` for a Huffman tree), its training
    memory checked first; its generation settings come from the config
    (:func:`hf_nlm.generation.generation_defaults`)."""
    config, kwargs = prepare_model(spec, tokenizer, train_texts, tree)
    lm_class = MODEL_TYPES[spec.model_type].lm_class
    check_training_memory(lm_class, config, tree=kwargs.get("tree"), training=spec.training)
    torch.manual_seed(spec.training.seed)
    return lm_class(config, **kwargs)  # generation settings from the config: NLMPreTrainedModel.__init__


def resume_command(argv: list[str], program: tuple[str, ...] = ("hf-nlm", "train")) -> str:
    """The command line ``program + argv`` with ``--resume`` (any value given to it dropped)."""
    kept, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--resume":
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("-")
        elif not arg.startswith("--resume="):
            kept.append(arg)
    return shlex.join([*program, *kept, "--resume"])


def report_interrupt(output_dir: str | os.PathLike, resume: str | None) -> int:
    """Ctrl-C / SIGTERM during training: where the last checkpoint is and, given ``resume``, the command that
    goes on from it. Returns 130, the exit status of a program stopped by SIGINT."""
    from .checkpoint import list_checkpoints

    found = list_checkpoints(output_dir)
    if not found:
        print("\ntraining interrupted before any checkpoint was written; nothing to resume", file=sys.stderr)
    elif resume is not None:
        print(f"\ntraining interrupted; the last completed update is saved in {found[-1]}\n"
              f"continue with: {resume}", file=sys.stderr)
    else:
        print(f"\ntraining interrupted; the last completed update is saved in {found[-1]}", file=sys.stderr)
    return 130


__all__ = ["SavedRun", "TrainResult", "build_config", "build_model", "build_tree", "load_run",
           "make_trainer", "report_interrupt", "resume_command", "run_loop", "train", "train_data_tree",
           "train_tokenizer"]
