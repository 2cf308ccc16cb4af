"""How much memory training a model takes, estimated before its weights exist, and the check that refuses
settings which cannot fit.

**What is estimated** is the path training runs (:meth:`hf_nlm.training.LMTrainer.training_step`):
``model(**batch)`` with the batch's labels, so that each head computes its loss through its training path
(:meth:`hf_nlm.heads.OutputHead.nll`: the fused softmax, a tree head's paths of the target words alone, a
numeral head's numeral branch on the numeral targets alone; never |V|-wide logits a head avoids),
``loss.backward()``, gradient clipping and the optimizer's step, twice (the first step makes the optimizer's
state, the second runs with it); then one validation batch of ``eval_batch_size`` rows, scored without
gradients as :mod:`hf_nlm.evaluation.scoring` scores it. The batch has the shape training gives it
(:func:`hf_nlm.data.batching_for`): a feed-forward n-gram model's blocks carry ``context_size`` tokens of
context before their ``block_size`` targets, a recurrent model reads ``batch_size`` columns of ``block_size``
positions, an encoder-decoder model ``batch_size`` pairs of ``max_source_length`` -> ``max_target_length``
tokens (:data:`PAIR_LENGTHS` where those are unset). Its token ids follow Zipf's law over the ids, which the
tokenizers rank by frequency; a numeracy model's numeral fields are those of the numerals drawn.

**How.** The model is built on the ``meta`` device: its parameters take no memory. The steps run under
:class:`LiveBytes`, a dispatch mode that sees every tensor an operation makes and follows its storage until it
is freed (a ``weakref`` on the storage says when): the bytes alive at each moment, and their peak. Summing
every allocation instead would count a step's transient tensors as if they were alive at once, several times
the real peak. A meta tensor has a shape but no values, and some operations need values: a target mask
selecting rows, a tree head's paths of the target words, a digit-RNN stepping to the longest numeral of the
batch. So only what derives from the weights is on ``meta``: the batch and the buffers (tree paths, numeral
tables) are real CPU tensors, an operation on real tensors alone runs for real (integer bookkeeping: a few
bytes per target), and one that mixes both runs on ``meta`` (a boolean mask first becomes the positions it
selects, the step that needs its values). Real or meta, every tensor counts the same. A batch of more than
:data:`MAX_ESTIMATED_TARGETS` targets is run at fewer rows and what grows with the batch scaled up.

**What the device adds.** What a process holds is not only what is alive. On a CPU, glibc's allocator keeps
the blocks it freed below its mmap threshold in its heap (:class:`Heap`), so that a validation batch runs on
top of what a training step left there, and oneDNN's LSTM keeps a workspace for its backward pass
(:func:`onednn_lstm_workspace`; :class:`OnDevice`); a tree head's CPU path works in blocks. A GPU's caching
allocator gives its cached blocks back before it runs out, so there the estimate is what is alive (cuDNN's own
workspaces are not counted). Not counted anywhere: the data (token streams, ``datasets``), the Python and
PyTorch runtime. The estimate is of float32 training; ``mixed_precision`` needs less for the activations.

``benchmarks/training_memory.py`` compares the estimate with the peak resident memory of real training steps
for every model type and head on a CPU, at the default recipes and at 4x their sizes: 0.97x to 1.40x of it
(docs/benchmarks.md).
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import weakref
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten

from ..memory import available_memory
from .config import TrainingConfig

aten = torch.ops.aten

#: The (source, target) lengths in tokens of an encoder-decoder batch whose ``max_source_length`` /
#: ``max_target_length`` are unset: a ROCStories story-stage pair ("title <sep> storyline" -> the
#: five-sentence story, about 20 -> 56 tokens with ``<eos>``) rounded up. The storyline stage (title ->
#: storyline, about 6 -> 12) needs much less: give the lengths for an estimate close to it.
PAIR_LENGTHS = (32, 64)

#: Targets in the batch the estimate runs: a larger batch is run at fewer rows, what grows with it scaled up.
MAX_ESTIMATED_TARGETS = 1 << 17
#: The largest real tensor the estimate makes (ids, paths, masks): a larger one is made on ``meta``.
MAX_REAL_ELEMENTS = 1 << 24

#: glibc's largest mmap threshold on 64-bit systems (``DEFAULT_MMAP_THRESHOLD_MAX``), where the threshold
#: stands in a process that has freed a block that big (reading a corpus of some MB does): smaller blocks come
#: from its heap.
HEAP_BLOCK = 32 << 20
#: What glibc's heap must have free at its top before it gives memory back (twice the mmap threshold).
TRIM_THRESHOLD = 2 * HEAP_BLOCK

#: Operations whose ``indices`` argument may hold boolean masks (turned into positions before a meta run).
_INDEX_OPS = (aten.index.Tensor, aten.index_put.default, aten.index_put_.default,
              aten._index_put_impl_.default, aten._unsafe_index.Tensor, aten._unsafe_index_put.default)
_FROM_DATA = (torch.tensor, torch.as_tensor, torch.asarray)


# ----------------------------------------------------------------------------- the run on meta


class OnDevice(TorchFunctionMode):
    """What a run on ``meta`` cannot know about the device it stands for, put back at the level of torch
    functions.

    Tensors made from Python data (``torch.tensor(values, device=weights.device)``: a grammar, the classes of
    a density) hold values later operations read: they are made on the CPU, not on ``meta``. On a CPU
    (``cpu``) a training LSTM (``torch._VF.lstm`` on a batch that is not packed) runs oneDNN's kernel, which
    keeps a workspace for its backward pass (:func:`onednn_lstm_workspace`) besides what the meta run of the
    LSTM keeps: it is added, alive until the backward pass has gone through the LSTM.

    (A table a function caches per device, the digit-RNN's grammar or the exponent classes of ``dexp``, is
    then cached as a CPU tensor for the ``meta`` device; nothing but the estimate runs a model on
    ``meta``.)"""

    def __init__(self, cpu: bool) -> None:
        super().__init__()
        self.onednn = cpu and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _FROM_DATA and str(kwargs.get("device", "")) == "meta":
            kwargs = {**kwargs, "device": torch.device("cpu")}
        elif func is torch.Tensor.new_tensor and args[0].is_meta:
            kwargs = {"dtype": args[0].dtype, **kwargs, "device": torch.device("cpu")}
        out = func(*args, **kwargs)
        if func is torch._VF.lstm and self.onednn and len(args) == 9 and torch.is_grad_enabled():
            self._add_workspace(*args, out[0])
        return out

    @staticmethod
    def _add_workspace(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                       out) -> None:
        if not (train and x.is_meta and x.dtype == torch.float32 and out.requires_grad):
            return
        steps, rows = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
        hidden, directions = hx[0].shape[-1], 2 if bidirectional else 1
        inputs = [x.shape[-1], *[directions * hidden] * (num_layers - 1)]  # what each layer reads
        size = directions * sum(onednn_lstm_workspace(steps, rows, n, hidden) for n in inputs)
        kept = [torch.empty(size, dtype=torch.uint8, device="meta")]
        # Freed once the backward pass reaches the LSTM's input (its output, if the input needs no gradient).
        if x.requires_grad:
            x.register_hook(lambda grad: kept.clear())
        else:
            out.grad_fn.register_hook(lambda *grads: kept.clear())


def onednn_lstm_workspace(steps: int, rows: int, input_size: int, hidden_size: int) -> int:
    """Bytes of the workspace oneDNN's LSTM keeps for the backward pass of one layer and direction, training
    on a CPU in float32: 15 floats per step, batch row and hidden unit, 10 per row and unit, and where the
    input is wider than the state, 6 per step (and one), row and extra input unit. Fitted to the workspace
    ``aten.mkldnn_rnn_layer`` returns with torch 2.13: within 6% for 100 to 1150 hidden units, 1 to 71 steps,
    1 to 32 rows and inputs up to 8x the hidden size (more for smaller layers, which oneDNN pads)."""
    return 4 * rows * (hidden_size * (15 * steps + 10) + 6 * (steps + 1) * max(0, input_size - hidden_size))


class Heap:
    """glibc's heap in outline: a block goes into the smallest free hole it fits, else on top, which grows; a
    freed block merges with the free holes beside it; the top gives memory back only when more than
    :data:`TRIM_THRESHOLD` lies free at its end. ``top`` is what the heap holds: holes keep their pages, so
    blocks a training step freed stay with the process, and a later block bigger than every hole lands above
    them."""

    def __init__(self) -> None:
        self.top = 0
        self._holes: list[tuple[int, int]] = []  # (size, start), sorted: the best fit is a bisection away
        self._by_start: dict[int, int] = {}  # start -> size of each hole
        self._by_end: dict[int, int] = {}  # end -> start of each hole

    def alloc(self, size: int) -> int:
        """The start of a new block of ``size`` bytes."""
        i = bisect.bisect_left(self._holes, (size, -1))
        if i == len(self._holes):
            start, self.top = self.top, self.top + size
            return start
        hole, start = self._holes[i]
        self._remove(start, hole)
        if hole > size:
            self._add(start + size, hole - size)
        return start

    def free(self, start: int, size: int) -> None:
        after = self._by_start.get(start + size)
        if after is not None:
            self._remove(start + size, after)
            size += after
        before = self._by_end.get(start)
        if before is not None:
            self._remove(before, start - before)
            size, start = size + start - before, before
        if start + size == self.top and size > TRIM_THRESHOLD:
            self.top = start
        else:
            self._add(start, size)

    def _add(self, start: int, size: int) -> None:
        bisect.insort(self._holes, (size, start))
        self._by_start[start], self._by_end[start + size] = size, start

    def _remove(self, start: int, size: int) -> None:
        self._holes.pop(bisect.bisect_left(self._holes, (size, start)))
        del self._by_start[start], self._by_end[start + size]


class LiveBytes(TorchDispatchMode):
    """A dispatch mode that runs operations on ``meta`` wherever a meta tensor is involved, for real otherwise
    (module docstring), and follows the storages it saw made or was given (:meth:`hold`) until they are freed:
    ``live``, their bytes, and ``held``, what the process holds for them, with its most since
    :meth:`reset_peak` in ``peak``.

    With ``heap`` (a CPU) ``held`` is what glibc's allocator holds: blocks under :data:`HEAP_BLOCK` are placed
    in a :class:`Heap`, the larger ones mapped and unmapped by themselves. Without (a GPU) it is ``live``."""

    def __init__(self, heap: bool = True) -> None:
        super().__init__()
        self._live = self.peak = self._mapped = 0
        self.heap = Heap() if heap else None
        self._blocks: dict[int, tuple[int, int | None]] = {}  # storage -> (bytes, start in the heap)
        self._freed: deque[int] = deque()  # the storages gone since the last _release, in order
        self._layouts: dict = {}

    @property
    def live(self) -> int:
        self._release()
        return self._live

    @property
    def held(self) -> int:
        self._release()
        return self._mapped + (self.heap.top if self.heap is not None else 0)

    def reset_peak(self) -> None:
        self.peak = self.held

    def hold(self, tensor: torch.Tensor) -> None:
        """Follow ``tensor``'s storage (once, however many tensors view it) until it is freed."""
        self._release()
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in self._blocks or storage.nbytes() == 0:  # an empty tensor allocates nothing
            return
        size, start = storage.nbytes(), None
        if self.heap is not None and size < HEAP_BLOCK:
            start = self.heap.alloc(_aligned(size))
        else:
            self._mapped += size
        self._blocks[key] = (size, start)
        self._live += size
        self.peak = max(self.peak, self.held)
        # The finalizer only notes the storage gone: the garbage collector may run it in the middle of a heap
        # update (any allocation can start a collection), and the heap's holes must not change under it.
        weakref.finalize(storage, self._freed.append, key)

    def _release(self) -> None:
        """Give back the blocks of the storages freed since the last call (before any new block is placed, so
        the heap sees the frees and allocations in their order)."""
        while self._freed:
            size, start = self._blocks.pop(self._freed.popleft(), (0, None))
            self._live -= size
            if start is None:
                self._mapped -= size
            else:
                self.heap.free(start, _aligned(size))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        to_meta = str(kwargs.get("device", "")) == "meta"
        if func is aten._to_copy.default and kwargs.get("device") is not None and to_meta != args[0].is_meta:
            if not args[0].is_meta:
                # .to(weights.device) of a tensor without weights in its history: it stays real (on a real
                # device it would not move either); only a change of dtype makes a new tensor.
                out = func(*args, **{**kwargs, "device": args[0].device})
                if out.dtype != args[0].dtype:
                    self.hold(out)
                return out
            # .cpu() of what the device computed (scores read back): host memory, or no copy on a CPU.
            return func(*args, **{**kwargs, "device": torch.device("meta")})
        copies: set[int] = set()

        def meta(x):
            if isinstance(x, torch.Tensor) and not x.is_meta:
                x = x.to("meta")
                copies.add(x.untyped_storage()._cdata)
            return x

        if any(t.is_meta for t in tensors) and not all(t.is_meta for t in tensors):
            if func in _INDEX_OPS:
                args = (args[0], _positions(args[1]), *args[2:])
            args, kwargs = tree_map(meta, (args, kwargs))
        elif not any(t.is_meta for t in tensors) and _too_big(func, args, kwargs, tensors):
            # Ids in numbers that grow with a size setting (the context windows of a huge context_size): made
            # on meta, where they only feed gathers; an operation that needs their values fails, and says so.
            kwargs = kwargs if tensors else {**kwargs, "device": torch.device("meta")}
            args, kwargs = tree_map(meta, (args, kwargs))
        elif func is aten._local_scalar_dense.default and args[0].is_meta:
            raise RuntimeError("the training step reads a value computed from the weights (.item() of a meta "
                               "tensor): its memory cannot be estimated before the weights exist")
        on_meta = all(x.is_meta for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor))
        out = self._run(func, args, kwargs) if tensors and on_meta else func(*args, **kwargs)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage()._cdata not in copies:
                self.hold(t)  # a new tensor, or a view or in-place result of one already followed
        return out

    def _run(self, func, args, kwargs):
        """``func(*args, **kwargs)`` on meta tensors. A functional operation's outputs are made from the
        layout it gave the last time it saw inputs of these shapes: the meta kernels are Python, and a
        recurrent model runs the same operations at every step."""
        if any(r.alias_info is not None for r in func._schema.returns):
            return func(*args, **kwargs)
        try:
            key = (func, tree_map(_layout_key, (args, tuple(sorted(kwargs.items())))))
            layout = self._layouts.get(key)
        except TypeError:  # an argument that does not hash
            return func(*args, **kwargs)
        if layout is None or layout is _UNCACHED:
            out = func(*args, **kwargs)
            if layout is None:
                leaves, spec = tree_flatten(out)
                inputs = {x.untyped_storage()._cdata for x in tree_leaves((args, kwargs))
                          if isinstance(x, torch.Tensor)}
                # Outputs that view an input without saying so (unsafe_split) must stay views.
                fresh = all(isinstance(x, torch.Tensor) and x.untyped_storage()._cdata not in inputs
                            for x in leaves)
                shapes = [(x.shape, x.stride(), x.dtype) for x in leaves] if fresh else []
                self._layouts[key] = (shapes, spec) if fresh else _UNCACHED
            return out
        leaves, spec = layout
        return tree_unflatten([torch.empty_strided(shape, stride, dtype=dtype, device="meta")
                               for shape, stride, dtype in leaves], spec)


