"""One folder per architecture, transformers-style (``configuration_x.py`` + ``modeling_x.py``, the card text
in ``card.toml``), each declaring its :class:`ModelType` as ``MODEL_TYPE`` in its ``__init__.py``.
:data:`MODEL_TYPES` collects them from the folders: ``import hf_nlm`` registers each with the Auto classes
(:func:`register_auto_classes`) and the ``hf-nlm`` command builds its ``--model`` choices and model flags from
it, so a new architecture is a folder and nothing else. Folders outside this package (a package of your own
laid out the same way) join with :func:`register_model_package`."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from .registry import ModelType
from .registry import register_auto_classes as _register


def _architectures(package: ModuleType | None = None) -> dict[str, ModelType]:
    """``MODEL_TYPE`` of every subpackage (an architecture folder) of ``package`` (default: this one), by
    model type, in folder order."""
    path, prefix = (__path__, __name__) if package is None else (package.__path__, package.__name__)
    found: dict[str, ModelType] = {}
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.ispkg:
            folder = importlib.import_module(f"{prefix}.{info.name}")
            model_type = getattr(folder, "MODEL_TYPE", None)
            if not isinstance(model_type, ModelType):
                raise TypeError(f"{folder.__file__}: an architecture folder's __init__.py must end with "
                                f"MODEL_TYPE = ModelType(...), got {model_type!r}")
            found[model_type.name] = model_type
    return found


MODEL_TYPES: dict[str, ModelType] = _architectures()

# The config, body and LM classes of every architecture, importable from here and from hf_nlm.
globals().update({c.__name__: c for t in MODEL_TYPES.values() for c in t.classes})


def register_auto_classes() -> None:
    """Register every model type of :data:`MODEL_TYPES` with ``AutoConfig``, ``AutoModel`` and its LM's Auto
    class, so that ``from_pretrained`` / ``pipeline`` load them without ``trust_remote_code``."""
    _register(MODEL_TYPES.values())


def model_type_of_recipe(recipe: str) -> str:
    """The model type whose recipes hold ``recipe``: a recipe behind a published number (``demo``,
    ``bengio2003``, ``merity2018``, ...) is named by one model type only, so its name alone says what trains.
    Raises ``ValueError`` for a name no model type or several hold (``default``: give the model type)."""
    holders = [name for name, model_type in MODEL_TYPES.items() if recipe in model_type.recipes]
    if len(holders) == 1:
        return holders[0]
    if not holders:
        known = sorted({r for t in MODEL_TYPES.values() for r in t.recipes} - {"default"})
        raise ValueError(f"--recipe {recipe}: no model type has this recipe; the named recipes: "
                         f"{', '.join(known)}")
    raise ValueError(f"--recipe {recipe} is a recipe of {', '.join(holders)}: give --model too")


def register_model_package(package: str) -> dict[str, ModelType]:
    """Register the architecture folders of ``package``, an importable package laid out like this one: each of
    its subpackages declares ``MODEL_TYPE`` in its ``__init__.py``. They join :data:`MODEL_TYPES`
    (``hf-nlm train --model`` and its flags, the model cards) and the Auto classes, as this package's own
    folders do; returns them.

    Raises ``ValueError`` if a model type name is already registered by another config class."""
    found = _architectures(importlib.import_module(package))
    for name, model_type in found.items():
        taken = MODEL_TYPES.get(name)
        if taken is not None and taken.config_class is not model_type.config_class:
            raise ValueError(f"{package}: model type {name!r} is already registered by "
                             f"{taken.config_class.__module__}.{taken.config_class.__qualname__}")
    MODEL_TYPES.update(found)
    _register(found.values())
    return found


__all__ = ["MODEL_TYPES", "ModelType", "model_type_of_recipe", "register_auto_classes",
           "register_model_package",
           *sorted(c.__name__ for t in MODEL_TYPES.values() for c in t.classes)]
