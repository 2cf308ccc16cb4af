"""Broken model folders and unwritable outputs end the command with one message naming the file (exit 2),
not a traceback."""

from __future__ import annotations

import importlib

import pytest
import torch
from bad_input_helpers import TEXTS, cli_error, edit_weights, nplm, save_folder, word_tokenizer

import hf_nlm.evaluation
from hf_nlm import NPLMForCausalLM
from hf_nlm.trees import random_tree


def test_a_floating_point_error_during_evaluate_is_a_usage_error(tmp_path, capsys, monkeypatch):
    tokenizer = word_tokenizer()
    folder = save_folder(tmp_path / "run", nplm(tokenizer), tokenizer)
    (tmp_path / "test.txt").write_text("\n".join(TEXTS) + "\n")

    def diverged(*args, **kwargs):
        raise FloatingPointError("evaluation loss is nan after 0 tokens")

    # A module first imported while the patch holds would keep the fake for good: the trainer binds the name.
    importlib.import_module("hf_nlm.training.trainer")
    monkeypatch.setattr(hf_nlm.evaluation, "evaluate_lm", diverged)
    err = cli_error(["evaluate", str(folder), "--test-file", str(tmp_path / "test.txt")], capsys)
    assert f"{folder}: evaluation loss is nan after 0 tokens" in err


def test_nan_weights_are_refused_by_evaluate(tmp_path, capsys):
    tokenizer = word_tokenizer()
    folder = save_folder(tmp_path / "run", nplm(tokenizer), tokenizer)
    edit_weights(folder, lambda w: w["model.H.weight"].fill_(float("nan")))
    (tmp_path / "test.txt").write_text("\n".join(TEXTS) + "\n")
    err = cli_error(["evaluate", str(folder), "--test-file", str(tmp_path / "test.txt")], capsys)
    assert "tensor model.H.weight holds" in err and "NaN or infinite" in err


def test_a_tree_missing_from_the_weights_is_named(tmp_path, capsys):
    tokenizer = word_tokenizer()
    model = NPLMForCausalLM(nplm(tokenizer).config.__class__(**{
        **nplm(tokenizer).config.to_dict(), "head": "tree", "tie_word_embeddings": False,
    }), tree=random_tree(len(tokenizer), seed=0))
    folder = save_folder(tmp_path / "run", model, tokenizer)
    edit_weights(folder, lambda w: [w.pop(k) for k in list(w) if k.split(".")[-1].startswith("tree_")])
    err = cli_error(["generate", str(folder), "the cat"], capsys)
    assert str(folder / "model.safetensors") in err
    assert all(f"lm_head.{name}" in err for name in ("tree_nodes", "tree_bits", "tree_mask")), err


def test_a_folder_without_a_tokenizer_says_so(tmp_path, capsys):
    folder = save_folder(tmp_path / "run", nplm(word_tokenizer()))
    err = cli_error(["generate", str(folder), "the cat"], capsys)
    assert f"{folder} has no tokenizer: expected tokenizer.json" in err
    assert "config.json" in err and "model.safetensors" in err and "sentencepiece" not in err


def test_a_pickled_checkpoint_is_not_read(tmp_path, capsys):
    tokenizer = word_tokenizer()
    folder = save_folder(tmp_path / "run", nplm(tokenizer), tokenizer)
    state = NPLMForCausalLM.from_pretrained(folder).state_dict()
    (folder / "model.safetensors").unlink()
    torch.save({"state": state, "extra": object()}, folder / "pytorch_model.bin")
    with pytest.raises(OSError, match="loads weights from model.safetensors only"):
        NPLMForCausalLM.from_pretrained(folder)
    err = cli_error(["generate", str(folder), "the cat"], capsys)
    assert f"{folder / 'pytorch_model.bin'}: hf_nlm loads weights from model.safetensors only" in err
    assert "can run code" in err


def test_plot_numerals_to_a_path_that_cannot_be_written(tmp_path, capsys):
    from hf_nlm import NumeracyLMConfig, NumeracyLMForCausalLM
    from hf_nlm.tokenization import tokenizer_fingerprint, train_numeracy_tokenizer

    tokenizer = train_numeracy_tokenizer(["the deficit was 7 in 2019", "it rose to 1,200 from 7"])
    eos = tokenizer.eos_token_id
    model = NumeracyLMForCausalLM(NumeracyLMConfig(
        vocab_size=len(tokenizer), embedding_size=8, hidden_size=8, numeral_vocab=tokenizer.numeral_vocab,
        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
    ))
    folder = save_folder(tmp_path / "run", model, tokenizer)
    (tmp_path / "a-file").write_text("")
    output = tmp_path / "a-file" / "n.png"  # under a file: no user, root included, can write it
    err = cli_error(["plot-numerals", str(folder), "--output", str(output)], capsys)
    assert err.splitlines()[-1] == (f"hf-nlm plot-numerals: error: argument --output: {output}: "
                                    f"{output.parent} is a file, not a folder")
