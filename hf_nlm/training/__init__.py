"""Training: one Accelerate-based loop (``train_lm``) for every causal LM of the package."""

from ..data.sampler import BlockBatchSampler
from . import tree_recipe
from .checkpoint import list_checkpoints, resolve_checkpoint, save_checkpoint
from .config import LR_SCHEDULERS, OPTIMIZERS, TrainingConfig
from .optim import bengio_lr, build_lr_scheduler, build_optimizer, lr_factor, param_groups
from .trainer import LMTrainer, TrainerState, train_lm
from .tree_recipe import *  # noqa: F403  (Mnih & Hinton's data-built tree recipe, tree_recipe.__all__)

__all__ = [
    *tree_recipe.__all__,
    "LR_SCHEDULERS",
    "OPTIMIZERS",
    "BlockBatchSampler",
    "LMTrainer",
    "TrainerState",
    "TrainingConfig",
    "bengio_lr",
    "build_lr_scheduler",
    "build_optimizer",
    "list_checkpoints",
    "lr_factor",
    "param_groups",
    "resolve_checkpoint",
    "save_checkpoint",
    "train_lm",
]