_UNCACHED = object()


def _too_big(func, args, kwargs, tensors) -> bool:
    """Whether an operation on real tensors (or a factory) would make more than :data:`MAX_REAL_ELEMENTS`
    elements: asked of its meta run, for factories and operations on a tensor that large (a view)."""
    if tensors and max(t.numel() for t in tensors) <= MAX_REAL_ELEMENTS:
        return False
    on_meta = tree_map(lambda x: x.to("meta") if isinstance(x, torch.Tensor) else x, (args, kwargs))
    try:
        out = func(*on_meta[0], **(on_meta[1] if tensors else {**on_meta[1], "device": torch.device("meta")}))
    except Exception:  # noqa: BLE001 - not a factory that takes a device, or no meta kernel: run it for real
        return False
    return any(t.numel() > MAX_REAL_ELEMENTS for t in tree_leaves(out) if isinstance(t, torch.Tensor))


def _aligned(size: int) -> int:
    return -(-size // 64) * 64  # PyTorch's CPU allocator aligns blocks to 64 bytes


def _positions(indices):
    """``indices`` of an indexing op with each real boolean mask replaced by the positions it selects."""
    out = []
    for index in indices:
        if isinstance(index, torch.Tensor) and not index.is_meta and index.dtype in (torch.bool, torch.uint8):
            out.extend(index.bool().nonzero().unbind(1))
        else:
            out.append(index)
    return out


def _layout_key(x):
    if isinstance(x, torch.Tensor):
        return (tuple(x.shape), x.stride(), x.dtype, x.device.type)
    return tuple(x) if isinstance(x, list) else x


# ----------------------------------------------------------------------------- the estimate


@dataclass(frozen=True)
class TrainingMemoryEstimate:
    """What training a model takes, in bytes (:func:`estimate_training_memory`).

    ``weight_bytes`` are the parameters and buffers, ``gradient_bytes`` one gradient per trained parameter,
    ``optimizer_bytes`` the optimizer's state (Adam's two moments, SGD's momentum), ``averaging_bytes`` the
    averaged weights of NT-ASGD or fine-tuning. ``activation_bytes`` is the rest of a training step's peak:
    the batch, the activations kept for the backward pass, the temporaries of the loss and of the update.
    ``evaluation_bytes`` is what a validation batch holds besides the weights and the optimizer's state (what
    the training step left in the allocator's heap included). ``total_bytes`` is the larger of the two
    peaks."""

    parameters: int
    weight_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    averaging_bytes: int
    activation_bytes: int
    evaluation_bytes: int
    #: The training batch, in words (``"32 x 128 tokens"``), and the optimizer (``"Adam"``).
    batch: str
    optimizer: str

    @property
    def state_bytes(self) -> int:
        """Weights, gradients, optimizer state and averaged weights: what does not grow with the batch."""
        return self.weight_bytes + self.gradient_bytes + self.optimizer_bytes + self.averaging_bytes

    @property
    def training_bytes(self) -> int:
        """The peak of a training step."""
        return self.state_bytes + self.activation_bytes

    @property
    def total_bytes(self) -> int:
        validation = self.weight_bytes + self.optimizer_bytes + self.averaging_bytes + self.evaluation_bytes
        return max(self.training_bytes, validation)

    def describe(self) -> str:
        """One sentence for messages: the total, and what it is made of."""
        total, state = size_text(self.total_bytes), size_text(self.state_bytes)
        step, validation = size_text(self.activation_bytes), size_text(self.evaluation_bytes)
        return (f"about {total} ({state} for the weights, gradients and {self.optimizer} state of "
                f"{self.parameters:,} parameters, {step} for a training step on a batch of {self.batch}, "
                f"{validation} for a validation batch)")

    __str__ = describe


def size_text(n: int) -> str:
    """``n`` bytes for a reader: GB from 1 GB on, else MB."""
    return f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.0f} MB"


