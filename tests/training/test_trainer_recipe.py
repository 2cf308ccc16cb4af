"""Training with transformers' Trainer: our tokenizers use ``<eos>`` as pad, so the stock causal-LM collator
drops every sentence end from the targets; DataCollatorForCausalLM keeps them, and the recipe that README.md
and docs/training.md show runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM, NPLMConfig, NPLMForCausalLM
from hf_nlm.data import DataCollatorForCausalLM, check_collator
from hf_nlm.tokenization import NUMERAL_FEATURES, train_numeracy_tokenizer, train_word_level_tokenizer

ROOT = Path(__file__).resolve().parents[2]
# The pages that show the recipe under a heading "Train with transformers' Trainer": the same block in each.
RECIPE_PAGES = (ROOT / "README.md", ROOT / "docs" / "training.md")
LINES = ["the cat sat on the mat", "a dog sat", "the dog ate the cat food", "a cat", "the mat sat on a dog"]


@pytest.fixture(scope="module")
def tokenizer():
    return train_word_level_tokenizer(LINES)


def examples(tokenizer, lines=LINES) -> list[dict[str, list[int]]]:
    """Each line as the documented recipe writes it: ``<eos>``, the words, ``<eos>``."""
    eos = tokenizer.eos_token_id
    ids = tokenizer(lines, add_special_tokens=False)["input_ids"]
    return [{"input_ids": [eos, *line, eos]} for line in ids]


def test_stock_collator_drops_every_eos_label(tokenizer):
    """The problem: pad == eos, and DataCollatorForLanguageModeling(mlm=False) masks the labels equal to
    pad."""
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    batch = DataCollatorForLanguageModeling(tokenizer, mlm=False)(examples(tokenizer)[:2])
    eos_positions = batch["input_ids"] == tokenizer.eos_token_id
    assert (batch["labels"][eos_positions] == -100).all()
    with pytest.raises(ValueError, match="drops every sentence end"):
        check_collator(DataCollatorForLanguageModeling(tokenizer, mlm=False), tokenizer)


def test_collator_keeps_every_eos_and_masks_exactly_the_padding(tokenizer):
    eos = tokenizer.eos_token_id
    first, second = [eos, 5, 3, eos, 4, eos], [eos, 6, eos]
    batch = DataCollatorForCausalLM(tokenizer)([{"input_ids": first}, {"input_ids": second}])
    assert batch["input_ids"].tolist() == [first, [*second, eos, eos, eos]]
    assert batch["attention_mask"].tolist() == [[1] * 6, [1, 1, 1, 0, 0, 0]]
    assert batch["labels"].tolist() == [first, [*second, -100, -100, -100]]
    check_collator(DataCollatorForCausalLM(tokenizer), tokenizer)


def test_collator_pads_to_a_multiple_and_reads_the_attention_mask(tokenizer):
    eos = tokenizer.eos_token_id
    given = [{"input_ids": [eos, 5, eos], "attention_mask": [1, 1, 1]},
             {"input_ids": [eos, eos, 6], "attention_mask": [0, 1, 1]}]  # left-padded by its maker
    batch = DataCollatorForCausalLM(tokenizer, pad_to_multiple_of=4)(given)
    assert batch["input_ids"].shape == (2, 4)
    assert batch["labels"].tolist() == [[eos, 5, eos, -100], [-100, eos, 6, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [0, 1, 1, 0]]


def test_collator_pads_extra_fields_with_their_fill_value():
    tokenizer = train_numeracy_tokenizer(["it cost 12 dollars", "3.5 kg"])
    text = "it cost 12 dollars"
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    fields = NUMERAL_FEATURES(text, [tuple(s) for s in encoded["offset_mapping"]])
    long = {"input_ids": encoded["input_ids"], **{k: list(v) for k, v in fields.items()}}
    short = {k: v[:2] for k, v in long.items()}
    batch = DataCollatorForCausalLM(tokenizer)([long, short])
    assert batch["labels"][1].tolist() == [*long["input_ids"][:2], -100, -100]
    for name, fill in NUMERAL_FEATURES.fill.items():
        assert batch[name].shape[:2] == (2, 4)
        torch.testing.assert_close(batch[name][0], torch.as_tensor(fields[name]))
        assert (batch[name][1, 2:] == fill).all()


def test_collator_refuses_fields_that_are_not_one_row_per_token(tokenizer):
    with pytest.raises(ValueError, match="one row per token"):
        DataCollatorForCausalLM(tokenizer)([{"input_ids": [1, 5, 1], "attention_mask": [1, 1]}])


def tiny_model(name: str, vocab_size: int):
    torch.manual_seed(0)
    if name == "nplm":
        return NPLMForCausalLM(NPLMConfig(vocab_size=vocab_size, context_size=2, embedding_size=6,
                                          hidden_size=5))
    return AWDLSTMForCausalLM(AWDLSTMConfig(vocab_size=vocab_size, embedding_size=6, hidden_size=7,
                                            num_hidden_layers=2))


def target_nll(model, row: dict[str, list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """One example alone, unpadded: each target's id and its negative log-likelihood under ``model``."""
    ids = torch.tensor([row["input_ids"]])
    with torch.no_grad():
        log_p = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    targets = ids[0, 1:]
    return targets, -log_p.gather(-1, targets[:, None]).squeeze(-1)


