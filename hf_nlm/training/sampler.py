"""Deterministic, resumable, distributed batching of LM blocks.

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
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader

from ..data.lm import IGNORE_INDEX, collate_blocks
from ..data.stream import bptt_chunks, stream_columns


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
    ``start`` on: this process's share of the global batch, the number of targets in the whole
    global batch, and 1.0 (every update uses the scheduled learning rate).
    """

    def __init__(self, data, batch_size: int, num_processes: int = 1, process_index: int = 0, seed: int = 0,
                 pin_memory: bool = False) -> None:
        self.sampler = BlockBatchSampler(len(data), batch_size, num_processes, process_index, seed=seed)
        self.loader = DataLoader(data, batch_sampler=self.sampler, collate_fn=collate_blocks, pin_memory=pin_memory)
        # Targets per block, summed per global batch on the CPU so each process knows its share of the
        # batch's targets without communicating.
        self.targets_per_block = (data.blocks["labels"][:, 1:] != IGNORE_INDEX).sum(1)

    @property
    def global_batch_size(self) -> int:
        return self.sampler.global_batch_size

    def steps(self, epoch: int) -> int:
        return self.sampler.steps_per_epoch

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[dict, int, float]]:
        self.sampler.set_epoch(epoch, start)
        global_targets = [int(self.targets_per_block[b].sum()) for b in self.sampler.global_batches(epoch)]
        for step, batch in enumerate(self.loader, start=start):
            yield batch, global_targets[step], 1.0


class StreamBatches:
    """The training batches of recurrent models: stateful truncated BPTT over columns (``hf_nlm.data.stream``).

    The training stream is cut into ``batch_size x num_processes`` columns; process p reads columns
    ``[p * batch_size, (p + 1) * batch_size)``, so P processes see exactly what one process with the
    global batch sees. The columns' order is fixed (the state flows along them); what changes from
    epoch to epoch is the chunk lengths under variable BPTT, drawn from ``seed + epoch``. The stream
    is cut to a multiple of the number of columns: at most ``columns - 1`` tokens at the end of the
    training split are not trained on (``num_dropped``), so that no process ever gets a chunk without
    targets.

    ``epoch(e, start)`` yields ``(batch, global_targets, lr_scale)`` with ``lr_scale = length / bptt``
    under variable BPTT (Merity et al. 2018, sec. 4.1), else 1.0.
    """

    def __init__(self, ids: torch.LongTensor, bos_token_id: int, batch_size: int, bptt: int,
                 num_processes: int = 1, process_index: int = 0, variable: bool = False, seed: int = 0) -> None:
        columns = batch_size * num_processes
        usable = (ids.numel() // columns) * columns
        if usable < columns * 2:
            raise ValueError(
                f"the training split has {ids.numel()} tokens, too few for {columns} columns of at least 2 "
                "(batch_size x processes); lower batch_size or give more training text"
            )
        self.num_dropped = int(ids.numel() - usable)
        self.columns = stream_columns(ids[:usable], columns, bos_token_id)
        self.local = slice(process_index * batch_size, (process_index + 1) * batch_size)
        self.batch_size, self.num_processes = batch_size, num_processes
        self.bptt, self.variable, self.seed = bptt, variable, seed
        self._chunks: dict[int, list[tuple[int, int]]] = {}

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.num_processes

    def chunks(self, epoch: int) -> list[tuple[int, int]]:
        if epoch not in self._chunks:
            self._chunks = {epoch: bptt_chunks(self.columns.length, self.bptt, self.variable, self.seed + epoch)}
        return self._chunks[epoch]

    def steps(self, epoch: int) -> int:
        return len(self.chunks(epoch))

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[dict, int, float]]:
        for begin, length in self.chunks(epoch)[start:]:
            scale = length / self.bptt if self.variable else 1.0
            yield self.columns.chunk(begin, length, self.local), length * self.global_batch_size, scale
