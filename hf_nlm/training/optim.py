"""Optimisers with weight decay on weights only, and the learning-rate schedules."""

from __future__ import annotations

import math

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
