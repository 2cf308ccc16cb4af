"""Pieces every hf_nlm model shares: the base class and the shifted causal-LM loss."""

from __future__ import annotations

import json
import os

import torch
from transformers import PreTrainedModel


def check_checkpoint_model_type(path: str | os.PathLike, expected: str) -> None:
    """Raise a clear error if the local folder ``path`` holds a checkpoint of another model type.

    transformers only logs a warning in that case and then fills the model with random weights;
    for a user who pointed at the wrong folder that is a silent failure.
    """
    config_file = os.path.join(os.fspath(path), "config.json")
    if not os.path.isfile(config_file):
        return
    try:
        with open(config_file, encoding="utf-8") as f:
            found = json.load(f).get("model_type")
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{config_file}: not a readable JSON config ({err})") from err
    if found != expected:
        raise ValueError(
            f"{config_file} is a checkpoint of model_type={found!r}, but a {expected!r} model was asked for; "
            "load it with transformers.AutoModelForCausalLM (or the class of that model type)"
        )


class NLMPreTrainedModel(PreTrainedModel):
    """Base class of the hf_nlm models: refuses checkpoints of another model type."""

    # Our forward() computes the mean loss itself; Trainer must not rescale it under DDP.
    accepts_loss_kwargs = False

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        if pretrained_model_name_or_path is not None and os.path.isdir(pretrained_model_name_or_path):
            check_checkpoint_model_type(pretrained_model_name_or_path, cls.config_class.model_type)
        return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)

    def get_output_embeddings(self):
        # Our heads are not nn.Linear (and NPLM's [U W] is not an embedding matrix): transformers must not
        # resize or tie them as one. Ties are declared by _tied_weights_keys; resize_token_embeddings below
        # resizes the heads itself.
        return None

    def resize_token_embeddings(
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ):
        """transformers' ``resize_token_embeddings`` (the input embedding), then the output head.

        Softmax and split heads follow the new vocabulary (new words at the end, their output rows the
        mean of the old ones with ``mean_resizing``; a tied head stays tied). A tree head has no place
        for new words in its tree: build a new tree over the new vocabulary instead.
        """
        head = getattr(self, "lm_head", None)
        resizing = new_num_tokens is not None or pad_to_multiple_of is not None
        if resizing and head is not None and not hasattr(head, "resize"):
            raise ValueError(
                f"{type(head).__name__} cannot follow a resized vocabulary (its word tree covers the old words); "
                "build a tree over the new vocabulary and a new model instead"
            )
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if resizing and head is not None:
            # A tied head weight is already the new embedding (super() re-tied it); resize() keeps it.
            head.resize(embeddings.num_embeddings, mean_init=mean_resizing)
        return embeddings

    def generate(self, *args, **kwargs):
        """``transformers``' ``generate()``, with the beam counts checked first: a ``num_beams`` of 0
        would otherwise fail deep inside beam search with a ZeroDivisionError."""
        for name in ("num_beams", "num_return_sequences"):
            value = kwargs.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"generate(): {name} must be an integer >= 1, got {value!r}")
        return super().generate(*args, **kwargs)


def shifted_targets(
    hidden: torch.Tensor, labels: torch.Tensor | None = None, shift_labels: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pair the hidden state at position t with the label at t + 1, keeping labels != -100.

    ``labels`` follow the transformers convention (the same positions as ``input_ids``, shifted here);
    ``shift_labels`` are already aligned (``shift_labels[:, t]`` is the target of position t), which
    stateful BPTT needs so that a chunk's last position predicts a target too (``hf_nlm.data.stream``).

    Returns ``(hidden_selected (N, D), targets (N,))``. Selecting before the output layer means
    positions that carry no target (context prefixes, padding) never reach the |V|-wide softmax.
    """
    if (labels is None) == (shift_labels is None):
        raise ValueError("give exactly one of labels (shifted inside) and shift_labels (already aligned)")
    if shift_labels is None:
        hidden, targets = hidden[:, :-1], labels[:, 1:]
    else:
        if shift_labels.shape != hidden.shape[:2]:
            raise ValueError(f"shift_labels has shape {tuple(shift_labels.shape)}, expected {tuple(hidden.shape[:2])}")
        targets = shift_labels
    targets = targets.to(hidden.device)
    keep = targets != -100
    return hidden[keep], targets[keep]
