"""A saved model folder read back: :func:`load_run` gives its model and tokenizer, checked to belong
together.

Every reader of a run folder (the command line, the web page, the benchmarks, training when it resumes or
starts from a saved model) loads through it, so that each says the same about a folder that does not load. It
sits below training: reading a folder needs no training code.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from transformers.utils import logging as hf_logging

from .saved_files import check_json_files, check_model_folder


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Hide transformers' "Writing model shards" / "Loading weights" bars while a folder is written or read:
    one per checkpoint would bury the training progress bar."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class SavedRun(NamedTuple):
    """A saved model folder, loaded: the model (in evaluation mode) and its tokenizer."""

    model: object
    tokenizer: object


def load_run(folder: str | os.PathLike) -> SavedRun:
    """The model and tokenizer saved in ``folder`` (a run's ``output_dir``, a checkpoint, any
    ``save_pretrained`` folder of this package's models), checked to belong together. Any failure is one
    ``ValueError`` that says whether the model or the tokenizer does not load, naming the folder and the cause
    (the file and field: a damaged ``tokenizer.json`` is the tokenizer's, never the model's); a folder that is
    no saved model is a ``FileNotFoundError``."""
    folder = Path(folder)
    check_model_folder(folder)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    from .modeling_utils import SAVED_JSON_FILES, check_config_field_types, from_pretrained_complete
    from .tokenization import check_tokenizer, check_tokenizer_files

    if not (folder / "tokenizer.json").is_file():
        # AutoTokenizer would look for a slow tokenizer next and ask for sentencepiece or tiktoken.
        found = ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"
        raise FileNotFoundError(
            f"{folder} has no tokenizer: expected tokenizer.json (saved with tokenizer.save_pretrained "
            f"beside the model); the folder has {found}"
        )
    try:
        check_json_files(folder, SAVED_JSON_FILES)  # before transformers, which names no file
        check_config_field_types(folder)  # before AutoConfig, which would fail on a wrong type less clearly
        seq2seq = getattr(AutoConfig.from_pretrained(folder), "is_encoder_decoder", False)
        with quiet_progress_bars():
            auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
            model = from_pretrained_complete(auto, folder)  # refuses missing or unexpected weights
    except Exception as err:  # whatever a broken folder raises (Ctrl-C still interrupts)
        raise ValueError(f"cannot load the model in {folder}: {err}") from err
    try:
        check_tokenizer_files(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        check_tokenizer(model, tokenizer)
    except Exception as err:
        raise ValueError(f"cannot load the tokenizer in {folder}: {err}") from err
    return SavedRun(model, tokenizer)



__all__ = ["SavedRun", "load_run", "quiet_progress_bars"]
