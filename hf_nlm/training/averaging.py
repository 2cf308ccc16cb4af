"""Averaged SGD and its non-monotone trigger (NT-ASGD), Merity et al. 2018, sec. 3 (Algorithm 1).

ASGD (Polyak & Juditsky 1992) takes ordinary SGD steps but returns the average of the iterates
from some step T on, w_avg = 1 / (k - T + 1) * sum_{i=T..k} w_i. NT-ASGD picks T without a
hyperparameter for it: at the end of each epoch (the paper's logging interval L) it compares the
validation loss with the best one of all epochs except the last ``n`` (the non-monotone interval);
once the new loss is worse, averaging starts.

The optimizer is not replaced: with lambda = 0 and t0 = 0 (the paper's setting) torch's ``ASGD``
takes exactly plain SGD steps and only differs by keeping the average, which
:class:`WeightAverager` keeps here, for any optimizer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn


def nt_asgd_triggered(val_losses: Sequence[float], nonmono: int) -> bool:
    """Algorithm 1's test, after appending the latest epoch's loss to ``val_losses``:
    ``t > n and v > min(v_0 .. v_{t-n-1})`` -- worse than the best of all but the last ``n`` epochs."""
    if len(val_losses) <= nonmono:
        return False
    return val_losses[-1] > min(val_losses[:-nonmono])


class WeightAverager:
    """Running mean of a model's parameters over the updates since averaging started.

    Call :meth:`update` after every optimizer step; :meth:`swapped_in` puts the averages into the
    model for a ``with`` block (validation, saving) and restores the trained weights afterwards.
    """

    def __init__(self, model: nn.Module) -> None:
        # named_parameters() lists a tied weight once, so it is averaged (and swapped) once.
        self.names, self.params = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad],
                                      strict=True)
        self.averages: list[torch.Tensor] | None = None
        self.count = 0

    def update(self) -> None:
        """Fold the current parameters into the mean: avg += (w - avg) / count."""
        with torch.no_grad():
            self.count += 1
            if self.averages is None:
                self.averages = [p.detach().clone() for p in self.params]
            else:
                torch._foreach_lerp_(self.averages, [p.detach() for p in self.params], 1.0 / self.count)

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """Within the block the model holds the averaged weights (a no-op before the first update)."""
        if self.averages is None:
            yield
            return
        with torch.no_grad():
            trained = [p.detach().clone() for p in self.params]
            for p, a in zip(self.params, self.averages, strict=True):
                p.copy_(a)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, w in zip(self.params, trained, strict=True):
                    p.copy_(w)

    def copy_to_model(self) -> None:
        """Put the averaged weights into the model for good (the result of training)."""
        if self.averages is not None:
            with torch.no_grad():
                for p, a in zip(self.params, self.averages, strict=True):
                    p.copy_(a)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The averages by parameter name (for a safetensors checkpoint); empty before the first update."""
        if self.averages is None:
            return {}
        return {f"average.{n}": a.detach().contiguous().cpu()
                for n, a in zip(self.names, self.averages, strict=True)}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], count: int) -> None:
        if count == 0:
            self.averages, self.count = None, 0
            return
        missing = [n for n in self.names if f"average.{n}" not in tensors]
        if missing:
            raise ValueError(f"the checkpoint's averaged weights lack {missing[:5]}")
        self.averages = [tensors[f"average.{n}"].to(p.device, p.dtype)
                         for n, p in zip(self.names, self.params, strict=True)]
        self.count = count
