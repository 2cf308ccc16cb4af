"""Training: one Accelerate-based loop (``train_lm``) for every causal LM of the package."""

from ..data.sampler import BlockBatchSampler
from .checkpoint import list_checkpoints, resolve_checkpoint, save_checkpoint
from .config import LR_SCHEDULERS, OPTIMIZERS, TrainingConfig
from .optim import bengio_lr, build_lr_scheduler, build_optimizer, lr_factor, param_groups
from .trainer import LMTrainer, TrainerState, train_lm
from .tree_recipe import (
    build_data_tree,
    config_for_tree,
    train_with_data_tree,
    tree_summary,
    word_vectors_from_model,
)

__all__ = [
    "build_data_tree",
    "config_for_tree",
    "train_with_data_tree",
    "tree_summary",
    "word_vectors_from_model",
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
