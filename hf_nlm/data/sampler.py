"""Deterministic, resumable, distributed training batches: shuffled blocks or stateful stream columns.

One epoch's order is ``randperm(num_blocks)`` drawn from a generator seeded with ``seed + epoch``,
so any process can rebuild any epoch's order from two integers: resuming needs no RNG replay, and
skipping the batches already done is an index offset.

How the global batch is split. With P processes and ``batch_size`` b per process, the global batch
of step k is the slice ``order[k*P*b : (k+1)*P*b]``, and process p takes its p-th contiguous chunk
(``torch.tensor_split`` into P parts). So P processes with batch b see exactly the blocks, in the
same order, that one process with batch P*b sees. The last, short global batch is kept when it
can give every process at least one block (otherwise dropped); its chunks then differ in size by
at most one block. The training loop weights each process's mean loss by its share of the global
batch's targets, so the averaged gradient is that of the mean over the whole global batch, exactly
as in one process.

Both kinds of training batches (:class:`BlockBatches`, :class:`StreamBatches`) offer the same
interface to the training loop: ``epoch(e, start)`` yields the batches, ``state_inputs`` /
``state_after`` thread a recurrent state from one batch to the next (nothing for blocks), and
``state_tensors`` / ``restore_state`` save and reload that state with a checkpoint. The loop never
asks which kind it has.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping

import torch

from ..cache_utils import RecurrentCache
from .lm import IGNORE_INDEX, as_stream, collate_blocks
from .stream import bptt_chunks, stream_columns

#: A collective that concatenates every process's tensor along dim 0, in process order
#: (``Accelerator.gather``); None where collectives cannot be used (an error path).
Gather = Callable[[torch.Tensor], torch.Tensor] | None


class BlockBatchSampler:
    """Batch sampler (for ``DataLoader(batch_sampler=...)``) over ``num_blocks`` blocks for one process."""

    def __init__(
        self,
        num_blocks: int,
        batch_size: int,
        num_processes: int = 1,
        process_index: int = 0,
        seed: int = 0,
        shuffle: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0 <= process_index < num_processes:
            raise ValueError(f"process_index {process_index} not in [0, {num_processes})")
        self.num_blocks = num_blocks
        self.batch_size = batch_size
        self.num_processes = num_processes
        self.process_index = process_index
        self.seed = seed
        self.shuffle = shuffle
        self.epoch = 0
        self.start_step = 0
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"the training split has {num_blocks} blocks, fewer than one global batch "
                f"(batch_size {batch_size} x {num_processes} processes) can be split from; "
                "lower batch_size or block_size, or give more training text"
            )

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.num_processes

    @property
    def steps_per_epoch(self) -> int:
        full, rest = divmod(self.num_blocks, self.global_batch_size)
        return full + (1 if rest >= self.num_processes else 0)

    def set_epoch(self, epoch: int, start_step: int = 0) -> None:
        """Select the epoch's order and skip its first ``start_step`` batches (already trained on)."""
        self.epoch = epoch
        self.start_step = start_step

    def order(self, epoch: int) -> torch.Tensor:
        """The epoch's block order: the same on every process."""
        if not self.shuffle:
            return torch.arange(self.num_blocks)
        generator = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(self.num_blocks, generator=generator)

    def global_batches(self, epoch: int) -> list[torch.Tensor]:
        """The block indices of every global batch of ``epoch``."""
        order = self.order(epoch)
        g = self.global_batch_size
        return [order[k * g : (k + 1) * g] for k in range(self.steps_per_epoch)]

    def local_batch(self, global_batch: torch.Tensor) -> torch.Tensor:
        """This process's contiguous chunk of a global batch."""
        return torch.tensor_split(global_batch, self.num_processes)[self.process_index]

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.global_batches(self.epoch)[self.start_step :]:
            yield self.local_batch(batch).tolist()

    def __len__(self) -> int:
        return self.steps_per_epoch - self.start_step


class BlockBatches:
    """The training batches of feed-forward models: shuffled blocks (``hf_nlm.data.lm``).

    ``epoch(e, start)`` yields ``(batch, global_targets, lr_scale)`` for the batches of epoch ``e`` from
    ``start`` on: this process's share of the global batch (``{"input_ids", "labels", **extra
    fields}``), the number of targets in the whole global batch, and 1.0 (every update uses the
    scheduled learning rate). Blocks are independent: no state flows from one batch to the next.
    """

    stats: dict[str, int] = {}  # nothing to add to the split's counts: every target is trained on

    def __init__(self, data, batch_size: int, num_processes: int = 1, process_index: int = 0, seed: int = 0,
                 pin_memory: bool = False) -> None:
        self.sampler = BlockBatchSampler(len(data), batch_size, num_processes, process_index, seed=seed)
        self.data, self.pin_memory = data, pin_memory
        # Targets per block, summed per global batch on the CPU so each process knows its share of the
        # batch's targets without communicating.
        self.targets_per_block = (data.blocks["labels"][:, 1:] != IGNORE_INDEX).sum(1)

    @property
    def global_batch_size(self) -> int:
        return self.sampler.global_batch_size

    def steps(self, epoch: int) -> int:
        return self.sampler.steps_per_epoch

    def collate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        """The batch of the examples at ``indices``."""
        return collate_blocks([self.data[i] for i in indices])

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[dict, int, float]]:
        self.sampler.set_epoch(epoch, start)
        global_targets = [int(self.targets_per_block[b].sum()) for b in self.sampler.global_batches(epoch)]
        # A plain loop, not a DataLoader: a DataLoader draws a seed from the global RNG each time it starts
        # an epoch, which a resumed run (starting mid-epoch) would draw at another point of the dropout
        # masks' random stream than the uninterrupted run.
        for step, indices in enumerate(self.sampler, start=start):
            batch = self.collate(indices)
            if self.pin_memory:
                batch = {k: v.pin_memory() for k, v in batch.items()}
            yield batch, global_targets[step], 1.0

    def state_inputs(self, state) -> dict:
        """Extra model inputs that carry the previous batch's state: none, blocks are independent."""
        return {}

    def state_after(self, output) -> None:
        """The state to carry into the next batch: none."""
        return None

    def state_tensors(self, state, gather: Gather) -> dict[str, torch.Tensor]:
        """Nothing to save in a checkpoint beyond the weights."""
        return {}

    def restore_state(self, tensors: Mapping[str, torch.Tensor], device,
                      source: str = "the checkpoint") -> None:
        return None


