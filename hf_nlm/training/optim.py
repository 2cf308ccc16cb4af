"""Optimisers with weight decay on weights only, the learning-rate schedules, and the weight averaging of
NT-ASGD.

Averaged SGD and its non-monotone trigger (NT-ASGD), Merity et al. 2018, sec. 3 (Algorithm 1): ASGD (Polyak
& Juditsky 1992) takes ordinary SGD steps but returns the average of the iterates from some step T on, w_avg
= 1 / (k - T + 1) * sum_{i=T..k} w_i. NT-ASGD picks T without a hyperparameter for it: at the end of each
epoch (the paper's logging interval L) it compares the validation loss with the best one of all epochs
except the last ``n`` (the non-monotone interval); once the new loss is worse, averaging starts. The
optimizer is not replaced: with lambda = 0 and t0 = 0 (the paper's setting) torch's ``ASGD`` takes exactly
plain SGD steps and only differs by keeping the average, which :class:`WeightAverager` keeps here, for any
optimizer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from .config import TrainingConfig


def bengio_lr(step: int, learning_rate: float, lr_decay: float) -> float:
    """eps_t = eps_0 / (1 + r t), the schedule of Bengio et al. (JMLR 2003, sec. 4).

    ``step`` is t, the number of parameter updates already done: the first update uses eps_0.
    """
    return learning_rate / (1.0 + lr_decay * step)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two optimiser groups: weight matrices and embeddings (ndim >= 2) decay, biases do not.

    Bengio et al. (2003) apply the weight-decay penalty "to the weights of the neural network and
    to the C matrix, not to the biases"; every other model here follows the same rule.
    Parameters that do not require gradients are left out.
    """
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def fused_sgd_applies(model: nn.Module) -> bool:
    """Whether torch's fused SGD kernel can update ``model``: every parameter on a CPU or a CUDA device in a
    floating dtype, and no module that gives sparse gradients (``nn.Embedding(sparse=True)``, a tree head
    with ``sparse=True``), which that kernel refuses."""
    params = [p for p in model.parameters() if p.requires_grad]
    return (
        bool(params)
        and all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
        and not any(getattr(m, "sparse", False) is True for m in model.modules())
    )


def build_optimizer(model: nn.Module, config: TrainingConfig) -> torch.optim.Optimizer:
    """SGD (optionally with momentum), Adam or AdamW over :func:`param_groups`.

    SGD takes torch's fused kernel where it applies (:func:`fused_sgd_applies`): one pass over each
    parameter for weight decay and update, where the per-tensor loop allocates the decayed gradient and
    reads each tensor three times (a few ms per step of an NPLM's 16k x 290 output matrix on a CPU).
    """
    groups = param_groups(model, config.weight_decay)
    if config.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=config.learning_rate, momentum=config.momentum,
                               fused=fused_sgd_applies(model) or None)
    betas = (config.adam_beta1, config.adam_beta2)
    if config.optimizer == "adam":
        return torch.optim.Adam(groups, lr=config.learning_rate, betas=betas, eps=config.adam_epsilon)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=config.learning_rate, betas=betas, eps=config.adam_epsilon)
    raise ValueError(f"unknown optimizer {config.optimizer!r}")


def lr_factor(step: int, config: TrainingConfig, total_steps: int | None) -> float:
    """The multiplier of the initial learning rate for the update that follows ``step`` updates."""
    if config.lr_scheduler == "constant":
        return 1.0
    if config.lr_scheduler == "bengio":
        return bengio_lr(step, 1.0, config.lr_decay)
    # linear / cosine: warm up linearly, then decay to 0 at total_steps.
    if total_steps is None:
        raise ValueError(f"lr_scheduler={config.lr_scheduler!r} needs a known number of steps")
    if step < config.warmup_steps:
        return (step + 1) / (config.warmup_steps + 1)
    progress = min(1.0, (step - config.warmup_steps) / max(1, total_steps - config.warmup_steps))
    if config.lr_scheduler == "linear":
        return 1.0 - progress
    if config.lr_scheduler == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown lr_scheduler {config.lr_scheduler!r}")


def build_lr_scheduler(
    optimizer: torch.optim.Optimizer, config: TrainingConfig, total_steps: int | None = None
) -> LambdaLR:
    """A ``LambdaLR`` stepped once per update, so after t updates the rate is eps_0 * lr_factor(t)."""
    return LambdaLR(optimizer, lambda step: lr_factor(step, config, total_steps))


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