def estimate_training_memory(
    model_class,
    config,
    *,
    tree=None,
    batch_size: int,
    block_size: int,
    optimizer: str = "adam",
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    max_grad_norm: float | None = None,
    eval_batch_size: int | None = None,
    max_source_length: int | None = None,
    max_target_length: int | None = None,
    averaging: bool = False,
    device: str | torch.device = "cpu",
) -> TrainingMemoryEstimate:
    """The memory that training ``model_class(config, tree=tree)`` takes on ``device`` with these settings,
    estimated without allocating the weights (module docstring).

    The settings are the :class:`~hf_nlm.training.TrainingConfig` fields of the same names;
    ``eval_batch_size`` None counts no validation batch, ``averaging`` counts the averaged weights of NT-ASGD
    (``nt_asgd``) or ``fine_tune``. ``block_size`` applies to causal models, ``max_source_length`` /
    ``max_target_length`` to encoder-decoder ones (:data:`PAIR_LENGTHS` where None)."""
    training = TrainingConfig(
        output_dir="-", batch_size=batch_size, block_size=block_size, optimizer=optimizer, momentum=momentum,
        weight_decay=weight_decay, max_grad_norm=max_grad_norm, eval_batch_size=eval_batch_size or 1,
        max_source_length=max_source_length, max_target_length=max_target_length, nt_asgd=averaging,
    )
    return _estimate(model_class, config, tree, training, device, validation=eval_batch_size is not None)


