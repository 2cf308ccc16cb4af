"""A collator for transformers' ``Trainer`` that keeps every sentence end a target.

Our tokenizers use one token, ``<eos>`` (id 1), as eos, bos and pad
(:func:`~hf_nlm.tokenization.wrap_tokenizer`). transformers'
``DataCollatorForLanguageModeling(tokenizer, mlm=False)`` builds the labels by setting every position whose
id equals ``pad_token_id`` to -100, so with our tokenizers it drops every ``<eos>`` from the targets as well
as the padding: a model trained through it never learns where a sentence ends, and nothing says so.
:class:`DataCollatorForCausalLM` decides what is padding by each example's length and attention mask, never
by the id; :func:`check_collator` tells whether a collator keeps the sentence ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .lm import IGNORE_INDEX, bos_token_id, fill_rows, resolve_features

#: Keys of an example that are not extra per-token fields.
_TOKEN_KEYS = ("input_ids", "attention_mask", "labels")


@dataclass
class DataCollatorForCausalLM:
    """Pad examples on the right into one causal-LM batch; every token of an example stays a target.

    Each example holds ``input_ids`` (one sequence), optionally ``attention_mask`` and ``labels`` of the
    same length, and any extra per-token fields our tokenizers produce (a numeracy tokenizer's
    ``token_features``: ``numeral_value``, ``digit_ids``, ...; one row per token). The batch is padded
    to its longest example (rounded up to ``pad_to_multiple_of``): ``input_ids`` with the tokenizer's
    pad id, ``attention_mask`` with 0, extra fields with the field's fill value
    (``tokenizer.token_features.fill``; 0 for a field without one).

    ``labels`` is a copy of ``input_ids`` with -100 exactly where ``attention_mask`` is 0: at the
    padding added here and where an example's own mask is 0. The labels are never found by comparing ids
    with ``pad_token_id``: our tokenizers' pad token is ``<eos>``, so that comparison (what
    ``DataCollatorForLanguageModeling(mlm=False)`` does) would also drop every sentence end from the
    targets. An example that brings its own ``labels`` keeps them, padded with -100. The model shifts
    the labels itself.
    """

    tokenizer: Any
    pad_to_multiple_of: int | None = None

    def __post_init__(self) -> None:
        if self.pad_to_multiple_of is not None and self.pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be >= 1, got {self.pad_to_multiple_of}")

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        examples = list(examples)
        if not examples:
            raise ValueError("cannot collate an empty list of examples")
        keys = set(examples[0])
        if "input_ids" not in keys:
            raise ValueError(f"an example needs 'input_ids', got the keys {sorted(keys)}")
        if any(set(e) != keys for e in examples):
            raise ValueError("every example needs the same keys, "
                             f"got {sorted({tuple(sorted(e)) for e in examples})}")
        rows = [self._example(e) for e in examples]
        width = max(len(r["input_ids"]) for r in rows)
        if self.pad_to_multiple_of is not None:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        fill = getattr(resolve_features(self.tokenizer), "fill", None)
        pad_values = {"input_ids": self._pad_id(), "attention_mask": 0, "labels": IGNORE_INDEX}
        batch = {}
        for name in rows[0]:
            padded = []
            for row in rows:
                values = row[name]
                tail = width - len(values)
                if name in pad_values:
                    padded.append(torch.cat([values, values.new_full((tail,), pad_values[name])]))
                else:
                    padded.append(torch.cat([values, fill_rows(values, tail, fill, name)]))
            batch[name] = torch.stack(padded)
        return batch

    def _example(self, example: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """One example as tensors, with ``attention_mask`` and ``labels`` (-100 where the mask is 0)."""
        ids = torch.as_tensor(example["input_ids"], dtype=torch.long)
        if ids.ndim != 1:
            raise ValueError(f"an example's input_ids must be one sequence, got shape {tuple(ids.shape)}")
        row = {"input_ids": ids}
        mask = example.get("attention_mask")
        row["attention_mask"] = (torch.ones_like(ids) if mask is None
                                 else torch.as_tensor(mask, dtype=torch.long))
        if "labels" in example:
            row["labels"] = torch.as_tensor(example["labels"], dtype=torch.long)
        for name, values in example.items():
            if name not in _TOKEN_KEYS:
                row[name] = torch.as_tensor(np.asarray(values))
        for name, values in row.items():
            if values.ndim == 0 or len(values) != len(ids):
                raise ValueError(f"{name!r} has shape {tuple(values.shape)}, "
                                 f"not one row per token of {len(ids)} input_ids")
        if "labels" not in row:
            row["labels"] = ids.masked_fill(row["attention_mask"] == 0, IGNORE_INDEX)
        return row

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        pad = bos_token_id(self.tokenizer) if pad is None else pad
        if pad is None:
            raise ValueError("the tokenizer has no pad, bos or eos token to pad input_ids with")
        return pad


def check_collator(collator, tokenizer) -> None:
    """Raise ``ValueError`` if ``collator`` does not keep every ``<eos>`` of an example as a target.

    Runs ``collator`` on two examples of different lengths, sentences of one word each followed by
    ``<eos>``, and checks that each real position after the first has its own id as its label. With our
    tokenizers (pad == eos) ``DataCollatorForLanguageModeling(tokenizer, mlm=False)`` fails this check:
    it sets the label of every ``<eos>`` to -100.
    """
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos_token_id")
    special = set(tokenizer.all_special_ids)
    word = next((i for i in range(len(tokenizer)) if i not in special), tokenizer.unk_token_id)
    examples = [[eos, word, eos, word, eos], [eos, word, eos]]
    batch = collator([{"input_ids": ids} for ids in examples])
    if "labels" not in batch:
        raise ValueError(f"{type(collator).__name__} gives no labels (it gave {sorted(batch)})")
    labels = torch.as_tensor(batch["labels"])
    for row, ids in zip(labels, examples, strict=True):
        if row[1 : len(ids)].tolist() != ids[1:]:
            raise ValueError(
                f"{type(collator).__name__} does not keep every token as a target: for input_ids {ids} it "
                f"gives labels {row[: len(ids)].tolist()}. This tokenizer's pad token is its eos token "
                f"({tokenizer.eos_token!r}, id {eos}), so a collator that masks the labels equal to "
                "pad_token_id drops every sentence end from training; use "
                "hf_nlm.data.DataCollatorForCausalLM(tokenizer)"
            )


__all__ = ["DataCollatorForCausalLM", "check_collator"]
