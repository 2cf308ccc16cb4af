"""The memory a training run needs, checked before the model is allocated (interim: weights and optimizer state)."""

from __future__ import annotations

from ..memory import available_memory

#: Copies of the weights training holds, by optimizer: weights and gradients, plus Adam's two moments.
OPTIMIZER_COPIES = {"sgd": 2, "adam": 4, "adamw": 4}


def check_training_memory(lm_class, config, tree=None, training=None) -> None:
    """Refuse a model whose weights, gradients and optimizer state do not fit the memory available."""
    import torch

    free = available_memory(gpu=torch.cuda.is_available() and not getattr(training, "cpu", False))
    if free is None:
        return
    with torch.device("meta"):
        model = lm_class(config, tree=tree)
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = getattr(training, "optimizer", "sgd")
    weights = parameters * 4 * (OPTIMIZER_COPIES.get(optimizer, 4) + bool(getattr(training, "momentum", 0)))
    available, where = free
    if weights > available:
        raise ValueError(f"these settings make a {config.model_type} of {parameters:,} parameters: training it with "
                         f"{optimizer} needs about {weights / 1e9:,.1f} GB, more than the {available / 1e9:,.1f} GB "
                         f"of {where}; lower the model sizes")
