"""Training: a run's specification (:class:`RunSpec`), :func:`train` from it to a saved folder, and the
Accelerate-based loop underneath (:func:`train_lm`, :class:`LMTrainer`) for every LM of the package."""

from ..data.sampler import BlockBatchSampler
from . import tree_recipe
from .checkpoint import list_checkpoints, resolve_checkpoint, save_checkpoint
from .config import LR_SCHEDULERS, OPTIMIZERS, THREAD_TOLERANCE, TrainingConfig
from .optim import bengio_lr, build_lr_scheduler, build_optimizer, lr_factor, param_groups
from .run import SavedRun, TrainResult, load_run, train, train_data_tree
from .spec import DataSpec, RunSpec, TokenizerSpec
from .trainer import LMTrainer, TrainerState, train_lm
from .tree_recipe import *  # noqa: F403  (Mnih & Hinton's data-built tree recipe, tree_recipe.__all__)

__all__ = [
    *tree_recipe.__all__,
    "LR_SCHEDULERS",
    "OPTIMIZERS",
    "THREAD_TOLERANCE",
    "BlockBatchSampler",
    "DataSpec",
    "LMTrainer",
    "RunSpec",
    "SavedRun",
    "TokenizerSpec",
    "TrainResult",
    "TrainerState",
    "TrainingConfig",
    "bengio_lr",
    "build_lr_scheduler",
    "build_optimizer",
    "list_checkpoints",
    "load_run",
    "lr_factor",
    "param_groups",
    "resolve_checkpoint",
    "save_checkpoint",
    "train",
    "train_data_tree",
    "train_lm",
]
