"""Input that used to give a wrong result silently (text from NaN or random weights, a perplexity scored
with another vocabulary) is refused with an error naming the file, tensor, keys or vocabularies."""

from __future__ import annotations

import json

import pytest
import torch
from bad_input_helpers import TEXTS, cli_error, edit_weights, nplm, save_folder, word_tokenizer
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_nlm import LBLConfig, LBLForCausalLM, NPLMForCausalLM
from hf_nlm.modeling_utils import from_pretrained_complete
from hf_nlm.ngram import InterpolatedLM, KneserNeyLM, NgramLM
from hf_nlm.tokenization import check_tokenizer, tokenizer_fingerprint
from hf_nlm.training import load_run

OTHER_TEXTS = ["one two three four", "five six seven", "eight nine ten eleven twelve"]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_that_are_not_finite_are_refused(tmp_path, capsys, value):
    tokenizer = word_tokenizer()
    folder = save_folder(tmp_path / "run", nplm(tokenizer), tokenizer)
    edit_weights(folder, lambda w: w["model.C.weight"].__setitem__((3, 2), value))
    for load in (NPLMForCausalLM.from_pretrained, AutoModelForCausalLM.from_pretrained):
        with pytest.raises(ValueError, match="tensor model.C.weight holds 1 NaN or infinite value") as info:
            load(folder)
        assert str(folder / "model.safetensors") in str(info.value)
    err = cli_error(["generate", str(folder), "the president"], capsys)
    assert "model.C.weight" in err and "NaN or infinite" in err


def test_weights_of_another_model_type_are_refused_by_the_run_loaders(tmp_path, capsys):
    """The loaders of a run folder (``hf-nlm``, ``load_run``) refuse another model's weights, naming the file
    and the keys; ``from_pretrained`` does what transformers does: it initialises the model's own tensors the
    file lacks, ignores the others, and reports both."""
    tokenizer = word_tokenizer()
    folder = save_folder(tmp_path / "run", nplm(tokenizer), tokenizer)
    other = LBLForCausalLM(LBLConfig(vocab_size=len(tokenizer), context_size=2, hidden_size=8))
    other.save_pretrained(tmp_path / "lbl")
    (folder / "model.safetensors").write_bytes((tmp_path / "lbl" / "model.safetensors").read_bytes())
    for load in (lambda: from_pretrained_complete(NPLMForCausalLM, folder), lambda: load_run(folder)):
        with pytest.raises(ValueError,
                           match="does not hold the weights of this NPLMForCausalLM: missing") as info:
            load()
        assert str(folder / "model.safetensors") in str(info.value)
        assert "model.C.weight" in str(info.value) and "unexpected" in str(info.value)
    err = cli_error(["generate", str(folder), "the president"], capsys)
    assert "model.C.weight" in err and "unexpected" in err
    model, info = NPLMForCausalLM.from_pretrained(folder, output_loading_info=True)
    in_file = set(load_file(folder / "model.safetensors"))
    assert "model.C.weight" in info["missing_keys"]
    assert info["unexpected_keys"] == in_file - set(model.state_dict())
    assert torch.isfinite(model.model.C.weight).all()


def test_a_missing_key_is_initialised_by_from_pretrained_and_refused_by_the_run_loaders(tmp_path, capsys):
    tokenizer = word_tokenizer()
    folder = save_folder(tmp_path / "run", nplm(tokenizer), tokenizer)
    saved = load_file(folder / "model.safetensors")
    edit_weights(folder, lambda w: w.pop("model.H.weight"))
    for load in (lambda: from_pretrained_complete(AutoModelForCausalLM, folder), lambda: load_run(folder)):
        with pytest.raises(ValueError,
                           match=r"model\.safetensors does not hold .*: missing model\.H\.weight \(1\)"):
            load()
    assert "missing model.H.weight (1)" in cli_error(["generate", str(folder), "the president"], capsys)
    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    assert info["missing_keys"] == {"model.H.weight"} and not info["unexpected_keys"]
    # Initialised as the model initialises it (uniform within +-initializer_range), the rest as saved.
    r = model.config.initializer_range
    assert model.model.H.weight.abs().max() <= r and model.model.H.weight.std() > 0
    torch.testing.assert_close(model.model.C.weight, saved["model.C.weight"], rtol=0, atol=0)
    assert isinstance(AutoModelForCausalLM.from_pretrained(folder), NPLMForCausalLM)


