"""The files of a saved tokenizer, read before transformers reads them, so that a damaged one is named."""

from __future__ import annotations

import os

from tokenizers import Tokenizer

from ..saved_files import RESTORE, check_json_files, read_json

#: The JSON files ``save_pretrained`` writes for a fast tokenizer.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def check_tokenizer_files(folder: str | os.PathLike) -> None:
    """Raise ``ValueError`` naming the file if one of the tokenizer files in ``folder`` is truncated, damaged,
    not a JSON object, or (``tokenizer.json``) not a tokenizer the ``tokenizers`` library builds.

    transformers would raise the bare ``JSONDecodeError`` / ``UnicodeDecodeError`` or the ``tokenizers``
    library's own error, naming no file."""
    check_json_files(folder, TOKENIZER_FILES[1:])
    path = os.path.join(os.fspath(folder), TOKENIZER_FILES[0])
    if os.path.isfile(path):
        read_json(path)
        try:
            Tokenizer.from_file(path)
        except Exception as err:  # the tokenizers library's (Rust) error for a JSON of the wrong shape
            raise ValueError(f"{path} is not a tokenizer file ({err}); {RESTORE}") from None
