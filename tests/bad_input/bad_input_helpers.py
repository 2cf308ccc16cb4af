"""Small saved model folders for the bad-input tests (built in Python, no training run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.tokenization import tokenizer_fingerprint, train_word_level_tokenizer
from hf_nlm_cli import main

TEXTS = ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog", "the president spoke"]


def word_tokenizer(texts=TEXTS):
    return train_word_level_tokenizer(texts)


def nplm(tokenizer, **config) -> NPLMForCausalLM:
    torch.manual_seed(0)
    eos = tokenizer.eos_token_id
    return NPLMForCausalLM(NPLMConfig(
        vocab_size=len(tokenizer), context_size=2, embedding_size=8, hidden_size=8, bos_token_id=eos,
        eos_token_id=eos, pad_token_id=eos, tokenizer_fingerprint=tokenizer_fingerprint(tokenizer), **config,
    ))


def save_folder(folder: Path, model, tokenizer=None) -> Path:
    model.save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder


def edit_weights(folder: Path, edit) -> None:
    """Rewrite ``folder``'s model.safetensors with ``edit(weights dict)`` applied."""
    path = folder / "model.safetensors"
    weights = load_file(path)
    edit(weights)
    save_file(weights, path, metadata={"format": "pt"})


def cli_error(argv: list[str], capsys) -> str:
    """stderr of a command that must end with a usage error (exit 2) and no traceback."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "Traceback" not in err
    return err
