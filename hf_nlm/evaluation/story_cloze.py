"""Zero-shot Story Cloze Test (Mostafazadeh et al. 2016) with a causal LM: each ending scored by its
log-probability given the context, the higher wins (the ``story_cloze`` metric compares the scores)."""

from __future__ import annotations

import numpy as np
import torch

from ..data.lm import IGNORE_INDEX, bos_token_id, fill_rows, resolve_features
from ..metrics.story_cloze.story_cloze import StoryCloze
from .scoring import batch_log_probs, eval_mode


def story_cloze_accuracy(model, tokenizer, dataset, batch_size: int = 16, device=None,
                         context_fn=None) -> dict:
    """Story Cloze accuracy of a causal LM: each ending scored by ``log p(ending | context)``.

    The input of ending ``e`` of an example is ``[bos] + tokens(context) + tokens(" " + e)``: the
    beginning-of-text token (our tokenizers' ``<eos>``, which starts every line of a training stream),
    the context (the four sentences joined by spaces, or ``context_fn(example)``), then the ending,
    tokenized on its own with a leading space (what a BPE tokenizer gives for a continuation; the same
    as tokenizing the joined text for a whitespace tokenizer). The score is the sum of the ending
    tokens' log-probabilities, each given everything before it; the length-normalised score divides
    it by the ending's number of tokens. Sequences are sorted by length and right-padded into batches
    of ``batch_size``; no attention mask is passed, as padding after a causal model's last scored
    token cannot change the scores, so batching is exact. Log-probabilities come from
    :func:`hf_nlm.evaluation.scoring.batch_log_probs` (the output head's exact ``-nll`` for models of this
    package, the logits' log-softmax for any other transformers causal LM). A tokenizer with per-token
    fields (``token_features``: the numeracy tokenizer's numeral value, precision and digits) has them
    computed for the context and each ending and handed to the model, so a numeracy LM with an
    open-vocabulary numeral branch scores each numeral as itself, not as ``<unk_num>``.

    Args:
        model: a causal LM (``AutoModelForCausalLM``-like: ``model(input_ids=...)`` returns logits).
        tokenizer: its tokenizer.
        dataset: rows with ``sentences`` (the context), ``endings`` and ``label`` (0-based), as
            :func:`hf_nlm.data.load_story_cloze` returns.
        batch_size: sequences (two per example) per forward pass.
        device: where to run (default: the model's device).
        context_fn: ``example -> str`` building the context text (e.g. a storyline prompt).

    Returns:
        ``accuracy`` (by summed log-probability), ``accuracy_length_normalized``, ``num_examples``,
        ``num_ties``, ``ending_log_probs`` (per example, the summed log-probability of each ending)
        and ``ending_num_tokens``.
    """
    # A tokenizer with per-token fields (the numeracy tokenizer's numeral value, precision and digits)
    # gives them to the model, so that an open-vocabulary numeral branch scores each numeral as itself.
    features = resolve_features(tokenizer)

    def encode(text: str) -> tuple[list[int], dict[str, torch.Tensor]]:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=features is not None)
        if features is None:
            return encoded["input_ids"], {}
        fields = features(text, encoded["offset_mapping"])
        return encoded["input_ids"], {name: torch.as_tensor(np.asarray(v)) for name, v in fields.items()}

    def padded(values: torch.Tensor, name: str, length: int) -> torch.Tensor:  # the field's fill value after
        return torch.cat([values, fill_rows(values, length - len(values), features.fill, name)])

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    examples = list(dataset)
    if not examples:
        raise ValueError("story_cloze_accuracy got an empty dataset")
    width = len(examples[0].get("endings", ()))  # endings per example: the same for all
    bos = bos_token_id(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    sequences, sequence_fields, ending_lengths = [], [], []
    for i, example in enumerate(examples):
        missing = [c for c in ("endings", "label") + (() if context_fn else ("sentences",))
                   if c not in example]
        if missing:
            raise KeyError(f"story_cloze_accuracy: example {i} has no {', '.join(missing)} "
                           f"(columns: {', '.join(example)})")
        if len(example["endings"]) != width or width < 2:
            raise ValueError(f"story_cloze_accuracy: example {i} has {len(example['endings'])} endings, "
                             f"expected {max(width, 2)} like the first example")
        context = context_fn(example) if context_fn else " ".join(example["sentences"])
        context_ids, context_fields = encode(context)
        if bos is not None:
            context_ids = [bos] + context_ids
            context_fields = {name: torch.cat([fill_rows(v, 1, features.fill, name), v])
                              for name, v in context_fields.items()}
        if not context_ids:
            raise ValueError(f"story_cloze_accuracy: example {i} has an empty context and the tokenizer "
                             "no bos token")
        for k, ending in enumerate(example["endings"]):
            ending_ids, ending_fields = encode(" " + ending)
            if not ending_ids:
                raise ValueError(f"story_cloze_accuracy: ending {k + 1} of example {i} has no token: "
                                 f"{ending!r}")
            sequences.append(context_ids + ending_ids)
            sequence_fields.append({name: torch.cat([context_fields[name], v])
                                    for name, v in ending_fields.items()})
            ending_lengths.append(len(ending_ids))

    device = torch.device(device) if device is not None else next(model.parameters()).device
    totals = torch.zeros(len(sequences), dtype=torch.float64)
    order = sorted(range(len(sequences)), key=lambda j: len(sequences[j]))
    with eval_mode(model), torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            longest = max(len(sequences[j]) for j in rows)
            input_ids = torch.full((len(rows), longest), pad, dtype=torch.long)
            labels = torch.full((len(rows), longest), IGNORE_INDEX, dtype=torch.long)
            fields = {name: torch.stack([padded(sequence_fields[j][name], name, longest) for j in rows])
                      for name in sequence_fields[rows[0]]}
            for r, j in enumerate(rows):
                seq, n = sequences[j], ending_lengths[j]
                input_ids[r, : len(seq)] = torch.tensor(seq)
                labels[r, len(seq) - n : len(seq)] = torch.tensor(seq[-n:])
            batch = {"input_ids": input_ids.to(device), "labels": labels.to(device),
                     **{name: values.to(device) for name, values in fields.items()}}
            log_probs, _ = batch_log_probs(model, batch, use_cache=False)
            # batch_log_probs returns the labelled targets in row-major order: row r's n_r endings tokens.
            for j, piece in zip(rows, torch.split(log_probs.double(), [ending_lengths[j] for j in rows]),
                                strict=True):
                totals[j] = piece.sum()

    summed = totals.view(len(examples), width)
    lengths = torch.tensor(ending_lengths, dtype=torch.float64).view(len(examples), width)
    references = [int(example["label"]) for example in examples]
    metric = StoryCloze(keep_in_memory=True)
    by_sum = metric.compute(predictions=summed.tolist(), references=references)
    by_mean = metric.compute(predictions=(summed / lengths).tolist(), references=references)
    return {
        "accuracy": by_sum["accuracy"],
        "accuracy_length_normalized": by_mean["accuracy"],
        "num_examples": len(examples),
        "num_ties": by_sum["num_ties"],
        "ending_log_probs": summed.tolist(),
        "ending_num_tokens": lengths.long().tolist(),
    }