class StreamBatches:
    """The training batches of recurrent models: stateful truncated BPTT over columns
    (``hf_nlm.data.stream``).

    The training stream is cut into ``batch_size x num_processes`` columns; process p reads columns
    ``[p * batch_size, (p + 1) * batch_size)``, so P processes see exactly what one process with the
    global batch sees. The columns' order is fixed (the state flows along them); what changes from
    epoch to epoch is the chunk lengths under variable BPTT, drawn from ``seed + epoch``. The stream
    is cut to a multiple of the number of columns: at most ``columns - 1`` tokens at the end of the
    training split are not trained on (``num_dropped``), so that no process ever gets a chunk without
    targets. ``ids`` may be a token stream dict: its extra fields travel in the chunks, target-aligned.

    ``epoch(e, start)`` yields ``(batch, global_targets, lr_scale)`` with ``lr_scale = length / bptt``
    under variable BPTT (Merity et al. 2018, sec. 4.1), else 1.0. The state the model returns for a
    batch (``cache``, a ``cache_class``) is fed, cut from the graph, into the next one.
    """

    cache_class = RecurrentCache  # how a checkpoint's state tensors become a model state again

    def __init__(self, ids, bos_token_id: int, batch_size: int, bptt: int,
                 num_processes: int = 1, process_index: int = 0, variable: bool = False, seed: int = 0,
                 fill: Mapping[str, float | int] | None = None) -> None:
        stream = as_stream(ids)
        num_tokens = stream["input_ids"].numel()
        columns = batch_size * num_processes
        usable = (num_tokens // columns) * columns
        if usable < columns * 2:
            raise ValueError(
                f"the training split has {num_tokens} tokens, too few for {columns} columns of at least 2 "
                "(batch_size x processes); lower batch_size or give more training text"
            )
        self.num_dropped = int(num_tokens - usable)
        self.columns = stream_columns({k: v[:usable] for k, v in stream.items()}, columns, bos_token_id,
                                      fill=fill)
        self.local = slice(process_index * batch_size, (process_index + 1) * batch_size)
        self.batch_size, self.num_processes = batch_size, num_processes
        self.bptt, self.variable, self.seed = bptt, variable, seed
        self._chunks: dict[int, list[tuple[int, int]]] = {}

    @property
    def stats(self) -> dict[str, int]:
        """What the run reports beside the split's counts: the tokens cut off the end of the stream."""
        return {"num_not_trained_on": self.num_dropped}

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.num_processes

    def chunks(self, epoch: int) -> list[tuple[int, int]]:
        if epoch not in self._chunks:
            self._chunks = {epoch: bptt_chunks(self.columns.length, self.bptt, self.variable,
                                               self.seed + epoch)}
        return self._chunks[epoch]

    def steps(self, epoch: int) -> int:
        return len(self.chunks(epoch))

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[dict, int, float]]:
        for begin, length in self.chunks(epoch)[start:]:
            scale = length / self.bptt if self.variable else 1.0
            yield self.columns.chunk(begin, length, self.local), length * self.global_batch_size, scale

    def state_inputs(self, state) -> dict:
        """Extra model inputs that start a batch from the state the previous batch left (None: empty)."""
        return {"cache": state, "use_cache": True}

    def state_after(self, output):
        """The state to carry into the next batch, cut from the graph (truncated BPTT)."""
        return output.cache.detach()

    def state_tensors(self, state, gather: Gather) -> dict[str, torch.Tensor]:
        """The carried state of every process's columns as ``state.*`` tensors (gathered in column
        order). Without collectives (``gather`` None) only a single process can save its state."""
        if state is None or (self.num_processes > 1 and gather is None):
            return {}
        tensors = {}
        for name, value in state.state_tensors().items():
            value = gather(value.contiguous()) if self.num_processes > 1 else value
            tensors[f"state.{name}"] = value.detach().cpu().contiguous()
        return tensors

    def restore_state(self, tensors: Mapping[str, torch.Tensor], device, source: str = "the checkpoint"):
        """This process's columns of the state saved by :meth:`state_tensors`, on ``device``."""
        saved = {k.removeprefix("state."): v for k, v in tensors.items() if k.startswith("state.")}
        state = self.cache_class.from_state_tensors(saved, self.local, device)
        if state is None:
            warnings.warn(
                f"{source} holds no recurrent state (it was saved after an error in a multi-process run): "
                "the rest of the epoch starts from a fresh state, so the resumed run is not exactly the "
                "interrupted one",
                stacklevel=3,
            )
        return state
