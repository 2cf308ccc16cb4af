"""Settings of one training run (``TrainingConfig``).

Every field carries its documentation in ``metadata["help"]``: the same text is the docstring
below and the ``--help`` of ``hf-nlm train``, whose flags are generated from these fields.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

OPTIMIZERS = ("sgd", "adam", "adamw")
LR_SCHEDULERS = ("constant", "bengio", "linear", "cosine")
MIXED_PRECISION = ("no", "fp16", "bf16")
#: The smoothings of the n-gram a run's model is mixed with (``ngram_mixture_smoothing``): modified Kneser-Ney
#: (:class:`hf_nlm.ngram.KneserNeyLM`) and Jelinek-Mercer deleted interpolation
#: (:class:`hf_nlm.ngram.InterpolatedLM`, its weights fitted on validation).
MIXTURE_SMOOTHINGS = ("kneser_ney", "interpolated")
#: The n-gram a mixture uses unless told otherwise: the run's baseline, the Kneser-Ney 5-gram.
MIXTURE_DEFAULTS = {"ngram_mixture_order": 5, "ngram_mixture_smoothing": "kneser_ney",
                    "ngram_mixture_weight": None}


#: The fields a resumed run may change: where it writes, when it stops, what it logs, saves and evaluates,
#: the per-process batch (the global batch is checked) and the device. Every other field shapes the updates
#: (data order, optimizer, schedule, averaging) and must be the checkpoint's.
RESUME_CHANGEABLE = (
    "output_dir", "resume_from_checkpoint", "overwrite_output_dir", "batch_size", "eval_batch_size",
    "num_epochs", "max_steps", "max_time_s", "max_time_within_epoch", "early_stopping_patience",
    "logging_steps", "save_steps", "save_total_limit", "cpu", "progress_bar", "eval_test",
    "ngram_baseline", "ngram_mixture", "ngram_mixture_order", "ngram_mixture_smoothing",
    "ngram_mixture_weight",
)


#: How closely a run's perplexities reproduce on another machine, relative: a run is defined by its work
#: (updates, epochs, a seed), so a busy or slow machine takes longer and prints the same numbers, bit for bit
#: at the same thread count; another thread count splits float sums differently, and the last bits drift
#: (measured on a 2-core x86-64 CPU: 1 and 2 threads agree to the bit, 4 threads within 5e-7 after 300
#: updates; docs/training.md gives the measurements over whole runs).
THREAD_TOLERANCE = 1e-3


def recipe_training_values(recipe, given: Mapping) -> dict:
    """The :class:`TrainingConfig` values of ``recipe`` (a :class:`hf_nlm.models.registry.TrainingRecipe`) for
    the fields ``given`` leaves out. ``max_time_within_epoch`` comes with a time budget only, and the
    mixture's n-gram settings (:data:`MIXTURE_DEFAULTS`) with ``ngram_mixture`` only (they have no meaning
    without them)."""
    values = {name: value for name, value in recipe.training.items() if name not in given}
    if given.get("max_time_s", values.get("max_time_s")) is None:
        values.pop("max_time_within_epoch", None)
    if not given.get("ngram_mixture", values.get("ngram_mixture", False)):
        for name in MIXTURE_DEFAULTS:
            values.pop(name, None)
    return values


#: What a field's annotation admits, and how a message names it.
_KINDS = {"int": (numbers.Integral, "a whole number"), "float": (numbers.Real, "a number"),
          "bool": (bool, "True or False"), "str": (str, "a string")}


def check_field_types(config) -> None:
    """A ``TypeError`` naming the first field of the dataclass ``config`` whose value is not of its annotated
    kind (``int``, ``float``, ``bool``, ``str``, each or None): ``learning_rate="fast"`` is refused as such,
    before a comparison fails on it. True and False are not numbers here."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        kinds = [part.strip() for part in str(f.type).split("|")]
        if value is None and "None" in kinds:
            continue
        known = [_KINDS[kind] for kind in kinds if kind in _KINDS]
        if not known:
            continue
        if any(isinstance(value, cls) and (cls is bool or not isinstance(value, bool)) for cls, _ in known):
            if not (isinstance(value, float) and "float" not in kinds):  # 2.5 for an int field
                continue
        wanted = " or ".join([name for _, name in known] + (["None"] if "None" in kinds else []))
        raise TypeError(f"{type(config).__name__}.{f.name} must be {wanted}, got {value!r} "
                        f"({type(value).__name__})")


