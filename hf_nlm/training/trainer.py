"""One Accelerate-based training loop for every LM of the package, causal or encoder-decoder.

``train_lm(model, tokenizer, datasets, config)`` reads like a textbook loop:

    for epoch:                                   (deterministic order: seed + epoch)
        for batch of blocks:                     (one global batch split across processes)
            loss = model(**batch).loss           (mean NLL of the batch's targets)
            loss.backward(); clip; optimizer.step(); scheduler.step()
        validation perplexity -> keep the best weights, early stopping
        checkpoint (atomic)
    best weights -> output_dir, test perplexity, model card, results.json

What it adds to the textbook: exact resumption (a checkpoint records the epoch and the number of
batches done in it; the epoch's order is rebuilt from ``seed + epoch``), a checkpoint whenever the
run dies (Ctrl-C, an exception, a non-finite loss), multi-process data parallelism whose result
equals one process on the same global batch, ``log.jsonl`` and ``curves.png``.

An encoder-decoder model (``config.is_encoder_decoder``) trains the same way on paired (source,
target) examples (``hf_nlm.data.pairs``): its batching serves shuffled, padded batches of examples
and scores the validation targets; everything else (optimizers, schedules, early stopping, time
budget, checkpoints, several processes) is shared.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import sys
import threading
import time
import typing
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import gather_object
from tqdm.auto import tqdm

from ..data.batching import PairedBatching, batching_for, is_encoder_decoder
from ..data.pairs import PairFormat
from ..data.registry import corpus_card
from ..evaluation import evaluate_lm, evaluate_seq2seq, score_split
from ..heads import OutputHead
from ..hub.model_card import BASELINE_KEY
from ..modeling_utils import check_checkpoint_model_type
from ..tokenization import tokenizer_fingerprint
from .checkpoint import (
    TRAINER_STATE,
    capture_rng_state,
    checkpoints_dir,
    list_checkpoints,
    load_model_weights,
    load_torch_state,
    load_training_tensors,
    read_trainer_state,
    resolve_checkpoint,
    restore_rng_state,
    rotate_checkpoints,
    save_checkpoint,
    save_pretrained_atomic,
)
from .config import RESUME_CHANGEABLE, TrainingConfig
from .optim import WeightAverager, build_lr_scheduler, build_optimizer, nt_asgd_triggered
from .run_folder import (
    BEST_MODEL_DIR,
    acquire_lock,
    append_jsonl,
    is_disk_full,
    output_dir_error,
    plot_curves,
    prepare_output_dir,
    release_lock,
    run_environment,
    save_final_model,
    truncate_log,
    write_results,
)


@dataclass
class TrainerState:
    """Where a run stands; saved as ``trainer_state.json`` in every checkpoint."""

    epoch: int = 0  # the epoch in progress (0-based); == epochs completed at an epoch boundary
    step_in_epoch: int = 0  # batches of `epoch` already trained on
    global_step: int = 0  # optimizer updates done in total
    best_val_ppl: float | None = None
    best_epoch: int | None = None
    epochs_without_improvement: int = 0
    epoch_nll_sum: float = 0.0  # summed NLL of the targets trained on so far in `epoch`
    epoch_tokens: int = 0  # targets trained on so far in `epoch` (all processes)
    epoch_time_s: float = 0.0  # training seconds spent so far in `epoch`
    window_nll_sum: float = 0.0  # summed NLL since the last step record of log.jsonl
    window_tokens: int = 0  # targets since the last step record
    # The training objective summed like the NLL: the NLL plus AR/TAR (AWD-LSTM), or with the numerals
    # weighted (numeracy LM's numeral_loss_weight); equal to the NLL for the other models.
    epoch_objective_sum: float = 0.0
    window_objective_sum: float = 0.0
    train_tokens: int = 0  # targets trained on in the whole run
    elapsed_s: float = 0.0  # wall-clock seconds of the whole run, across resumptions
    stop_reason: str | None = None
    val_losses: list[float] = field(default_factory=list)  # every epoch's validation loss (NT-ASGD's trigger)
    averaging_since_step: int | None = None  # the update from which the weights are averaged (ASGD)
    average_count: int = 0  # updates folded into the average so far

    @classmethod
    def from_saved(cls, saved: dict, path: str | os.PathLike) -> TrainerState:
        """The state a checkpoint's ``trainer_state.json`` (``path``, read as ``saved``) holds; a field of the
        wrong type is a ``ValueError`` naming the file, the field and the type expected."""
        from huggingface_hub.dataclasses import type_validator

        def as_float(value):  # JSON writes 2.0 as 2
            return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

        hints = typing.get_type_hints(cls)
        values = {}
        for name, expected in hints.items():
            if name not in saved:
                continue
            value = saved[name]
            if "float" in str(expected):
                value = [as_float(v) for v in value] if isinstance(value, list) else as_float(value)
            values[name] = value
            try:
                type_validator(name, value, expected)
            except TypeError:
                shown = str(cls.__dataclass_fields__[name].type).replace(" | ", " or ")
                raise ValueError(f"{path}: field {name!r} must be {shown}, got {value!r}; the checkpoint is "
                                 "damaged: resume from another one (--resume DIR/checkpoints/checkpoint-N)"
                                 ) from None
        return cls(**values)


class _DeferredInterrupt:
    """Turn SIGINT / SIGTERM into a flag that the loop checks between updates.

    An interrupt that lands in the middle of an update (after ``optimizer.step`` but before the
    step counter moves) would leave a checkpoint that is not exactly resumable; the loop raises
    ``KeyboardInterrupt`` itself at the next update boundary instead. A second signal interrupts at once.
    """

    def __init__(self) -> None:
        self.received: str | None = None
        self._old: dict = {}

    def __enter__(self) -> _DeferredInterrupt:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.received is not None:
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}")
        self.received = signal.Signals(signum).name

    def check(self) -> None:
        if self.received is not None:
            raise KeyboardInterrupt(f"{self.received} received; "
                                    "training stopped after the last completed update")

    def __exit__(self, *exc) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def device_line(device: str, num_processes: int = 1) -> str:
    """The run's ``device: cpu, N torch threads`` line. On CPU, where ``OMP_NUM_THREADS`` is set (``accelerate
    launch`` sets 1 for a CPU launch) and the process has fewer torch threads than its share of the cores it
    may run on (``os.sched_getaffinity``), the line says so and how to use them: the count is left as the
    environment set it."""
    threads = torch.get_num_threads()
    processes = f" x {num_processes} processes" if num_processes > 1 else ""
    line = f"device: {device}{processes}, {threads} torch threads"
    omp = os.environ.get("OMP_NUM_THREADS")
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    share = max(cores // max(num_processes, 1), 1)
    if device.startswith("cpu") and omp is not None and threads < share:
        line += (f" of the {share} cores {'each process' if num_processes > 1 else 'it'} may use: "
                 f"OMP_NUM_THREADS={omp} is set (accelerate launch sets 1 on CPU); run with "
                 f"OMP_NUM_THREADS={share} (e.g. OMP_NUM_THREADS={share} accelerate launch ...) or call "
                 f"torch.set_num_threads({share}) to use them")
    return line


class LMTrainer:
    """The training loop of :func:`train_lm`, as an object so each part can be called on its own.

    Args:
        model: a causal LM whose ``forward(input_ids, labels=...)`` returns the mean NLL as ``loss``, or an
            encoder-decoder model (``config.is_encoder_decoder``) whose ``forward(input_ids, attention_mask,
            labels, decoder_attention_mask)`` does (the transformers seq2seq contract).
        tokenizer: its tokenizer (saved with every checkpoint).
        datasets: a ``DatasetDict`` (or dict) with a ``train`` split and optionally ``validation``
            and ``test``, each with a ``text`` column; for an encoder-decoder model, with the source and
            target columns ``config.source_column`` / ``config.target_column``.
        config: the :class:`TrainingConfig`.
        accelerator: an ``accelerate.Accelerator`` to use; by default one is made from ``config``.
        dataset_name: shown in the model card.
        run_spec: the run's specification (:meth:`hf_nlm.training.RunSpec.to_dict`) when
            :func:`hf_nlm.training.train` made the run: kept in every checkpoint's ``trainer_state.json`` and
            in ``results.json``, so that :meth:`~hf_nlm.training.RunSpec.from_run_folder` reads it back.
        ngram_baseline: the n-gram model measured on the same split
            (:func:`hf_nlm.training.run.ngram_baseline`: ``model``, ``order``, ``validation``), reported with
            the ratio of the model's validation perplexity to its in ``results.json`` and the model card.
    """

    def __init__(
        self,
        model,
        tokenizer,
        datasets,
        config: TrainingConfig,
        accelerator: Accelerator | None = None,
        dataset_name: str | None = None,
        run_spec: dict | None = None,
        ngram_baseline: dict | None = None,
    ) -> None:
        self.config = config
        self.run_spec = run_spec
        self.ngram_baseline = ngram_baseline
        # Read when the run starts: the code that trains is the commit checked out now.
        self.environment = run_environment()
        self.tokenizer = tokenizer
        if getattr(model.config, "tokenizer_fingerprint", False) is None:
            model.config.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer)  # saved with the model
        self.dataset_name = dataset_name
        self.accelerator = accelerator or make_accelerator(config)
        acc = self.accelerator
        launched = int(os.environ.get("WORLD_SIZE", "1"))
        if acc.num_processes != launched:
            raise RuntimeError(
                f"launched as {launched} processes (WORLD_SIZE) but the Accelerator sees "
                f"{acc.num_processes}: each process would train alone. On a machine without GPUs pass "
                "Accelerator(cpu=True)."
            )
        self.output_dir = Path(config.output_dir)
        prepare_output_dir(self.output_dir, resuming=bool(config.resume_from_checkpoint),
                           overwrite=config.overwrite_output_dir, main_process=acc.is_main_process,
                           wait_for_everyone=acc.wait_for_everyone)
        self.log_path = self.output_dir / "log.jsonl"

        if "train" not in datasets:
            raise ValueError(f"datasets needs a 'train' split, got {list(datasets)}")
        self.datasets = datasets
        if config.nt_asgd and "validation" not in datasets:
            raise ValueError("nt_asgd is triggered by the validation loss: "
                             "the datasets need a 'validation' split")
        # Feed-forward models train on shuffled blocks; recurrent ones on columns of the stream with
        # the state carried from batch to batch (truncated BPTT); encoder-decoder models on shuffled
        # (source, target) examples. The batching decides which.
        self.batching = batching_for(model, tokenizer, config.block_size,
                                     pairs=pair_format(config) if is_encoder_decoder(model) else None)
        train_stream, self.train_stats = self.batching.encode_split(datasets["train"], "train")
        self.batches = self.batching.training_batches(
            train_stream, config.batch_size, acc.num_processes, acc.process_index, seed=config.seed,
            variable_bptt=config.variable_bptt, pin_memory=acc.device.type == "cuda",
            group_by_length=config.group_by_length,
        )
        self.train_stats.update(self.batches.stats)
        self.val_stream, self.val_stats = None, None
        if "validation" in datasets:
            self.val_stream, self.val_stats = self.batching.encode_split(datasets["validation"], "validation")
        targets = self.batching.target_stream(train_stream)  # every target once
        head = getattr(model, "lm_head", None)
        if isinstance(head, OutputHead):  # e.g. the split softmax needs ids sorted by frequency
            counts = torch.bincount(targets["input_ids"], minlength=len(tokenizer))
            head.check_training_counts(counts, tokenizer.all_special_ids)
            if not config.resume_from_checkpoint:  # a resumed run's head comes back from the checkpoint
                head.prepare_training(targets)
        self._check_same_data_on_all_processes()
        self.carried_state = None  # the state at the end of the last batch (recurrent models; detached)

        # Only the linear / cosine schedules need the run's length (variable BPTT draws every epoch's chunks).
        self.total_steps = None
        if config.lr_scheduler in ("linear", "cosine"):
            self.total_steps = sum(self.batches.steps(epoch) for epoch in range(config.num_epochs))
        if config.max_steps is not None:
            self.total_steps = min(self.total_steps or config.max_steps, config.max_steps)

        self.unwrapped_model = model
        optimizer = build_optimizer(model, config)
        # The scheduler is NOT passed to accelerator.prepare: accelerate would step it once per
        # process per update (it assumes a per-process data loader); ours is one step per update.
        self.scheduler = build_lr_scheduler(optimizer, config, self.total_steps)
        if config.mixed_precision == "fp16":
            # fp16 needs accelerate's wrapped optimizer: it holds the GradScaler.
            self.model, self.optimizer = acc.prepare(model, optimizer)
        else:
            # The plain torch optimizer: accelerate's wrapper costs ~0.3 ms per update (a package
            # look-up on the file system in step(), inspect.signature in zero_grad()), which is
            # more than a whole small-model update on a GPU.
            self.model, self.optimizer = acc.prepare(model), optimizer
        self.state = TrainerState()
        self.averager = WeightAverager(model)
        self._last_saved_step: int | None = None
        self._rng_before_step: dict | None = None  # set while an update is under way
        self._last_lr = config.learning_rate
        self._elapsed_at_start, self._run_start = 0.0, time.perf_counter()
        self._last_plot = self._run_start

    # ------------------------------------------------------------------ helpers

    def _check_same_data_on_all_processes(self) -> None:
        acc = self.accelerator
        if acc.num_processes == 1:
            return
        mine = torch.tensor([self.train_stats["num_tokens"], len(self.tokenizer)], device=acc.device)
        everyone = acc.gather(mine[None]).cpu()
        if not (everyone == everyone[0]).all():
            raise RuntimeError(
                "the processes built different training data (tokens, vocabulary per process: "
                f"{everyone.tolist()}); every process must load the same corpus and the same tokenizer"
            )

    def _state_dict(self) -> dict:
        state = asdict(self.state)
        state.update(
            config=self.config.to_dict(),
            num_processes=self.accelerator.num_processes,
            global_batch_size=self.batches.global_batch_size,
            steps_per_epoch=self.batches.steps(self.state.epoch),
            model_type=self.unwrapped_model.config.model_type,
        )
        if self.run_spec is not None:
            state["run_spec"] = self.run_spec
        return state

    def _say(self, line: str) -> None:
        """One line of the run's account on stderr (main process; with or without the progress bar, above it):
        stdout stays for the caller's results (``hf-nlm train`` and the benchmarks print JSON there)."""
        if self.accelerator.is_main_process:
            tqdm.write(line, file=sys.stderr)

    def summary_lines(self) -> list[str]:
        """What the run trains on and with: each split's lines and tokens, the vocabulary and the share of
        ``<unk>`` among the training tokens, the model and its parameter count, the device and torch
        threads."""
        splits = []
        for split, stats in (("train", self.train_stats), ("validation", self.val_stats), ("test", None)):
            if split in self.datasets:
                tokens = f", {stats['num_tokens']:,} tokens" if stats else ""
                splits.append(f"{split} {len(self.datasets[split]):,} lines{tokens}")
        unk = self.train_stats["num_unk"] / max(self.train_stats["num_tokens"], 1)
        model = self.unwrapped_model
        acc = self.accelerator
        return [
            f"corpus: {'; '.join(splits)}",
            f"vocabulary: {len(self.tokenizer):,} tokens; {self.tokenizer.unk_token or '<unk>'} is "
            f"{100 * unk:.2f}% of the training tokens",
            f"model: {model.config.model_type}, {sum(p.numel() for p in model.parameters()):,} parameters",
            device_line(str(acc.device), acc.num_processes),
        ]

    def _log(self, record: dict) -> None:
        if self.accelerator.is_main_process:
            append_jsonl(self.log_path, record)

    @staticmethod
    def _objective(objective_sum: float, nll_sum: float, tokens: int) -> dict:
        """``{"train_objective": mean}`` where the training objective is not the plain NLL (regularisers, a
        numeral weight): ``train_loss`` and ``train_ppl`` are always the NLL's."""
        return {"train_objective": objective_sum / max(tokens, 1)} if objective_sum != nll_sum else {}

    def _elapsed(self) -> float:
        return self._elapsed_at_start + (time.perf_counter() - self._run_start)

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self, collective: bool = True) -> Path:
        """Write ``checkpoints/checkpoint-<global step>`` (main process). ``collective=False`` is for
        error paths, where other processes may not reach this point: no gathering, no barrier."""
        acc = self.accelerator
        self.state.elapsed_s = self._elapsed()
        folder = checkpoints_dir(self.output_dir) / f"checkpoint-{self.state.global_step}"
        # After an exception inside an update, the RNG state from before that update: the resumed run
        # redoes it with the same dropout masks.
        rng_state = self._rng_before_step if self._rng_before_step is not None else capture_rng_state()
        if collective and acc.num_processes > 1:
            rng_states = dict(enumerate(gather_object([rng_state])))
        else:
            rng_states = {acc.process_index: rng_state}
        tensors = self._training_tensors(collective)
        if acc.is_main_process:
            save_checkpoint(
                folder, self.unwrapped_model, self.tokenizer, self.optimizer, self.scheduler,
                self._state_dict(), rng_states, tensors,
            )
            rotate_checkpoints(self.output_dir, self.config.save_total_limit, protect=folder)
        if collective:
            acc.wait_for_everyone()
        self._last_saved_step = self.state.global_step
        return folder

    def _training_tensors(self, collective: bool) -> dict[str, torch.Tensor]:
        """The averaged weights and, in the middle of an epoch, the state carried between batches
        (of every process's columns, or a single process's without collectives)."""
        acc, st = self.accelerator, self.state
        st.average_count = self.averager.count
        tensors = self.averager.state_tensors() if acc.is_main_process else {}  # only the main process writes
        if st.step_in_epoch > 0:
            tensors.update(self.batches.state_tensors(self.carried_state, acc.gather if collective else None))
        return tensors

    def _restore_training_tensors(self, folder: Path) -> None:
        tensors = load_training_tensors(folder)
        self.averager.load_state_tensors(tensors, self.state.average_count)
        self.carried_state = None
        if self.state.step_in_epoch > 0:
            self.carried_state = self.batches.restore_state(tensors, self.accelerator.device, str(folder))

    def load_checkpoint(self, resume_from_checkpoint: str | os.PathLike) -> Path:
        """Restore model, optimizer, scheduler, RNG and trainer state from a checkpoint folder."""
        acc = self.accelerator
        folder = resolve_checkpoint(resume_from_checkpoint, self.output_dir)
        check_checkpoint_model_type(folder, self.unwrapped_model.config.model_type)
        saved = read_trainer_state(folder)
        if not isinstance(saved.get("config", {}), dict):
            raise ValueError(f"{folder / TRAINER_STATE}: field 'config' must be a JSON object (the run's "
                             f"TrainingConfig), got {saved['config']!r}")
        # The data order is a function of (seed, block size, global batch size): resuming with other
        # values would silently train on other batches than the interrupted run.
        saved_config = saved.get("config", {})
        mismatched = [
            f"{name}: checkpoint {saved_value} != now {now}"
            for name, saved_value, now in [
                ("seed", saved_config.get("seed"), self.config.seed),
                ("block_size", saved_config.get("block_size"), self.config.block_size),
                ("global batch size (batch_size x processes)", saved.get("global_batch_size"),
                 self.batches.global_batch_size),
                ("variable_bptt", saved_config.get("variable_bptt", False), self.config.variable_bptt),
                ("group_by_length", saved_config.get("group_by_length", False), self.config.group_by_length),
                ("max_source_length", saved_config.get("max_source_length"), self.config.max_source_length),
                ("max_target_length", saved_config.get("max_target_length"), self.config.max_target_length),
            ]
            if saved_value != now
        ]
        checked = {"seed", "block_size", "variable_bptt", "group_by_length", "max_source_length",
                   "max_target_length"}
        mismatched += [
            f"{name}: checkpoint {saved_config[name]} != now {getattr(self.config, name)}"
            for name in (f.name for f in dataclasses.fields(TrainingConfig))
            if name not in RESUME_CHANGEABLE and name not in checked and name in saved_config
            and saved_config[name] != getattr(self.config, name)
        ]
        if mismatched:
            raise ValueError(f"cannot resume exactly from {folder}: " + "; ".join(mismatched))
        try:
            load_model_weights(folder, self.unwrapped_model)
        except RuntimeError as err:
            raise ValueError(f"{folder}: the saved weights do not fit this model ({err})") from err
        self.state = TrainerState.from_saved(saved, folder / TRAINER_STATE)
        self.state.stop_reason = None
        load_torch_state(folder, "optimizer.pt", self.optimizer.load_state_dict)
        load_torch_state(folder, "scheduler.pt", self.scheduler.load_state_dict)
        rng_file = folder / f"rng_state_{acc.process_index}.pt"
        if rng_file.is_file():
            load_torch_state(folder, rng_file.name, restore_rng_state)
        self._restore_training_tensors(folder)
        self._last_saved_step = self.state.global_step
        if acc.is_main_process:
            truncate_log(self.log_path, self.state.global_step)
        return folder

    # ------------------------------------------------------------------ training

    def training_step(self, batch: dict[str, torch.Tensor], global_targets: int,
                      lr_scale: float = 1.0) -> tuple[float, float]:
        """One update on this process's share of a global batch. Returns the global batch's summed NLL and
        summed training objective: ``output.loss``, which adds the regularisers (AWD-LSTM's AR/TAR) or weights
        the targets (the numeracy LM's numeral weight) to the plain NLL, ``output.nll``, where the model
        returns one.

        Each process's ``loss`` is the mean over its own ``n`` targets; DDP averages gradients over the
        P processes. Scaling the loss by ``n * P / N`` (N: targets in the global batch) makes the
        averaged gradient that of the mean over all N targets, exactly what one process computes on
        the whole global batch, even when the chunks hold different numbers of targets.

        Recurrent models start from the state the previous batch left (``carried_state``, cut from the
        graph: truncated BPTT). ``lr_scale`` multiplies this update's learning rate (variable BPTT).

        Raises ``FloatingPointError`` (before any parameter changes) if the loss is not finite on any process.
        """
        acc = self.accelerator
        self._rng_before_step = capture_rng_state()  # ~2 us on a CPU: a small price per update
        local_targets = self.batching.num_targets(batch)
        batch = {k: v.to(acc.device, non_blocking=True) for k, v in batch.items()}
        output = self.model(**batch, **self.batches.state_inputs(self.carried_state))
        loss = output.loss
        nll = getattr(output, "nll", None)
        nll = loss if nll is None else nll

        # One host sync per update: a non-finite loss must be caught before it reaches the weights.
        sums = torch.stack([loss.detach().float(), nll.detach().float()]) * local_targets
        check = torch.cat([sums, (~torch.isfinite(loss.detach())).float()[None]])
        if acc.num_processes > 1:
            check = acc.reduce(check, reduction="sum")
        objective_sum, nll_sum, bad = check.tolist()
        if bad:
            raise FloatingPointError(f"non-finite training loss ({objective_sum / max(global_targets, 1)})")

        scale = local_targets * acc.num_processes / global_targets
        acc.backward(loss * scale if scale != 1.0 else loss)
        if self.config.max_grad_norm is not None:
            acc.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self._last_lr = self.optimizer.param_groups[0]["lr"]
        if lr_scale != 1.0:
            for group in self.optimizer.param_groups:
                group["lr"] *= lr_scale  # scheduler.step() below sets the next rate from scratch
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.state.averaging_since_step is not None:
            self.averager.update()
        self.carried_state = self.batches.state_after(output)
        self._rng_before_step = None  # the update is complete
        return nll_sum, objective_sum

    def train_epoch(self, interrupt: _DeferredInterrupt | None = None) -> bool:
        """Train on the rest of epoch ``state.epoch``. Returns True when the epoch is complete, False
        when ``max_steps`` stopped it early."""
        config, st = self.config, self.state
        steps_per_epoch = self.batches.steps(st.epoch)
        if st.step_in_epoch == 0:
            self.carried_state = None  # every epoch reads the columns from their start, with a fresh state
        self.model.train()
        bar = tqdm(
            total=steps_per_epoch,
            initial=st.step_in_epoch,
            desc=f"epoch {st.epoch + 1}/{config.num_epochs}",
            disable=not (self.accelerator.is_main_process and config.progress_bar),
            dynamic_ncols=True,
            mininterval=0.5,
        )
        window_start = time.perf_counter()
        epoch_start = time.perf_counter() - st.epoch_time_s
        try:
            for batch, n_global, lr_scale in self.batches.epoch(st.epoch, st.step_in_epoch):
                try:
                    nll_sum, objective_sum = self.training_step(batch, n_global, lr_scale)
                except FloatingPointError as err:
                    # Every process saw the same flag, so the checkpoint can be written collectively.
                    self.save_checkpoint()
                    raise FloatingPointError(
                        f"{err} at update {st.global_step + 1} (epoch {st.epoch + 1}, batch "
                        f"{st.step_in_epoch + 1}); training stopped; the last good state is saved in "
                        f"{checkpoints_dir(self.output_dir)}/checkpoint-{st.global_step}"
                    ) from None
                # The update is done: move the counters before anything else can interrupt.
                st.step_in_epoch += 1
                st.global_step += 1
                st.epoch_nll_sum += nll_sum
                st.epoch_objective_sum += objective_sum
                st.epoch_tokens += n_global
                st.train_tokens += n_global
                st.window_nll_sum += nll_sum
                st.window_objective_sum += objective_sum
                st.window_tokens += n_global
                bar.update(1)

                if st.global_step % config.logging_steps == 0:
                    now = time.perf_counter()
                    loss = st.window_nll_sum / st.window_tokens
                    record = {
                        "type": "step",
                        "epoch": st.epoch,
                        "step_in_epoch": st.step_in_epoch,
                        "global_step": st.global_step,
                        "train_loss": loss,
                        "train_ppl": math.exp(min(loss, 50.0)),
                        **self._objective(st.window_objective_sum, st.window_nll_sum, st.window_tokens),
                        "lr": self._last_lr,
                        "tokens_per_s": st.window_tokens / max(now - window_start, 1e-9),
                        "elapsed_s": self._elapsed(),
                    }
                    self._log(record)
                    objective = {"objective": f"{record['train_objective']:.3f}"} \
                        if "train_objective" in record else {}
                    bar.set_postfix(loss=f"{loss:.3f}", ppl=f"{record['train_ppl']:.1f}", **objective,
                                    lr=f"{self._last_lr:.3g}")
                    st.window_nll_sum, st.window_objective_sum, st.window_tokens = 0.0, 0.0, 0
                    window_start = now
                st.epoch_time_s = time.perf_counter() - epoch_start

                if config.save_steps is not None and st.global_step % config.save_steps == 0:
                    self.save_checkpoint()
                if interrupt is not None:
                    interrupt.check()
                if config.max_steps is not None and st.global_step >= config.max_steps:
                    break
                if config.max_time_within_epoch and self._budget_spent():
                    break
        finally:
            bar.close()
            st.epoch_time_s = time.perf_counter() - epoch_start
        return st.step_in_epoch >= steps_per_epoch

    def validation_loss(self) -> float | None:
        """Mean NLL per target on the validation split (every token predicted once), or None without one.

        The blocks (columns, examples) are split across processes and the sums added up, so each process does
        1/P of the work.
        """
        acc, config = self.accelerator, self.config
        if self.val_stream is None:
            return None
        total, count = score_split(
            self.batching, self.unwrapped_model, self.val_stream, config.eval_batch_size, acc.device,
            acc.num_processes, acc.process_index
        )
        if acc.num_processes > 1:
            sums = acc.reduce(torch.tensor([total, count], dtype=torch.float64, device=acc.device),
                              reduction="sum")
            total, count = sums.tolist()
        return total / count

    def _end_epoch(self) -> None:
        """Validation, best weights, early-stopping counter, the epoch's log record, a checkpoint."""
        config, st, acc = self.config, self.state, self.accelerator
        # Once averaging has started, validation and the best model use the averaged weights.
        with self._averaged_weights():
            val_loss = self.validation_loss()
            val_ppl = math.exp(val_loss) if val_loss is not None else None
            if val_ppl is not None:
                if st.best_val_ppl is None or val_ppl < st.best_val_ppl:
                    st.best_val_ppl, st.best_epoch, st.epochs_without_improvement = val_ppl, st.epoch, 0
                    if acc.is_main_process:
                        save_pretrained_atomic(self.output_dir / BEST_MODEL_DIR, self.unwrapped_model,
                                               self.tokenizer)
                else:
                    st.epochs_without_improvement += 1
        switched = False
        if val_loss is not None:
            st.val_losses.append(val_loss)
            if config.nt_asgd and st.averaging_since_step is None \
                    and nt_asgd_triggered(st.val_losses, config.nonmono):
                st.averaging_since_step, switched = st.global_step, True
        train_loss = st.epoch_nll_sum / max(st.epoch_tokens, 1)
        record = {
            "type": "epoch",
            "epoch": st.epoch,
            "global_step": st.global_step,
            "train_loss": train_loss,
            "train_ppl": math.exp(min(train_loss, 50.0)),
            **self._objective(st.epoch_objective_sum, st.epoch_nll_sum, st.epoch_tokens),
            "val_loss": val_loss,
            "val_ppl": val_ppl,
            "best_val_ppl": st.best_val_ppl,
            "lr": self._last_lr,
            "tokens_per_s": st.epoch_tokens / max(st.epoch_time_s, 1e-9),
            "elapsed_s": self._elapsed(),
            "averaged": st.averaging_since_step is not None and not switched,
        }
        if switched:
            record["asgd_from_step"] = st.global_step
        self._log(record)
        objective = (f", training objective {record['train_objective']:.4f}" if "train_objective" in record
                     else "")
        self._say(f"epoch {st.epoch + 1}/{config.num_epochs}: {st.step_in_epoch} steps, train loss "
                  f"{train_loss:.4f} (ppl {record['train_ppl']:.2f}){objective}, {st.epoch_time_s:.1f} s")
        if val_ppl is not None:
            self._say(f"validation after epoch {st.epoch + 1}: ppl {val_ppl:.2f} "
                      f"(best so far {st.best_val_ppl:.2f})")
        if switched:
            self._say(f"NT-ASGD: averaging the weights from update {st.global_step} on")
        st.epoch += 1
        st.step_in_epoch = 0
        st.epoch_nll_sum, st.epoch_objective_sum, st.epoch_tokens, st.epoch_time_s = 0.0, 0.0, 0, 0.0
        self.save_checkpoint()
        # Redraw the curves for whoever watches a long run, at most every 30 s (a plot costs ~0.3 s).
        if acc.is_main_process and time.perf_counter() - self._last_plot > 30:
            plot_curves(self.log_path, self.output_dir / "curves.png")
            self._last_plot = time.perf_counter()

    def evaluate(self, split: str) -> dict:
        """The final report on ``self.datasets[split]``: ``evaluate_lm``, or ``evaluate_seq2seq`` for
        pairs."""
        config, acc = self.config, self.accelerator
        if isinstance(self.batching, PairedBatching):
            return evaluate_seq2seq(
                self.unwrapped_model, self.datasets[split], self.tokenizer, config.source_column,
                config.target_column, config.max_source_length, config.max_target_length,
                batch_size=config.eval_batch_size, device=acc.device, show_progress=config.progress_bar,
                split=split,
            )
        return evaluate_lm(
            self.unwrapped_model,
            self.datasets[split],
            self.tokenizer,
            block_size=config.block_size,
            # The reported perplexity is exact (a recurrent model: one column, the state never reset).
            batch_size=self.batching.exact_batch_size(config.eval_batch_size),
            device=acc.device,
            show_progress=config.progress_bar,
        )

    def _averaged_weights(self):
        """A ``with`` block in which the model holds the averaged weights (if averaging has started)."""
        return self.averager.swapped_in() if self.state.averaging_since_step is not None else nullcontext()

    def _budget_spent(self) -> bool:
        return self.config.max_time_s is not None and self._elapsed() >= self.config.max_time_s

    def _out_of_time(self) -> bool:
        """Is the budget spent (``max_time_within_epoch``; never before this run's first update), or else
        would another epoch, as long as the last one, end past ``max_time_s``? (Whole epochs: never before the
        first.)"""
        budget = self.config.max_time_s
        if self.config.max_time_within_epoch:
            return self.state.global_step > self._first_step and self._budget_spent()
        if budget is None or not self._epoch_seconds:
            return False
        return self._elapsed() + self._epoch_seconds[-1] > budget

    def _patience_exhausted(self) -> bool:
        patience = self.config.early_stopping_patience
        return patience is not None and self.state.epochs_without_improvement >= patience

    def train(self) -> dict:
        """Run (or resume) training, then save the best model and evaluate it. Returns the results.

        The run holds ``output_dir`` meanwhile (its lock file, see :mod:`.run_folder`); a full disk ends it
        with a :class:`~.run_folder.RunFolderError` naming the folder and the last complete checkpoint."""
        lock = acquire_lock(self.output_dir) if self.accelerator.is_main_process else None
        try:
            return self._train()
        except Exception as err:
            if not is_disk_full(err):
                raise
            found = list_checkpoints(self.output_dir)
            kept = f"; the last complete checkpoint is {found[-1]}: continue with --resume" if found else ""
            raise output_dir_error(self.output_dir, err, after=kept) from err
        finally:
            if lock is not None:
                release_lock(lock)

    def _train(self) -> dict:
        config, acc = self.config, self.accelerator
        if config.resume_from_checkpoint:
            self.load_checkpoint(config.resume_from_checkpoint)
            self._say_time_left()
        else:
            # Dropout masks etc.; different per process so they do not all drop the same units.
            torch.manual_seed(config.seed + acc.process_index)
            if acc.is_main_process and self.log_path.exists():
                self.log_path.unlink()  # a fresh run starts a fresh log
            if config.fine_tune:
                self.state.averaging_since_step = 0
        for line in self.summary_lines():
            self._say(line)
        self._elapsed_at_start = self.state.elapsed_s
        self._run_start = time.perf_counter()
        self._last_plot = self._run_start
        self._epoch_seconds: list[float] = []
        self._first_step = self.state.global_step

        st = self.state
        try:
            with _DeferredInterrupt() as interrupt:
                while st.epoch < config.num_epochs:
                    if self._patience_exhausted():
                        st.stop_reason = "early_stopping"
                        break
                    if config.max_steps is not None and st.global_step >= config.max_steps:
                        st.stop_reason = "max_steps"
                        break
                    if self._out_of_time():
                        st.stop_reason = "max_time"
                        break
                    epoch_started = time.perf_counter()
                    completed = self.train_epoch(interrupt)
                    if not completed:  # max_steps, or the budget with max_time_within_epoch, mid-epoch
                        max_steps_reached = (config.max_steps is not None
                                             and st.global_step >= config.max_steps)
                        st.stop_reason = "max_steps" if max_steps_reached else "max_time"
                        # A time budget's last updates count; max_steps validates only when no epoch was.
                        # Before the checkpoint, so that a resumed run knows the best perplexity so far.
                        if st.stop_reason == "max_time" or st.best_val_ppl is None:
                            self._validate_unfinished_epoch()
                        if self._last_saved_step != st.global_step:
                            self.save_checkpoint()
                        break
                    self._end_epoch()
                    self._epoch_seconds.append(time.perf_counter() - epoch_started)
                else:
                    st.stop_reason = "num_epochs"
        except BaseException as err:
            # No run dies without a checkpoint: save the last completed update (other processes may
            # be dead or stuck, so no collective calls), then let the error propagate. (Not on a full disk.)
            if self._last_saved_step != st.global_step and not is_disk_full(err):
                try:
                    self.save_checkpoint(collective=False)
                except Exception as save_err:  # never hide the original error
                    warnings.warn(f"could not write a checkpoint after the error: {save_err}", stacklevel=2)
            raise
        return self.finish()

    def _say_time_left(self) -> None:
        """A resumed run's time budget counts the whole run, the time it trained before included: say what is
        left, or refuse (``ValueError``) when nothing is."""
        budget, spent = self.config.max_time_s, self.state.elapsed_s
        if budget is None:
            return
        if spent >= budget:
            raise ValueError(
                f"TrainingConfig.max_time_s {budget:g} is spent: the run has trained for {spent:,.1f} s "
                f"already (the budget counts the whole run, its earlier time included); for {budget:g} s "
                f"more, resume with max_time_s={spent + budget:.1f}"
            )
        self._say(f"time budget: {budget:g} s for the whole run, which has trained for {spent:,.1f} s: "
                  f"{budget - spent:,.1f} s are left")

    def _validate_unfinished_epoch(self) -> None:
        """Validate the weights a run stopped with in the middle of an epoch; save them as ``best_model/`` if
        they are the best so far, and log the point (an ``"eval"`` record, at the fraction of the epoch done).
        Called before the mid-epoch checkpoint is written, so a resumed run knows this point; evaluation
        draws no random numbers and leaves the carried state alone, so resuming is otherwise unchanged."""
        st, acc = self.state, self.accelerator
        with self._averaged_weights():
            val_loss = self.validation_loss()
            if val_loss is None:
                return
            val_ppl = math.exp(val_loss)
            if st.best_val_ppl is None or val_ppl < st.best_val_ppl:
                st.best_val_ppl, st.best_epoch = val_ppl, st.epoch
                if acc.is_main_process:
                    save_pretrained_atomic(self.output_dir / BEST_MODEL_DIR, self.unwrapped_model,
                                           self.tokenizer)
        steps = max(self.batches.steps(st.epoch), 1)
        self._say(f"validation after {st.step_in_epoch} steps of epoch {st.epoch + 1}: ppl {val_ppl:.2f} "
                  f"(best {st.best_val_ppl:.2f})")
        self._log({"type": "eval", "epoch": st.epoch + st.step_in_epoch / steps,
                   "global_step": st.global_step, "val_loss": val_loss, "val_ppl": val_ppl,
                   "best_val_ppl": st.best_val_ppl, "elapsed_s": self._elapsed()})

    def finish(self) -> dict:
        """Load the best weights, save model + tokenizer into output_dir, evaluate, write the card and results
        (:mod:`.run_folder`)."""
        config, st, acc = self.config, self.state, self.accelerator
        acc.wait_for_everyone()
        best_dir = self.output_dir / BEST_MODEL_DIR
        if st.best_val_ppl is not None and best_dir.is_dir():
            load_model_weights(best_dir, self.unwrapped_model)
        elif st.averaging_since_step is not None:
            self.averager.copy_to_model()  # no validation to choose by: the averaged weights are the result
        results: dict = {}
        if acc.is_main_process:
            model = self.unwrapped_model
            save_final_model(self.output_dir, model, self.tokenizer)
            evaluations = {}
            for split in ("validation", "test"):
                if split in self.datasets and (split != "test" or config.eval_test):
                    evaluations[split] = self.evaluate(split)
            num_parameters = sum(p.numel() for p in model.parameters())
            results = {
                **evaluations,
                "train": dict(self.train_stats),
                "best_epoch": st.best_epoch,
                "best_val_ppl": st.best_val_ppl,
                "epochs_completed": st.epoch,
                "global_step": st.global_step,
                "stop_reason": st.stop_reason,
                "averaging_since_step": st.averaging_since_step,
                "train_tokens": st.train_tokens,
                "elapsed_s": self._elapsed(),
                "num_parameters": num_parameters,
                "num_processes": acc.num_processes,
                "environment": self.environment,
            }
            training = {k: v for k, v in config.to_dict().items()
                        if k not in ("output_dir", "resume_from_checkpoint")}
            training.update(stop_reason=st.stop_reason, epochs_completed=st.epoch, global_step=st.global_step)
            # What `hf-nlm card RUN_DIR` needs to write the card again.
            results.update(dataset=self.dataset_name, training_config=training)
            if self.run_spec is not None:
                results["run_spec"] = self.run_spec
            if self.ngram_baseline is not None and "validation" in evaluations:
                baseline = self.ngram_baseline
                ratio = evaluations["validation"]["perplexity"] / baseline["validation"]["perplexity"]
                results[BASELINE_KEY] = {**baseline, "ratio": ratio}
            write_results(self.output_dir, model.config, results, evaluations, corpus_card(self.dataset_name),
                          training, num_parameters, self.log_path)
        acc.wait_for_everyone()
        return results