@pytest.mark.parametrize("name", ["nplm", "awd_lstm"])
def test_trainer_loss_is_the_models_loss_over_every_token_of_each_example(name, tokenizer, tmp_path):
    """Trainer.evaluate() with DataCollatorForCausalLM reports, for batches of two examples of different
    lengths, the mean over batches of the NLL of all their targets (every <eos> included), computed here
    from each example alone, without padding; the stock collator's eval_loss is that of the other targets
    only."""
    model = tiny_model(name, len(tokenizer)).eval()
    rows = examples(tokenizer)[:4]
    args = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=2, report_to=[],
                             use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, eval_dataset=Dataset.from_list(rows),
                      data_collator=DataCollatorForCausalLM(tokenizer))
    eval_loss = trainer.evaluate()["eval_loss"]
    trainer.data_collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    stock_loss = trainer.evaluate()["eval_loss"]
    every, without_eos = [], []
    for pair in (rows[0:2], rows[2:4]):
        targets, nll = map(torch.cat, zip(*(target_nll(model, row) for row in pair), strict=True))
        every.append(nll.mean())
        without_eos.append(nll[targets != tokenizer.eos_token_id].mean())
    assert eval_loss == pytest.approx(torch.stack(every).mean().item(), rel=1e-5)
    assert stock_loss == pytest.approx(torch.stack(without_eos).mean().item(), rel=1e-5)


def documented_recipe(page: Path) -> str:
    """The first python block of the page's section "Train with transformers' Trainer" (any heading level)."""
    section = re.split(r"^#+ Train with transformers' Trainer$", page.read_text(), maxsplit=1, flags=re.M)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_and_docs_show_the_same_recipe():
    assert documented_recipe(RECIPE_PAGES[0]) == documented_recipe(RECIPE_PAGES[1])


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_documented_recipe_runs(tmp_path, monkeypatch):
    page = RECIPE_PAGES[0]
    code = documented_recipe(page)
    corpus = 'load_brown()["train"]["text"]'
    assert corpus in code and "min_frequency=4" in code
    code = code.replace(corpus, repr(LINES * 4)).replace("min_frequency=4", "min_frequency=1")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, str(page), "exec"), namespace)
    batch = namespace["collator"](namespace["train"].select(range(2)).to_list())
    eos = namespace["tokenizer"].eos_token_id
    assert (batch["labels"][batch["input_ids"] == eos] != -100).sum() == 4  # two sentence boundaries each
    assert (tmp_path / "runs" / "nplm-trainer").is_dir()
