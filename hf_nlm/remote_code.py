"""What lets a saved folder load in a Python process that has not run ``import hf_nlm``.

transformers' Auto classes know only the model types registered in the running process. A tool that loads a
model by path or Hub id (``lm_eval --model hf``, a serving stack, a notebook that never imports this package)
therefore fails on ``model_type: "nplm"``. The Hub's answer is "custom code": ``config.json`` carries an
``auto_map`` naming, for each Auto class, ``"file.Class"`` in a Python file saved beside the weights, and
``from_pretrained(..., trust_remote_code=True)`` imports that file (transformers copies it into its modules
cache, ``HF_MODULES_CACHE``, and needs no network for a local folder).

Every ``save_pretrained`` of this package writes both: the auto_map, and a file of a few lines that imports
the classes from the installed ``hf_nlm`` package (importing it registers every model type, so the tokenizer
and the other Auto classes find theirs too). The file holds no model code, so the folder cannot drift from the
package that loads it, and a process without the package gets an ``ImportError`` saying
``pip install hf-nlm``. transformers' own mechanism (``register_for_auto_class``) would instead copy the
defining module, which imports the rest of the package relatively and cannot load on its own.

Without ``trust_remote_code=True`` transformers runs no file of the folder, and it has no plugin entry points
through which an installed package could register its model types: then ``import hf_nlm`` is needed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

#: The file the config's auto_map names (the config, base model and LM classes of its model type).
MODEL_CODE_FILE = "hf_nlm_model.py"
#: The file the tokenizer's auto_map (``tokenizer_config.json``) names.
TOKENIZER_CODE_FILE = "hf_nlm_tokenizer.py"
CODE_FILES = (MODEL_CODE_FILE, TOKENIZER_CODE_FILE)

def model_auto_map(config_class: type) -> tuple[dict[str, str], list[type]] | None:
    """``config.json``'s ``auto_map`` for a config of ``config_class`` and the classes it names:
    ``AutoConfig``, and each of ``AutoModel``, ``AutoModelForCausalLM``, ``AutoModelForSeq2SeqLM`` that
    ``config_class`` is registered with (``import hf_nlm`` registers every model type;
    :func:`hf_nlm.models.register_model_package` a package's), so that the folder loads as it does after the
    import. Each names its class in
    :data:`MODEL_CODE_FILE`. None for a config class registered with none of them."""
    from transformers import (
        CONFIG_MAPPING,
        MODEL_FOR_CAUSAL_LM_MAPPING,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING,
        MODEL_MAPPING,
    )

    name = config_class.model_type
    # (CONFIG_MAPPING.get ignores registered types; `in` and [] see them)
    if name not in CONFIG_MAPPING or CONFIG_MAPPING[name] is not config_class:
        return None
    stem = Path(MODEL_CODE_FILE).stem
    auto_map, classes = {"AutoConfig": f"{stem}.{config_class.__name__}"}, [config_class]
    mappings = {"AutoModel": MODEL_MAPPING, "AutoModelForCausalLM": MODEL_FOR_CAUSAL_LM_MAPPING,
                "AutoModelForSeq2SeqLM": MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING}
    for auto_class, mapping in mappings.items():
        if config_class in mapping:
            auto_map[auto_class] = f"{stem}.{mapping[config_class].__name__}"
            classes.append(mapping[config_class])
    return (auto_map, classes) if len(classes) > 1 else None


def write_model_code(folder: str | os.PathLike, config_class: type) -> dict[str, str] | None:
    """Write :data:`MODEL_CODE_FILE` into ``folder`` for ``config_class``'s model type and return the auto_map
    that names its classes (None, and nothing written, for a config class of no registered model type)."""
    found = model_auto_map(config_class)
    if found is None:
        return None
    auto_map, classes = found
    write_code_file(Path(folder) / MODEL_CODE_FILE, classes)
    return auto_map


def tokenizer_auto_map(tokenizer_class: type) -> dict[str, list[str | None]]:
    """``tokenizer_config.json``'s ``auto_map``: ``AutoTokenizer`` as ``[slow, fast]`` class names, the fast
    one (this package's tokenizers are all fast) in :data:`TOKENIZER_CODE_FILE`."""
    return {"AutoTokenizer": [None, f"{Path(TOKENIZER_CODE_FILE).stem}.{tokenizer_class.__name__}"]}


def write_tokenizer_code(folder: str | os.PathLike, tokenizer_class: type) -> dict[str, list[str | None]]:
    """Write :data:`TOKENIZER_CODE_FILE` into ``folder`` and return the auto_map that names the class."""
    write_code_file(Path(folder) / TOKENIZER_CODE_FILE, [tokenizer_class])
    return tokenizer_auto_map(tokenizer_class)


def code_file_text(classes: Iterable[type]) -> str:
    """The text of a code file that imports ``classes`` from their installed package.

    The imports sit in a ``try`` block: transformers checks a code file's imports before running it
    (``check_imports``) and would otherwise stop with its own "pip install hf_nlm", and ours says which
    package the folder needs. An ``ImportError`` from inside the installed package is raised as it is."""
    by_module: dict[str, list[str]] = {}
    for cls in classes:
        by_module.setdefault(cls.__module__, []).append(cls.__name__)
    packages = sorted({module.split(".")[0] for module in by_module})
    pip_names = " ".join(p.replace("_", "-") for p in packages)  # pip's spelling of hf_nlm: hf-nlm
    imports = "\n".join(f"    from {module} import {', '.join(sorted(names))}"
                        for module, names in sorted(by_module.items()))
    return (
        f'"""The classes this folder\'s auto_map names, imported from the installed {pip_names} package.\n'
        "\n"
        "transformers runs this file for from_pretrained(..., trust_remote_code=True) in a process that\n"
        f"has not imported {', '.join(packages)}. It holds no model code. Written by hf_nlm.remote_code.\n"
        '"""\n'
        "\n"
        "try:\n"
        f"{imports}\n"
        "except ModuleNotFoundError as err:\n"
        f"    if (err.name or '').split('.')[0] not in {tuple(packages)!r}:\n"
        "        raise\n"
        f"    raise ImportError('this model folder was saved by {pip_names}, which is not installed: '\n"
        f"                      'pip install {pip_names}') from None\n"
    )


def write_code_file(path: Path, classes: Iterable[type]) -> None:
    """Write :func:`code_file_text` to ``path`` (the folder is made if need be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code_file_text(classes), encoding="utf-8")


__all__ = ["CODE_FILES", "MODEL_CODE_FILE", "TOKENIZER_CODE_FILE", "code_file_text", "model_auto_map",
           "tokenizer_auto_map", "write_model_code", "write_tokenizer_code"]
