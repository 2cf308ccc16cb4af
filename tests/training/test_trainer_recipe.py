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


def train_args(tmp_path) -> TrainingArguments:
    return TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=2,
                             learning_rate=0.01, report_to=[], use_cpu=True, save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, seed=0)


@pytest.mark.parametrize("name", ["nplm", "awd_lstm"])
def test_model_refuses_the_stock_collator_in_training_and_trains_with_ours(name, tokenizer, tmp_path):
    """A user's own Trainer with the stock collator fails at the first step, naming our collator; ours
    trains. The rows are the documented one-sentence examples, whose only dropped target is the last
    <eos>."""
    train = Dataset.from_list(examples(tokenizer))
    model = tiny_model(name, len(tokenizer))
    stock = Trainer(model=model, args=train_args(tmp_path), train_dataset=train,
                    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    with pytest.raises(ValueError, match=r"drop the sentence ends.*DataCollatorForCausalLM\(tokenizer\)"):
        stock.train()
    before = [p.detach().clone() for p in model.parameters()]
    Trainer(model=model, args=train_args(tmp_path), train_dataset=train,
            data_collator=DataCollatorForCausalLM(tokenizer)).train()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


class PromptMaskingCollator(DataCollatorForCausalLM):
    """Our collator, then label -100 on each row's prompt: its first sentence, with the <eos> that ends it."""

    def __call__(self, examples):
        batch = super().__call__(examples)
        for ids, labels in zip(batch["input_ids"], batch["labels"], strict=True):
            labels[: ids[1:].tolist().index(self.tokenizer.eos_token_id) + 2] = -100
        return batch


def test_a_masked_prompt_trains(tokenizer, tmp_path):
    """Two sentences a row, the first one the prompt: its inner <eos> is masked with the prompt, which
    the model does not take for the stock collator's work (the masked positions precede every target)."""
    eos = tokenizer.eos_token_id
    lines = [row["input_ids"] for row in examples(tokenizer)]
    rows = [{"input_ids": [*a, *b[1:]]} for a, b in zip(lines[:-1], lines[1:], strict=True)]
    collator = PromptMaskingCollator(tokenizer)
    batch = collator(rows[:2])
    for prompt, row, ids, labels in zip(lines, rows, batch["input_ids"], batch["labels"], strict=False):
        end, length = len(prompt), len(row["input_ids"])
        assert ids[end - 1] == eos and (labels[:end] == -100).all()
        assert torch.equal(labels[end:length], ids[end:length])
    model = tiny_model("nplm", len(tokenizer))
    Trainer(model=model, args=train_args(tmp_path), train_dataset=Dataset.from_list(rows),
            data_collator=collator).train()


def stock_batch(tokenizer, rows, padding_side="right"):
    tokenizer.padding_side = padding_side
    try:
        return DataCollatorForLanguageModeling(tokenizer, mlm=False)([{"input_ids": r} for r in rows])
    finally:
        tokenizer.padding_side = "right"


def test_which_rows_look_like_the_stock_collators(tokenizer):
    """drops_sentence_ends on hand-made rows (eos 1, words 5-9, -100 written X)."""
    from hf_nlm.data.lm import group_into_blocks
    from hf_nlm.modeling_utils import drops_sentence_ends

    X = -100

    def flagged(ids, labels, mask=None):
        ids, labels = torch.tensor(ids), torch.tensor(labels)
        return drops_sentence_ends(ids, labels, None if mask is None else torch.tensor(mask), 1).tolist()

    # The stock collator, right and left padding: the last <eos> of the short row is caught too.
    for side in ("right", "left"):
        b = stock_batch(tokenizer, [[1, 5, 6, 1, 7, 1], [1, 5, 1]], side)
        flags = drops_sentence_ends(b["input_ids"], b["labels"], b["attention_mask"], 1)
        assert flags.tolist() == [True, True]
    # Without a mask, trailing untargeted <eos> read as padding: only an inner one is caught.
    assert flagged([[1, 5, 1, 6, 1, 1]], [[X, 5, X, 6, X, X]]) == [True]
    assert flagged([[1, 5, 6, 1, 1]], [[X, 5, 6, X, X]]) == [False]
    # A masked prompt, masked dialogue turns: other tokens lack a target too, so they are not flagged.
    assert flagged([[1, 5, 1, 6, 7, 1]], [[X, X, X, 6, 7, 1]], [[1] * 6]) == [False]
    assert flagged([[1, 5, 1, 6, 1, 7, 1]], [[X, X, X, 6, 1, X, X]], [[1] * 7]) == [False]
    # A prompt masked and then every <eos> of the answer masked as well: caught.
    assert flagged([[1, 5, 1, 6, 1, 7, 1]], [[X, X, X, 6, X, 7, X]], [[1] * 7]) == [True]
    # The library's own blocks: context labels -100 in front, padding behind, every <eos> a target.
    blocks = group_into_blocks(torch.tensor([5, 1, 6, 7, 1, 8, 1]), block_size=3, context_size=2,
                               bos_token_id=1)
    assert not drops_sentence_ends(blocks["input_ids"], blocks["labels"], None, 1).any()


def test_the_check_runs_on_labels_in_training_only(tokenizer):
    """Evaluation, and targets given as shift_labels (already aligned), are left as they are."""
    b = stock_batch(tokenizer, [[1, 5, 6, 1, 7, 1], [1, 5, 1]])
    model = tiny_model("awd_lstm", len(tokenizer))
    with pytest.raises(ValueError, match="drop the sentence ends"):
        model.train()(**b)
    shifted = torch.cat([b["labels"][:, 1:], torch.full_like(b["labels"][:, :1], -100)], dim=1)
    model.train()(b["input_ids"], attention_mask=b["attention_mask"], shift_labels=shifted)
    model.eval()(**b)