@pytest.mark.parametrize("other_texts", [TEXTS[:2], OTHER_TEXTS, TEXTS + OTHER_TEXTS],
                         ids=["smaller", "same-ish", "larger"])
def test_a_tokenizer_from_another_run_is_refused(tmp_path, capsys, other_texts):
    tokenizer, other = word_tokenizer(), word_tokenizer(other_texts)
    folder = save_folder(tmp_path / "run", nplm(tokenizer))
    other.save_pretrained(folder)  # another run's tokenizer beside the model
    (tmp_path / "test.txt").write_text("\n".join(TEXTS) + "\n")
    err = cli_error(["evaluate", str(folder), "--test-file", str(tmp_path / "test.txt")], capsys)
    assert (str(folder) in err
            and f"{len(other)} tokens, fingerprint {tokenizer_fingerprint(other)[:12]}" in err)
    assert tokenizer_fingerprint(tokenizer)[:12] in err
    model = NPLMForCausalLM.from_pretrained(folder)
    with pytest.raises(ValueError, match="is not the one the model in .* was trained with"):
        check_tokenizer(model, other)
    check_tokenizer(model, tokenizer)


def test_a_model_without_a_fingerprint_checks_size_and_special_ids(tmp_path):
    tokenizer = word_tokenizer()
    model = nplm(tokenizer)
    model.config.tokenizer_fingerprint = None
    check_tokenizer(model, tokenizer)
    with pytest.raises(ValueError, match=rf"{len(word_tokenizer(OTHER_TEXTS))} tokens, the model's "
                                         rf"vocab_size is {len(tokenizer)}"):
        check_tokenizer(model, word_tokenizer(OTHER_TEXTS))


def test_a_training_run_records_its_tokenizer_and_a_resize_forgets_it(tiny_run):
    saved = json.loads((tiny_run / "config.json").read_text())["tokenizer_fingerprint"]
    assert saved == tokenizer_fingerprint(AutoTokenizer.from_pretrained(tiny_run))
    tokenizer = word_tokenizer()
    model = nplm(tokenizer)
    model.resize_token_embeddings(len(tokenizer) + 2)
    assert model.config.tokenizer_fingerprint is None


@pytest.mark.parametrize("build", [
    lambda texts, tok: KneserNeyLM.from_texts(texts, tok, order=2),
    lambda texts, tok: InterpolatedLM.from_texts(texts, tok, order=2),
], ids=["kneser-ney", "interpolated"])
def test_an_ngram_model_refuses_another_tokenizer(tmp_path, build):
    tokenizer, other = word_tokenizer(), word_tokenizer(OTHER_TEXTS)
    lm = build(TEXTS, tokenizer)
    assert lm.tokenizer_fingerprint == tokenizer_fingerprint(tokenizer)
    lm.evaluate(TEXTS, tokenizer)
    with pytest.raises(ValueError, match=f"not the one this {type(lm).__name__} was fitted with"):
        lm.evaluate(TEXTS, other)
    lm.save(tmp_path / "lm")
    loaded = NgramLM.load(tmp_path / "lm")
    assert loaded.tokenizer_fingerprint == lm.tokenizer_fingerprint
    with pytest.raises(ValueError, match="fingerprint"):
        loaded.evaluate(TEXTS, other)


def test_forward_names_ids_outside_the_vocabulary_and_labels_of_another_shape():
    tokenizer = word_tokenizer()
    model = nplm(tokenizer).eval()
    V = len(tokenizer)
    with pytest.raises(ValueError, match=rf"input_ids hold ids from 5 to 99999, outside .*vocab_size={V}"):
        model.generate(torch.tensor([[5, 99999]]), max_new_tokens=2)
    with pytest.raises(ValueError, match=r"input_ids hold ids from -1"):
        model(torch.tensor([[-1, 3]]))
    ids = torch.tensor([[2, 3, 4, 5]])
    with pytest.raises(ValueError, match=r"labels has shape \(1, 3\) but input_ids \(1, 4\)"):
        model(ids, labels=ids[:, :3])
    with pytest.raises(ValueError, match=r"labels hold ids from 2 to 500"):
        model(ids, labels=torch.tensor([[-100, 3, 500, 2]]))
    assert model(ids, labels=torch.tensor([[-100, 3, 4, 5]])).loss.isfinite()
