"""Reading the JSON files of a saved folder (a model's ``config.json``, its tokenizer files, an n-gram model's
``ngram.json``, a word tree): every failure is one ``ValueError`` naming the file and what was expected.

Python's ``json`` would raise ``JSONDecodeError`` ("Unterminated string starting at: line 1 column 14") or
``UnicodeDecodeError`` without the file's name, and accept ``NaN`` and ``Infinity``, which JSON has not: a
number that is not finite in a saved setting is refused here too.
"""

from __future__ import annotations

import json
import os

#: What to do about a file that does not read: get an intact copy.
RESTORE = "copy it again from where it came from (a training run keeps copies in best_model/, checkpoints/)"


def check_model_folder(folder: str | os.PathLike) -> None:
    """Raise a ``FileNotFoundError`` unless ``folder`` is a saved model folder (one with ``config.json``),
    saying which: a folder that does not exist, a file, or a folder without ``config.json``. Every command
    and function that reads a run folder (load_run, the card, push, the web page) checks with this one."""
    path = os.fspath(folder)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist: expected a saved model folder (a run's output "
                                "directory, holding config.json)")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path} is a file, not a saved model folder (a folder holding config.json)")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"{path} is not a saved model folder (no config.json)")


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def read_json(path: str | os.PathLike, expected: type = dict, restore: str = RESTORE):
    """The JSON value in ``path``, which must be of type ``expected`` (a ``dict``: a JSON object).

    Raises ``ValueError`` naming the file for bytes that are not UTF-8, text that is not JSON (a truncated
    file: where it breaks off), a value of another type, or a ``NaN`` / ``Infinity``; ``restore`` says how to
    get a good copy. A missing file is the ``FileNotFoundError`` of ``open``."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not a JSON file (byte 0x{data[err.start]:02x} at offset {err.start} is "
                         f"not UTF-8 text): the file is damaged or of another kind; {restore}") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err.msg}: line {err.lineno} column {err.colno}): the "
                         f"file is truncated or corrupted; {restore}") from None
    except ValueError as err:  # NaN / Infinity
        raise ValueError(f"{path}: {err}; JSON holds finite numbers only: {restore}") from None
    if not isinstance(value, expected):
        raise ValueError(f"{path}: expected a JSON {_json_type(expected)}, got {_json_type(type(value))}; "
                         f"{restore}")
    return value


def _json_type(kind: type) -> str:
    return {dict: "object", list: "array", str: "string", int: "number", float: "number",
            bool: "true/false", type(None): "null"}.get(kind, kind.__name__)


def check_json_files(folder: str | os.PathLike, names) -> None:
    """:func:`read_json` on each of ``names`` that ``folder`` holds (a JSON object expected in each)."""
    for name in names:
        path = os.path.join(os.fspath(folder), name)
        if os.path.isfile(path):
            read_json(path)