def _f(default, help: str, **kwargs):
    return field(default=default, metadata={"help": help, **kwargs})


@dataclass(frozen=True)
class TrainingConfig:
    """How :func:`hf_nlm.training.train_lm` trains a model.

    Each field's meaning is in its ``metadata["help"]`` (also the ``--help`` of ``hf-nlm train``).

    The schedule ``bengio`` is the one of Bengio et al., "A Neural Probabilistic Language Model",
    JMLR 2003, sec. 4: eps_t = eps_0 / (1 + r t), t = number of parameter updates done; the paper
    used eps_0 = 1e-3 and r = 1e-8 with one update per example. Here an update averages the NLL over
    a batch of ``batch_size x block_size`` targets, so eps_0 must be much larger (the default 0.1).
    """

    output_dir: str = _f(None, "folder for checkpoints, logs, the final model and results (required)")

    # Data.
    block_size: int = _f(
        128,
        "targets per training block (each block also carries the model's n-1 context tokens); for recurrent "
        "models the BPTT length: the state is carried from block to block (hf_nlm.data.stream)",
    )
    batch_size: int = _f(
        32,
        "blocks per batch on EACH process (recurrent models: parallel columns of the stream; encoder-decoder "
        "models: examples); the global "
        "batch is batch_size x number of processes",
    )
    variable_bptt: bool = _f(
        False,
        "recurrent models: draw each chunk's length around block_size as Merity et al. 2018 do "
        "(N(block_size, 5), with probability 0.05 N(block_size / 2, 5), at least 5) and scale the learning "
        "rate by length / block_size",
    )
    # Paired (source, target) data: encoder-decoder models (hf_nlm.data.pairs).
    source_column: str = _f("source",
                            "encoder-decoder models: the column of each split holding the source text")
    target_column: str = _f("target",
                            "encoder-decoder models: the column of each split holding the target text")
    max_source_length: int | None = _f(
        None, "encoder-decoder models: keep at most this many source tokens (<eos> included); truncations "
        "are counted in the results; None = no limit",
    )
    max_target_length: int | None = _f(
        None, "encoder-decoder models: keep at most this many target tokens (<eos> included); truncations "
        "are counted in the results; None = no limit",
    )
    group_by_length: bool = _f(
        False,
        "encoder-decoder models: batch examples of similar length together (sorted within windows of 50 "
        "global batches, the batches then shuffled), which cuts padding",
    )
    eval_batch_size: int = _f(
        64,
        "blocks per batch when computing validation/test perplexity (recurrent models: columns for the "
        "per-epoch validation; the final validation/test perplexities use one column, which is exact; "
        "encoder-decoder models: examples, exact at any size)",
    )

    # Length of training.
    num_epochs: int = _f(10, "maximum number of passes over the training split")
    max_steps: int | None = _f(None, "stop after this many optimizer updates in total "
                                     "(across epochs); None = no limit")
    max_time_s: float | None = _f(
        None, "time budget: start no further epoch that would end after this many seconds of the run; "
              "None = no limit"
    )
    max_time_within_epoch: bool = _f(
        False,
        "with max_time_s: stop after the update during which the budget runs out, even in the middle of an "
        "epoch; the weights reached are validated (and kept if they are the best so far) and a checkpoint "
        "lets a resumed run finish the epoch. Gives runs of exactly equal training time, "
        "where whole epochs would not",
    )

    # Optimiser.
    optimizer: str = _f("sgd", "sgd | adam | adamw", choices=OPTIMIZERS)
    learning_rate: float = _f(0.1, "initial learning rate eps_0")
    momentum: float = _f(0.0, "SGD momentum (0 = plain SGD as in Bengio et al. 2003)")
    adam_beta1: float = _f(0.9, "Adam/AdamW beta1")
    adam_beta2: float = _f(0.999, "Adam/AdamW beta2")
    adam_epsilon: float = _f(1e-8, "Adam/AdamW epsilon")
    weight_decay: float = _f(
        1e-4,
        "L2 penalty (decoupled for adamw) on weight matrices and embeddings only (params with ndim >= 2), "
        "never on biases; Bengio et al. used 1e-4 on Brown, 1e-5 on AP News",
    )
    max_grad_norm: float | None = _f(None, "clip the global gradient norm to this value; None = no clipping")

    # Learning-rate schedule.
    lr_scheduler: str = _f(
        "bengio", "constant | bengio (eps_0 / (1 + r t)) | linear | cosine (decay to 0 at the last step)",
        choices=LR_SCHEDULERS,
    )
    lr_decay: float = _f(1e-8, "r of the bengio schedule eps_t = eps_0 / (1 + r t), t = updates done")
    warmup_steps: int = _f(0, "linear warm-up from 0 over this many updates (linear and cosine schedules)")

    # Averaged SGD (Merity et al. 2018, sec. 3).
    nt_asgd: bool = _f(
        False,
        "NT-ASGD: once an epoch's validation loss is worse than the best of all epochs but the last "
        "`nonmono`, keep a running average of the weights from that update on; validation, the best model "
        "and the final model then use the averaged weights",
    )
    nonmono: int = _f(5, "NT-ASGD's non-monotone interval: how many recent epochs the trigger leaves out")
    fine_tune: bool = _f(
        False,
        "average the weights from the first update on (Merity et al.'s fine-tuning stage, which continues a "
        "trained model: `hf-nlm train --init-from MODEL_DIR`)",
    )

    # Early stopping.
    early_stopping_patience: int | None = _f(
        3, "stop when validation perplexity has not improved for this many epochs; None = never stop early"
    )

    # Bookkeeping.
    logging_steps: int = _f(50, "write a train-loss record to log.jsonl every this many updates")
    save_steps: int | None = _f(None, "also checkpoint every this many updates "
                                      "(a checkpoint is always written per epoch)")
    save_total_limit: int | None = _f(2, "keep only the newest this many checkpoints; None = keep all")
    seed: int = _f(42, "seed of the per-epoch shuffling (epoch e uses seed + e) and of the training RNG")
    overwrite_output_dir: bool = _f(
        False, "start afresh in an output_dir that holds another run's checkpoints or a saved model (the "
        "checkpoints are deleted, the model replaced)"
    )
    resume_from_checkpoint: str | None = _f(
        None, "checkpoint folder to resume from, or 'latest' for the newest one in output_dir/checkpoints"
    )

    # Hardware.
    mixed_precision: str = _f("no", "no | fp16 | bf16 (passed to accelerate.Accelerator)",
                              choices=MIXED_PRECISION)
    cpu: bool = _f(False, "train on the CPU even when a GPU is available")

    # Extras.
    progress_bar: bool = _f(True, "show a tqdm progress bar on the main process")
    eval_test: bool = _f(True, "evaluate the final model on the test split (when there is one)")
    ngram_baseline: bool = _f(
        True, "fit a Kneser-Ney 5-gram on the training split with the run's tokenizer (seconds) and report "
              "its validation perplexity beside the model's, in the run's account and results.json (causal "
              "LMs; not the numeracy LM or an encoder-decoder model, whose perplexities count other events)"
    )
    ngram_mixture: bool = _f(
        False, "with the n-gram baseline, also report the mixture a P_model + (1 - a) P_ngram of the trained "
               "model and an n-gram (default: the baseline's Kneser-Ney 5-gram; see ngram_mixture_order, "
               "ngram_mixture_smoothing), a fitted on validation by EM unless ngram_mixture_weight gives it, "
               "on validation and test (Bengio et al. 2003, Table 1's mixtures; one more scoring pass over "
               "each split)"
    )
    ngram_mixture_order: int = _f(
        5, "with ngram_mixture: the order n of the n-gram mixed with the model, fitted on the training split "
           "with the run's tokenizer (5 with kneser_ney: the baseline itself; Bengio et al. 2003 mix with a "
           "trigram, 3)"
    )
    ngram_mixture_smoothing: str = _f(
        "kneser_ney", "with ngram_mixture: kneser_ney (modified Kneser-Ney, Chen & Goodman 1998) | "
                      "interpolated (Jelinek-Mercer deleted interpolation, its weights fitted on validation: "
                      "Bengio et al. 2003's interpolated trigram)",
        choices=MIXTURE_SMOOTHINGS,
    )
    ngram_mixture_weight: float | None = _f(
        None, "with ngram_mixture: the model's weight a in [0, 1]; None = fitted by EM on validation "
              "(Bengio et al. 2003, Table 1, mix with a = 0.5)"
    )

    def __post_init__(self) -> None:
        check_field_types(self)
        if not self.output_dir:
            raise ValueError("TrainingConfig.output_dir is required")
        positive = ["block_size", "batch_size", "eval_batch_size", "num_epochs", "logging_steps", "nonmono"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"TrainingConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ["max_source_length", "max_target_length"]:
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ValueError(f"TrainingConfig.{name} must be >= 2 "
                                 f"(a token and <eos>) or None, got {value}")
        for name in ["max_steps", "save_steps", "save_total_limit"]:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"TrainingConfig.{name} must be >= 1 or None, got {value}")
        if self.max_time_within_epoch and self.max_time_s is None:
            raise ValueError("TrainingConfig.max_time_within_epoch needs a budget: set max_time_s (seconds)")
        if self.max_time_s is not None and not self.max_time_s > 0:
            raise ValueError(f"TrainingConfig.max_time_s must be > 0 seconds or None, got {self.max_time_s}")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            raise ValueError("TrainingConfig.early_stopping_patience must be >= 1 or None, got "
                             f"{self.early_stopping_patience}")
        for name, choices in [("optimizer", OPTIMIZERS), ("lr_scheduler", LR_SCHEDULERS),
                              ("mixed_precision", MIXED_PRECISION)]:
            if getattr(self, name) not in choices:
                raise ValueError(f"TrainingConfig.{name} must be one of {', '.join(choices)}; "
                                 f"got {getattr(self, name)!r}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ValueError("TrainingConfig.learning_rate must be a positive number, "
                             f"got {self.learning_rate}")
        for name in ["momentum", "weight_decay", "lr_decay", "warmup_steps"]:
            if getattr(self, name) < 0:
                raise ValueError(f"TrainingConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.momentum and self.optimizer != "sgd":
            raise ValueError("TrainingConfig.momentum applies to optimizer='sgd' only "
                             f"(got optimizer={self.optimizer!r})")
        for name in ("adam_beta1", "adam_beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"TrainingConfig.{name} must lie in [0, 1), got {getattr(self, name)}")
        if not (0 <= self.adam_epsilon and math.isfinite(self.adam_epsilon)):
            raise ValueError(f"TrainingConfig.adam_epsilon must be a number >= 0, got {self.adam_epsilon}")
        if self.nt_asgd and self.fine_tune:
            raise ValueError("TrainingConfig: nt_asgd waits for a trigger, "
                             "fine_tune averages from the start; choose one")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"TrainingConfig.max_grad_norm must be > 0 or None, got {self.max_grad_norm}")
        self._check_mixture()

    def _check_mixture(self) -> None:
        """The mixture's n-gram settings: valid values, and given only with ``ngram_mixture``."""
        order, weight = self.ngram_mixture_order, self.ngram_mixture_weight
        if isinstance(order, bool) or not isinstance(order, int) or order < 1:
            raise ValueError(f"TrainingConfig.ngram_mixture_order must be an integer >= 1, got {order!r}")
        if self.ngram_mixture_smoothing not in MIXTURE_SMOOTHINGS:
            raise ValueError(f"TrainingConfig.ngram_mixture_smoothing must be one of "
                             f"{', '.join(MIXTURE_SMOOTHINGS)}; got {self.ngram_mixture_smoothing!r}")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int | float)
                                   or not 0.0 <= weight <= 1.0):
            raise ValueError("TrainingConfig.ngram_mixture_weight must be a number in [0, 1] (the model's "
                             f"weight) or None (fitted on validation), got {weight!r}")
        if not self.ngram_mixture:
            given = [name for name, default in MIXTURE_DEFAULTS.items() if getattr(self, name) != default]
            if given:
                raise ValueError(f"TrainingConfig.{given[0]} applies to the n-gram mixture: set "
                                 "ngram_mixture=True (--ngram-mixture) or leave it out")

    @classmethod
    def for_model(cls, model_type, recipe: str | None = None, **fields) -> TrainingConfig:
        """The settings of ``model_type``'s training recipe (``recipe``, default the ``"default"`` one), with
        ``fields`` over them: ``TrainingConfig.for_model("awd_lstm", output_dir="runs/awd", max_time_s=300)``.

        ``model_type``: a model type name (``"nplm"``), or a model or config with a ``model_type``. The
        recipes are in :data:`hf_nlm.models.MODEL_TYPES` (``MODEL_TYPES["nplm"].recipes``); each also gives
        model and tokenizer settings, which ``hf-nlm train`` applies and Python code passes to the config and
        tokenizer.
        """
        from ..models import MODEL_TYPES

        name = getattr(getattr(model_type, "config", model_type), "model_type", model_type)
        if name not in MODEL_TYPES:
            raise ValueError(f"TrainingConfig.for_model: unknown model type {name!r}; "
                             f"known: {', '.join(MODEL_TYPES)}")
        return cls(**recipe_training_values(MODEL_TYPES[name].recipe(recipe), fields), **fields)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
