"""One folder per architecture, transformers-style (``configuration_x.py`` + ``modeling_x.py``), each declaring
its :class:`ModelType` as ``MODEL_TYPE`` in its ``__init__.py``. :data:`MODEL_TYPES` collects them from the
folders: ``import hf_nlm`` registers each with the Auto classes (:func:`register_auto_classes`) and the
``hf-nlm`` command builds its ``--model`` choices and model flags from it, so a new architecture is a folder
and nothing else."""

from __future__ import annotations

import importlib
import pkgutil

from .registry import ModelType
from .registry import register_auto_classes as _register


def _architectures() -> dict[str, ModelType]:
    """``MODEL_TYPE`` of every subpackage (an architecture folder), by model type, in folder order."""
    found: dict[str, ModelType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.ispkg:
            model_type = importlib.import_module(f"{__name__}.{info.name}").MODEL_TYPE
            found[model_type.name] = model_type
    return found


MODEL_TYPES: dict[str, ModelType] = _architectures()

# The config, body and LM classes of every architecture, importable from here and from hf_nlm.
globals().update({c.__name__: c for t in MODEL_TYPES.values() for c in t.classes})


def register_auto_classes() -> None:
    """Register every model type of :data:`MODEL_TYPES` with ``AutoConfig``, ``AutoModel`` and its LM's Auto
    class, so that ``from_pretrained`` / ``pipeline`` load them without ``trust_remote_code``."""
    _register(MODEL_TYPES.values())


__all__ = ["MODEL_TYPES", "ModelType", "register_auto_classes", *sorted(c.__name__ for t in MODEL_TYPES.values() for c in t.classes)]