def pair_format(config: TrainingConfig) -> PairFormat:
    """How the run reads paired examples (encoder-decoder models): the config's columns and maximum
    lengths."""
    return PairFormat(config.source_column, config.target_column, config.max_source_length,
                      config.max_target_length)


def make_accelerator(config: TrainingConfig) -> Accelerator:
    """The ``Accelerator`` for ``config``.

    Under ``torchrun`` on a machine without CUDA, accelerate only sets up the (gloo) process group
    when told ``cpu=True``; without it every process silently trains alone. So no CUDA + several
    processes means cpu=True.
    """
    several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    cpu = config.cpu or (several and not torch.cuda.is_available())
    return Accelerator(cpu=cpu, mixed_precision=config.mixed_precision)


def train_lm(model, tokenizer, datasets, config: TrainingConfig, accelerator: Accelerator | None = None,
             dataset_name: str | None = None, run_spec: dict | None = None) -> dict:
    """Train a causal LM, or an encoder-decoder model on paired examples, with :class:`TrainingConfig` and
    return the results (also in ``results.json``).

    See :class:`LMTrainer` for the arguments. Writes into ``config.output_dir``: the best model
    (by validation perplexity) with its tokenizer and generation config, ``README.md`` (model card),
    ``results.json``, ``log.jsonl``, ``curves.png``, ``checkpoints/`` and ``best_model/``.
    ``model`` is trained in place and holds the best weights afterwards.
    """
    return LMTrainer(model, tokenizer, datasets, config, accelerator, dataset_name, run_spec).train()

