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