def _estimate(model_class, config, tree, training: TrainingConfig, device="cpu",
              validation: bool = True) -> TrainingMemoryEstimate:
    from ..data.batching import is_encoder_decoder, is_stateful, lm_context_size
    from ..evaluation.scoring import NO_LOGITS, seq2seq_log_probs
    from .optim import build_optimizer

    cpu = torch.device(device).type == "cpu"
    model = meta_model(model_class, config, tree)
    for module in model.modules():
        if cpu and "cpu" in getattr(module, "blocked_devices", ()):
            module.blocked_devices = (*module.blocked_devices, "meta")  # a tree head's CPU path, in blocks
    if is_encoder_decoder(model):
        lengths = (training.max_source_length or PAIR_LENGTHS[0],
                   training.max_target_length or PAIR_LENGTHS[1])
        batch = f"{training.batch_size} pairs of {lengths[0]} -> {lengths[1]} tokens"
    else:
        lengths = (training.block_size + (0 if is_stateful(model) else lm_context_size(model)),)
        batch = f"{training.batch_size} x {training.block_size} tokens"
    numerals = numeral_table(model.config)
    tracker = LiveBytes(heap=cpu)
    for tensor in [*model.parameters(), *model.buffers()]:
        tracker.hold(tensor)
    weight_bytes = tracker.live
    optimizer = build_optimizer(model, training)

    def train_step(batch) -> None:
        model.train()
        loss = model(**batch).loss
        loss.backward()
        if training.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), training.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def validation_step(batch) -> None:
        model.eval()
        with torch.no_grad():
            if is_encoder_decoder(model):
                seq2seq_log_probs(model, batch)
            else:
                model(**batch, logits_to_keep=NO_LOGITS)

    def run(batch_size: int, steps) -> tuple[int, float]:
        """The most the process holds over ``steps`` on a batch of ``batch_size`` rows beyond what it held
        before, run at :data:`MAX_ESTIMATED_TARGETS` targets at most, and the factor to scale the part that
        grows with the batch by."""
        rows = max(1, min(batch_size, MAX_ESTIMATED_TARGETS // lengths[-1]))
        batch = synthetic_batch(model, rows, lengths, numerals)
        with OnDevice(cpu), tracker:
            before = tracker.live
            for tensor in batch.values():
                tracker.hold(tensor)
            tracker.reset_peak()
            for step in steps:
                step(batch)
        return tracker.peak - before, batch_size / rows

    # The first step makes the optimizer's state (where it lands in the heap matters), the second runs with
    # it.
    peak, scale = run(training.batch_size, [train_step, train_step])
    optimizer_bytes = sum(_nbytes(t) for values in optimizer.state.values() for t in values.values()
                          if isinstance(t, torch.Tensor))
    gradient_bytes = sum(_nbytes(p) for p in model.parameters() if p.requires_grad)
    activation_bytes = round(max(0, peak - gradient_bytes - optimizer_bytes) * scale)
    evaluation_bytes = 0
    if validation:
        peak, scale = run(training.eval_batch_size, [validation_step])
        evaluation_bytes = round(max(0, peak) * scale)
    return TrainingMemoryEstimate(
        parameters=sum(p.numel() for p in model.parameters()),
        weight_bytes=weight_bytes,
        gradient_bytes=gradient_bytes,
        optimizer_bytes=optimizer_bytes,
        averaging_bytes=gradient_bytes if (training.nt_asgd or training.fine_tune) else 0,
        activation_bytes=activation_bytes,
        evaluation_bytes=evaluation_bytes,
        batch=batch,
        optimizer={"sgd": "SGD momentum" if training.momentum else "SGD", "adam": "Adam", "adamw": "AdamW"}[
            training.optimizer],
    )


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def meta_model(model_class, config, tree=None):
    """``model_class(config, tree=tree)`` with its parameters on the ``meta`` device (no memory) and its
    buffers (tree paths, numeral tables: what the training step reads values from) real, on the CPU.
    ``config`` is copied, not changed."""
    from ..heads import OutputHead

    with torch.device("meta"):
        model = model_class(copy.deepcopy(config), tree=tree)
    for module in model.modules():
        for name, buffer in module._buffers.items():
            if buffer is not None and buffer.is_meta:
                module._buffers[name] = torch.zeros_like(buffer, device="cpu")
    for module in model.modules():
        if isinstance(module, OutputHead):
            # Writes its buffers again, from what it was built from.
            module.init_weights(model.config.initializer_range)
    return model


def synthetic_batch(model, rows: int, lengths: tuple[int, ...], numerals: dict | None = None,
                    seed: int = 0) -> dict[str, torch.Tensor]:
    """A training batch of ``rows`` rows for ``model``, in the layout its batching gives: ``lengths`` is
    ``(width,)`` (a block with its context, or a chunk) or ``(source, target)``. Token ids follow Zipf's law
    over the ids, which the tokenizers rank by frequency; ``numerals`` (:func:`numeral_table`) gives the
    numeral fields of the ids."""
    from ..data.batching import is_encoder_decoder, is_stateful, lm_context_size

    generator = torch.Generator().manual_seed(seed)
    zipf = 1.0 / torch.arange(1, model.config.vocab_size + 1, dtype=torch.float64)

    def ids(length: int) -> torch.Tensor:
        drawn = torch.multinomial(zipf, rows * length, replacement=True, generator=generator)
        return drawn.view(rows, length)

    if is_encoder_decoder(model):
        source, target = lengths
        return {"input_ids": ids(source), "attention_mask": torch.ones(rows, source, dtype=torch.long),
                "labels": ids(target), "decoder_attention_mask": torch.ones(rows, target, dtype=torch.long)}
    (width,) = lengths
    batch = {"input_ids": ids(width)}
    if is_stateful(model):
        batch["shift_labels"] = targets = ids(width)
    else:
        batch["labels"] = targets = batch["input_ids"].clone()
        batch["labels"][:, : lm_context_size(model)] = -100
    if numerals is not None:  # the fields follow the labels: target-aligned with shift_labels, else positions
        batch.update({name: values[targets] for name, values in numerals.items()})
    return batch


#: What stands for a numeral outside the vocabulary (``<unk_num>``, which keeps its text's fields) in a
#: synthetic batch: longer than most.
UNSEEN_NUMERAL = "123456789.012"


def numeral_table(config) -> dict[str, torch.Tensor] | None:
    """The numeral fields (:data:`hf_nlm.tokenization.numerals.NUMERAL_FEATURES`) of every id of a numeracy
    config's vocabulary, by id (a word's are the fill values); None for a config without numerals."""
    from ..tokenization.numerals import NUMERAL_FEATURES, UNK_NUM_TOKEN

    if not getattr(config, "numeral_vocab", None):
        return None
    fill = NUMERAL_FEATURES.fill
    table = {name: np.full((config.vocab_size, *values.shape[1:]), fill[name], dtype=values.dtype)
             for name, values in NUMERAL_FEATURES("0", [(0, 1)]).items()}
    for token, i in config.numeral_vocab.items():
        text = UNSEEN_NUMERAL if token == UNK_NUM_TOKEN else token
        for name, values in NUMERAL_FEATURES(text, [(0, len(text))]).items():
            table[name][i] = values[0]
    return {name: torch.as_tensor(values) for name, values in table.items()}


# ----------------------------------------------------------------------------- the check


def check_training_memory(model_class, config, training: TrainingConfig, *,
                          tree=None, loaded=None) -> TrainingMemoryEstimate | None:
    """Refuse (``ValueError``) settings whose training needs more memory than there is.

    The need is :func:`estimate_training_memory` with ``training``'s settings, on the device the run trains
    on; what there is, :func:`hf_nlm.memory.available_memory`: the GPU's free memory where training runs on
    one, else the system's available memory. ``loaded``: the model already in memory (a resumed run's, or
    ``init_from``'s): its weights on the device checked are held already, so they are added to what there is
    rather than counted twice. The message names the settings that would lower the need
    (:func:`settings_that_lower`), each with its ``hf-nlm train`` flag. Returns the estimate; None where the
    free memory cannot be read (nothing is checked then)."""
    gpu = torch.cuda.is_available() and not training.cpu
    free = available_memory(gpu=gpu)
    if free is None:
        return None
    available, where = free
    device = "cuda" if gpu else "cpu"
    if loaded is not None:
        held = sum(t.numel() * t.element_size() for t in [*loaded.parameters(), *loaded.buffers()]
                   if t.device.type == device)
        if held:
            available += held
            where = f"{where}, counting the {size_text(held)} the loaded weights hold"
    estimate = _estimate(model_class, config, tree, training, device)
    if estimate.total_bytes <= available:
        return estimate
    lower = settings_that_lower(model_class, config, training, estimate.total_bytes, tree=tree, device=device)
    model_type = getattr(config, "model_type", "") or type(config).__name__
    raise ValueError(
        f"training this {model_type} needs {estimate.describe()}, more than the {size_text(available)} of "
        f"{where}; lower {_either(lower) if lower else 'the sizes of the model'}"
    )


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


#: A setting is named as one that lowers the need when halving it lowers the estimate by this share at least.
LOWERS_BY = 0.1


def settings_that_lower(model_class, config, training: TrainingConfig, total: int, *, tree=None,
                        device="cpu") -> list[str]:
    """The settings that lower an estimate of ``total`` bytes by :data:`LOWERS_BY` at least when halved, the
    most effective first, each as ``"name (--flag)"``: the numeric fields of the model's config (a field's
    flag is its name with dashes, or the name its config's ``attribute_map`` gives it: the LBL's
    ``hidden_size`` is ``--embedding-size``), the batch's :class:`~hf_nlm.training.TrainingConfig` fields and
    the vocabulary's size (``--vocab-size``, the tokenizer's cap). Settings that are not numbers (a head, a
    numeral strategy) are never named: they are choices, not amounts."""
    trials = []
    for name in _batch_fields(config):
        unset = PAIR_LENGTHS[0] if name == "max_source_length" else PAIR_LENGTHS[1]
        value = getattr(training, name) or unset
        trials.append((name, name, config, tree, dataclasses.replace(training, **{name: max(2, value // 2)})))
    flag_of = {field: flag for flag, field in getattr(type(config), "attribute_map", {}).items()}
    for name in _size_fields(config):
        changed = copy.deepcopy(config)
        setattr(changed, name, getattr(config, name) // 2)
        trials.append((name, flag_of.get(name, name), changed, tree, training))
    smaller = _halved_vocabulary(config, tree)
    if smaller is not None:
        trials.append(("vocab_size", "vocab_size", *smaller, training))
    effects = []
    for name, flag, changed, changed_tree, settings in trials:
        try:
            need = _estimate(model_class, changed, changed_tree, settings, device).total_bytes
        except (ValueError, TypeError):  # halved, the settings make no model (a tied size, a cut-off)
            continue
        if need <= (1 - LOWERS_BY) * total:
            effects.append((need, f"{name} (--{flag.replace('_', '-')})"))
    return [named for _, named in sorted(effects)]


def _batch_fields(config) -> list[str]:
    if getattr(config, "is_encoder_decoder", False):
        return ["batch_size", "max_source_length", "max_target_length", "eval_batch_size"]
    return ["batch_size", "block_size", "eval_batch_size"]


#: Config fields the vocabulary or the tree decide: set from the tokenizer and the tree, not settings to
#: lower.
_DERIVED = ("vocab_size", "tree_num_nodes", "tree_max_codes", "tree_max_depth")


def _size_fields(config) -> list[str]:
    """The integer fields a model's config declares itself (not ``PreTrainedConfig``'s, nor token ids), at 2
    or more."""
    from transformers import PreTrainedConfig

    inherited = {f.name for f in dataclasses.fields(PreTrainedConfig)}
    return [f.name for f in dataclasses.fields(config)
            if f.name not in inherited and f.name not in _DERIVED and not f.name.endswith("_token_id")
            and str(f.type).startswith("int") and type(getattr(config, f.name)) is int
            and getattr(config, f.name) >= 2]


def _halved_vocabulary(config, tree):
    """``(config, tree)`` over the first half of the vocabulary (its most frequent words), with the numerals,
    cut-offs and tree that follow; None for a vocabulary too small to halve."""
    from ..trees import balanced_tree

    size = config.vocab_size // 2
    if size < 4:
        return None
    changed = copy.deepcopy(config)
    changed.vocab_size = size
    if getattr(changed, "numeral_vocab", None):
        changed.numeral_vocab = {token: i for token, i in changed.numeral_vocab.items() if i < size}
    if getattr(changed, "cutoffs", None):
        changed.cutoffs = sorted({c // 2 for c in changed.cutoffs if 0 < c // 2 < size})
    for name in _DERIVED[1:]:
        if getattr(changed, name, None) is not None:
            setattr(changed, name, None)
    return changed, (balanced_tree(size) if tree is not None else None)


__all__ = [
    "PAIR_LENGTHS",
    "Heap",
    "LiveBytes",
    "OnDevice",
    "TrainingMemoryEstimate",
    "check_training_memory",
    "estimate_training_memory",
    "meta_model",
    "numeral_table",
    "onednn_lstm_workspace",
    "settings_that_lower",
    "synthetic_batch",
]
