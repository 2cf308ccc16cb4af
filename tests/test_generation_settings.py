"""Where a model's generation settings come from and who decides a continuation's length.

Every model of the package gets its generation settings from its class and config
(:func:`hf_nlm.generation.generation_defaults`), however it is built and trained, and ``save_pretrained``
writes them; a length the caller gives to ``generate()`` (``max_length``, ``max_new_tokens``) decides the
continuation's length whatever the saved config holds, and a saved ``min_new_tokens`` never stretches it.
The expected values are facts of their own: the tokenizer's ``<unk>`` id and the punctuation marks of the
text, counted tokens."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    GenerationConfig,
    Trainer,
    TrainingArguments,
    pipeline,
)

from hf_nlm import AWDLSTMConfig, LBLConfig, NPLMConfig, NPLMForCausalLM
from hf_nlm.data import DataCollatorForCausalLM
from hf_nlm.models import StorySeq2SeqConfig
from hf_nlm.tokenization import train_word_level_tokenizer

LINES = [
    "the president said that the budget was 35 billion dollars .",
    "we will cut the deficit by 12 % , and the rest was 4.5 billion .",
    "`` we will not wait , '' the president said .",
] * 4
PROMPT = "the president said"
SETTINGS = ("do_sample", "max_new_tokens", "min_new_tokens", "no_repeat_ngram_size", "suppress_tokens",
            "begin_suppress_tokens")


@pytest.fixture(scope="module")
def tokenizer():
    return train_word_level_tokenizer(LINES)


def expected_settings(tokenizer) -> dict:
    """The library's settings for ``tokenizer``, written out from the text: <unk> suppressed, and every
    punctuation mark of LINES but the comma refused as a first token."""
    marks = sorted(tokenizer.convert_tokens_to_ids([".", "%", "``", "''"]))
    return {"do_sample": False, "max_new_tokens": 20, "min_new_tokens": 1, "no_repeat_ngram_size": 3,
            "suppress_tokens": [tokenizer.convert_tokens_to_ids("<unk>")], "begin_suppress_tokens": marks}


def small_nplm(tokenizer, **fields):
    torch.manual_seed(0)
    config = NPLMConfig.from_tokenizer(tokenizer, context_size=2, embedding_size=8, hidden_size=8, **fields)
    return NPLMForCausalLM(config).eval()


def test_a_model_from_config_trained_by_trainer_saves_the_settings_and_never_writes_unk(tokenizer, tmp_path):
    """The README's Trainer path: AutoModelForCausalLM.from_config, transformers' Trainer, save_pretrained."""
    from datasets import Dataset

    config = NPLMConfig.from_tokenizer(tokenizer, context_size=2, embedding_size=8, hidden_size=8)
    model = AutoModelForCausalLM.from_config(config)
    eos = tokenizer.eos_token_id
    rows = [{"input_ids": [eos, *tokenizer(line, add_special_tokens=False).input_ids, eos]} for line in LINES]
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=2, max_steps=2,
                             learning_rate=0.01, report_to=[], use_cpu=True, save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, seed=0)
    Trainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
            data_collator=DataCollatorForCausalLM(tokenizer)).train()
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)

    saved = json.loads((folder / "generation_config.json").read_text())
    assert {k: saved.get(k) for k in SETTINGS} == expected_settings(tokenizer)
    loaded = AutoModelForCausalLM.from_pretrained(folder).eval()
    unk = tokenizer.convert_tokens_to_ids("<unk>")
    with torch.no_grad():
        loaded.lm_head.bias[unk] += 50.0  # <unk> the likeliest token after every context
        ids = AutoTokenizer.from_pretrained(folder)(PROMPT, return_tensors="pt").input_ids
        new = loaded.generate(ids)[0, ids.shape[1]:].tolist()
        assert new and unk not in new
        # the settings are what keeps it out: lifted, greedy search writes it at once
        assert loaded.generate(ids, suppress_tokens=None)[0, ids.shape[1]].item() == unk


@pytest.mark.parametrize("config_class", [NPLMConfig, LBLConfig, AWDLSTMConfig, StorySeq2SeqConfig])
def test_every_model_built_from_a_config_has_the_settings(config_class, tokenizer, tmp_path):
    auto = AutoModelForSeq2SeqLM if config_class is StorySeq2SeqConfig else AutoModelForCausalLM
    model = auto.from_config(config_class.from_tokenizer(tokenizer))
    assert {k: getattr(model.generation_config, k) for k in SETTINGS} == expected_settings(tokenizer)
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "generation_config.json").read_text())
    assert {k: saved.get(k) for k in SETTINGS} == expected_settings(tokenizer)


def test_a_config_made_without_the_tokenizer_still_keeps_unk_out(tokenizer):
    """The word-level tokenizers put <unk> at id 0, the config's default unk_token_id; no punctuation is
    known without the tokenizer."""
    assert tokenizer.convert_tokens_to_ids("<unk>") == 0
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2))
    expected = {**expected_settings(tokenizer), "begin_suppress_tokens": None}
    assert {k: getattr(model.generation_config, k) for k in SETTINGS} == expected


def test_a_folder_without_a_generation_config_gets_the_settings_from_its_config(tokenizer, tmp_path):
    small_nplm(tokenizer).save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").unlink()
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert {k: getattr(loaded.generation_config, k) for k in SETTINGS} == expected_settings(tokenizer)


def test_config_ids_past_the_vocabulary_are_refused():
    with pytest.raises(ValueError, match="below vocab_size"):
        NPLMConfig(vocab_size=10, first_step_suppressed_ids=[3, 10])


@pytest.fixture
def endless(tokenizer):
    """A model that never ends its text on its own (<eos> far the least likely token)."""
    model = small_nplm(tokenizer)
    with torch.no_grad():
        model.lm_head.bias[tokenizer.eos_token_id] -= 100.0
    return model


@pytest.mark.parametrize("saved_max_new_tokens", [3, 20, 50])
def test_a_callers_length_decides_whatever_is_saved(endless, tokenizer, saved_max_new_tokens):
    endless.generation_config.max_new_tokens = saved_max_new_tokens
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    n = ids.shape[1]
    with torch.no_grad():
        assert endless.generate(ids).shape[1] == n + saved_max_new_tokens  # no length given: the saved one
        for new in (5, 30):
            assert endless.generate(ids, max_length=n + new).shape[1] == n + new
            assert endless.generate(ids, max_new_tokens=new).shape[1] == n + new
            # as lm-evaluation-harness asks: a total length, with greedy search spelled out
            assert endless.generate(input_ids=ids, max_length=n + new, do_sample=False,
                                    use_cache=True).shape[1] == n + new
            # a caller's generation config with a total length
            assert endless.generate(ids, GenerationConfig(max_length=n + new)).shape[1] == n + new
            assert endless.generate(ids, generation_config=GenerationConfig(max_length=n + new)).shape[1] \
                == n + new
        # both given: transformers' own rule, the count of new tokens wins
        assert endless.generate(ids, max_length=n + 5, max_new_tokens=7).shape[1] == n + 7
    generator = pipeline("text-generation", model=endless, tokenizer=tokenizer)
    out = generator(PROMPT, max_new_tokens=4, return_tensors=True)[0]["generated_token_ids"]
    assert len(out) == n + 4


def test_a_saved_minimum_never_stretches_a_callers_short_length(tokenizer):
    """<eos> the likeliest token after every context: a continuation ends as soon as the minimum lets it."""
    model = small_nplm(tokenizer)
    eos = tokenizer.eos_token_id
    with torch.no_grad():
        model.lm_head.bias[eos] += 100.0
    model.generation_config.min_new_tokens = 8
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    n = ids.shape[1]
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = model.generate(ids, max_length=n + 5)[0, n:].tolist()
        short_new = model.generate(ids, max_new_tokens=5)[0, n:].tolist()
    # the caller's 5 tokens, none of them <eos> (the minimum still holds within them), and no warning that
    # the saved minimum cannot be met
    assert len(short) == len(short_new) == 5 and eos not in short + short_new
    assert not [w for w in caught if "Unfeasible length" in str(w.message)]
    with torch.no_grad():
        # room for the minimum: 8 words, then the end of the text
        for kwargs in ({}, {"max_new_tokens": 12}, {"max_length": n + 12}):
            new = model.generate(ids, **kwargs)[0, n:].tolist()
            assert len(new) == 9 and new[-1] == eos and eos not in new[:-1]
        # a minimum the caller gives is the caller's
        new = model.generate(ids, max_new_tokens=12, min_new_tokens=3)[0, n:].tolist()
        assert len(new) == 4 and new[-1] == eos
