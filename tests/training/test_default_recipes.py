"""The default recipe of every model type x head passes the training-memory check on this machine, and trains.

The check runs at the recipe's sizes (``MODEL_TYPES[t].recipes["default"]``: its model fields and
``TrainingConfig.for_model``) over a vocabulary of a text of about a million words; the training runs through
``train_lm``, two steps at tiny sizes."""

from __future__ import annotations

import math
import random

import pytest
from datasets import Dataset, DatasetDict

from hf_nlm.models import MODEL_TYPES
from hf_nlm.tokenization import train_numeracy_tokenizer, train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, train_lm
from hf_nlm.training.memory import check_training_memory
from hf_nlm.training.run import run_heads
from hf_nlm.trees import random_tree

#: (model type, head): every head a run builds (``run_heads``); the story seq2seq model's by its stage of
#: plan-and-write instead, whose lengths differ.
CASES = (*((t, h) for t in MODEL_TYPES if MODEL_TYPES[t].seq2seq_lm_class is None for h in run_heads(t)),
         ("story_seq2seq", "storyline"), ("story_seq2seq", "story"))
#: The vocabulary of the check: a text of about a million words with words seen once merged (Penn Treebank's
#: is 10,000); the numeracy LM's recipe caps it at 5,000.
CHECK_VOCAB = 10_000
#: (source, target) tokens of a ROCStories pair at each stage: title -> storyline, and
#: "title <sep> storyline" -> story.
STAGE_LENGTHS = {"storyline": (6, 12), "story": (20, 56)}


def lines(num: int, numerals: bool, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(40)]
    return [" ".join(rng.choices(words, k=8) + ([str(rng.randint(1, 2000)), f"{rng.random() * 10:.1f}"]
                                                 if numerals else [])) for _ in range(num)]


def data_for(model_type: str, seed: int = 0) -> DatasetDict:
    if model_type == "story_seq2seq":
        def pairs(num, seed):
            text = lines(num, False, seed)
            return Dataset.from_dict({"source": [" ".join(t.split()[:3]) for t in text], "target": text})

        return DatasetDict({"train": pairs(24, seed), "validation": pairs(4, seed + 1)})
    numerals = model_type == "numeracy_lm"
    return DatasetDict({"train": Dataset.from_dict({"text": lines(60, numerals, seed)}),
                        "validation": Dataset.from_dict({"text": lines(8, numerals, seed + 1)})})


def make_config(model_type: str, head: str, tokenizer, vocab_size: int, **sizes):
    """The default recipe's config for ``head`` over ``vocab_size`` ids, with ``sizes`` over its sizes."""
    fields = {**MODEL_TYPES[model_type].recipe().model, **sizes}
    if model_type == "numeracy_lm":
        fields.update(numeral_strategy=head, numeral_vocab=tokenizer.numeral_vocab)
    elif model_type == "story_seq2seq":
        fields["decoder_start_token_id"] = tokenizer.eos_token_id
    else:
        fields["head"] = head
    if head == "split":
        fields["cutoffs"] = [vocab_size // 4, vocab_size // 2]
    if head == "tree":
        fields["tie_word_embeddings"] = False
    eos = tokenizer.eos_token_id
    config = MODEL_TYPES[model_type].config_class(vocab_size=vocab_size, bos_token_id=eos, eos_token_id=eos,
                                                  pad_token_id=eos, **fields)
    return config, (random_tree(vocab_size) if head == "tree" else None)


@pytest.mark.parametrize(("model_type", "head"), CASES)
def test_the_default_recipe_passes_the_memory_check_and_trains(model_type, head, tmp_path):
    data = data_for(model_type)
    if model_type == "numeracy_lm":
        tokenizer = train_numeracy_tokenizer(data["train"]["text"])
    elif model_type == "story_seq2seq":
        tokenizer = train_word_level_tokenizer(list(data["train"]["source"]) + list(data["train"]["target"]))
    else:
        tokenizer = train_word_level_tokenizer(data["train"]["text"])
    model_type_ = MODEL_TYPES[model_type]
    stage = dict(zip(("max_source_length", "max_target_length"), STAGE_LENGTHS[head], strict=True)) \
        if model_type == "story_seq2seq" else {}

    # The check, at the recipe's sizes.
    check_vocab = model_type_.recipe().tokenizer.get("vocab_size", CHECK_VOCAB)
    config, tree = make_config(model_type, head, tokenizer, check_vocab)
    recipe_training = TrainingConfig.for_model(model_type, output_dir=str(tmp_path / "run"), **stage)
    estimate = check_training_memory(model_type_.lm_class, config, recipe_training, tree=tree)
    assert estimate is not None and estimate.parameters > 0 and estimate.activation_bytes > 0

    # Two steps of training through train_lm, at tiny sizes.
    sizes = {name: 16 for name in ("embedding_size", "hidden_size") if name in config.to_dict()}
    config, tree = make_config(model_type, head, tokenizer, len(tokenizer), **sizes)
    model = model_type_.lm_class(config, tree=tree)
    training = TrainingConfig.for_model(model_type, output_dir=str(tmp_path / "run"), block_size=8,
                                        batch_size=2, eval_batch_size=4, max_steps=2, progress_bar=False,
                                        eval_test=False)
    results = train_lm(model, tokenizer, data, training)
    assert results["global_step"] == 2 and math.isfinite(results["validation"]["perplexity"])
