"""What the fixed-window (n-gram) neural LMs share: NPLM (Bengio et al. 2003), LBL and HLBL
(Mnih & Hinton 2007, 2008).

Each of them predicts w_{t+1} from the n - 1 tokens w_t, ..., w_{t-n+2} only, so

* :func:`context_window` gathers those tokens for every position (filling the positions before the
  start of the input, and left padding, with ``bos_token_id``, as an n-gram model pads with <s>);
* :class:`WindowCausalLMMixin` gives their ``XForCausalLM`` classes the same loss / logits
  computation through any output head of :mod:`hf_nlm.heads`, the same ``generate()`` behaviour
  (no key/value cache: each step re-reads the last n - 1 tokens) and ``set_tree`` for tree heads.
"""

from __future__ import annotations

import torch
from transformers.modeling_outputs import CausalLMOutputWithPast

from ..heads import build_head, init_head, tree_config_fields
from ..heads.factory import TREE_FIELDS
from ..modeling_utils import shifted_targets
from ..trees import WordTree


def context_window(
    input_ids: torch.LongTensor,
    attention_mask: torch.Tensor | None,
    context_size: int,
    fill_id: int | None,
    model_name: str = "model",
) -> torch.LongTensor:
    """The n - 1 token ids each position conditions on, most recent first: shape (B, T, n - 1).

    Position t sees w_t, w_{t-1}, ..., w_{t-n+2} and predicts w_{t+1}. Before the start of the
    input, and where ``attention_mask`` is 0 (left padding), the context holds ``fill_id``
    (the config's ``bos_token_id``).
    """
    n_1 = context_size
    needs_fill = n_1 > 1 or (attention_mask is not None and bool((attention_mask == 0).any()))
    if needs_fill and fill_id is None:
        raise ValueError(
            f"this {model_name} looks at {n_1} previous tokens but the input is shorter (or padded) "
            "and config.bos_token_id is None, so there is nothing to fill the missing context with; "
            "set config.bos_token_id or give at least context_size tokens"
        )
    if attention_mask is not None:
        input_ids = input_ids.masked_fill(attention_mask.to(input_ids.device) == 0, fill_id if fill_id is not None else 0)
    if n_1 > 1:
        fill = input_ids.new_full((input_ids.shape[0], n_1 - 1), fill_id)
        input_ids = torch.cat([fill, input_ids], dim=1)
    # (B, T, n-1), oldest -> newest, then flipped to the papers' order (w_{t-1} first).
    return input_ids.unfold(1, n_1, 1).flip(-1)


class WindowCausalLMMixin:
    """Head, loss and generation plumbing of a fixed-window causal LM.

    The class using it defines ``self.model`` (the body, returning the vectors the head reads),
    ``self.lm_head`` (built with :meth:`_build_head`) and ``self.config`` (with ``context_size``,
    ``initializer_range`` and the head fields of :mod:`hf_nlm.heads.factory`).
    """

    def _build_head(self, in_features: int, tree: WordTree | None = None):
        head = build_head(self.config, in_features, tree=tree)
        if tree is not None:
            # The config records the tree's shape so that from_pretrained can rebuild the head.
            for name, value in tree_config_fields(tree).items():
                setattr(self.config, name, value)
        return head

    def set_tree(self, tree: WordTree) -> None:
        """Replace the tree head by a fresh one over ``tree`` (new node vectors q_i, initialised as at
        construction; the body is kept). The config's tree shape fields follow the new tree, so
        ``save_pretrained`` / ``from_pretrained`` keep it. (Mnih & Hinton's (2008) recipe retrains a
        fresh model on the new tree instead: :func:`hf_nlm.models.hlbl.recipe.train_with_data_tree`.)"""
        if self.config.head != "tree":
            raise ValueError(f"set_tree needs a model with head='tree'; this one has head={self.config.head!r}")
        old = self.lm_head
        ref = next(old.parameters())
        for name in TREE_FIELDS:  # the new tree may have another shape than the old one
            setattr(self.config, name, None)
        head = self._build_head(old.in_features, tree=tree)
        init_head(head, self.config.initializer_range)
        self.lm_head = head.to(device=ref.device, dtype=ref.dtype)

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # no key/value cache: each step re-reads the last n - 1 tokens

    def lm_output(
        self, hidden: torch.Tensor, labels: torch.LongTensor | None, logits_to_keep: int = 0
    ) -> CausalLMOutputWithPast:
        """Loss (mean NLL of the shifted labels, -100 ignored) and logits from the body's ``hidden``.

        The loss goes through the head's ``nll`` (a tree head touches only the targets' paths). In
        training mode with labels the |V|-wide logits are not built (``logits=None``). For the split
        and tree heads the logits are already log-probabilities (``log_softmax`` leaves them unchanged).
        """
        loss = None
        if labels is not None:
            h_sel, targets = shifted_targets(hidden, labels)
            if targets.numel() == 0:
                raise ValueError("labels hold no target: every label after the shift is -100")
            loss = self.lm_head.nll(h_sel, targets).mean()

        logits = None
        if labels is None or not self.training:
            # generate() asks only for the last position(s): never score positions it will not read.
            h_out = hidden[:, -logits_to_keep:] if logits_to_keep else hidden
            logits = self.lm_head(h_out)
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        # The model is a function of the last n - 1 tokens only; the rest of the prefix is dead weight.
        n_1 = self.config.context_size
        input_ids = input_ids[:, -n_1:]
        if attention_mask is not None:
            attention_mask = attention_mask[:, -n_1:]
        return {"input_ids": input_ids, "attention_mask": attention_mask, "logits_to_keep": 1}


__all__ = ["WindowCausalLMMixin", "context_window"]
