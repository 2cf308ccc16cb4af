"""Bengio et al.'s neural probabilistic language model as a transformers causal LM.

Y. Bengio, R. Ducharme, P. Vincent, C. Jauvin, "A Neural Probabilistic Language Model",
JMLR 3:1137-1155, 2003.

For the n - 1 previous words w_{t-1}, ..., w_{t-n+1} (section 2 of the paper):

    x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))        word features, concatenated   (eq. 1 context)
    y = b + W x + U tanh(d + H x)                           unnormalised log-probabilities
    P(w_t = i | context) = exp(y_i) / sum_j exp(y_j)        softmax

We write the output as one affine map of z = [tanh(d + H x); x]:  y = b + [U W] z.
This is the same function (the output weight is the block matrix [U W]) and it lets any output head
of ``hf_nlm.heads`` replace the softmax, as the paper suggests; with ``hidden_size = 0`` z = x
(the paper's MLP3), with ``direct_connections=False`` z = tanh(d + H x) (W = 0).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutputWithPast

from ...heads import SoftmaxHead
from ...modeling_utils import NLMPreTrainedModel, shifted_targets
from .configuration_nplm import NPLMConfig


class NPLMPreTrainedModel(NLMPreTrainedModel):
    config_class = NPLMConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        r = self.config.initializer_range
        if isinstance(module, nn.Embedding):
            nn.init.uniform_(module.weight, -r, r)
        elif isinstance(module, nn.Linear):
            nn.init.uniform_(module.weight, -r, r)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, SoftmaxHead):
            nn.init.uniform_(module.weight, -r, r)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


class NPLMModel(NPLMPreTrainedModel):
    """The NPLM body: the n - 1 previous tokens -> z = [tanh(d + H x); x] at every position."""

    def __init__(self, config: NPLMConfig) -> None:
        super().__init__(config)
        # C: the |V| x m table of word feature vectors.
        self.C = nn.Embedding(config.vocab_size, config.embedding_size)
        # H and d: the hidden layer (absent when h = 0).
        self.H = nn.Linear(config.context_size * config.embedding_size, config.hidden_size) if config.hidden_size else None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.C

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.C = value

    def contexts(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None) -> torch.LongTensor:
        """The n - 1 token ids each position conditions on, most recent first: shape (B, T, n - 1).

        Position t sees w_t, w_{t-1}, ..., w_{t-n+2} and predicts w_{t+1}. Before the start of the
        input, and where ``attention_mask`` is 0 (left padding), the context holds ``bos_token_id``.
        """
        n_1 = self.config.context_size
        if attention_mask is not None:
            input_ids = input_ids.masked_fill(attention_mask.to(input_ids.device) == 0, self._fill_id())
        if n_1 > 1:
            fill = input_ids.new_full((input_ids.shape[0], n_1 - 1), self._fill_id())
            input_ids = torch.cat([fill, input_ids], dim=1)
        # (B, T, n-1), oldest -> newest, then flipped to the paper's order (w_{t-1} first).
        return input_ids.unfold(1, n_1, 1).flip(-1)

    def _fill_id(self) -> int:
        if self.config.bos_token_id is None:
            raise ValueError(
                f"this NPLM looks at {self.config.context_size} previous tokens but the input is shorter (or padded) "
                "and config.bos_token_id is None, so there is nothing to fill the missing context with; "
                "set config.bos_token_id or give at least context_size tokens"
            )
        return self.config.bos_token_id

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        B, T = input_ids.shape
        x = self.C(self.contexts(input_ids, attention_mask)).reshape(B, T, -1)  # (B, T, (n-1) m)
        parts = []
        if self.H is not None:
            parts.append(torch.tanh(self.H(x)))  # tanh(d + H x)
        if self.config.direct_connections:
            parts.append(x)
        z = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return BaseModelOutput(last_hidden_state=z)


class NPLMForCausalLM(NPLMPreTrainedModel, GenerationMixin):
    """NPLM body + output head (full softmax b + [U W] z by default).

    ``forward(input_ids, labels=input_ids)`` returns the mean NLL of every labelled next token
    (labels are shifted inside; -100 is ignored). In training mode with labels, the |V|-wide
    ``logits`` are not materialised (``logits=None``): the head computes the loss directly.
    """

    def __init__(self, config: NPLMConfig) -> None:
        super().__init__(config)
        self.model = NPLMModel(config)
        # The output layer: lm_head.weight is [U W] (|V| x (h + (n-1) m)), lm_head.bias is b.
        self.lm_head = SoftmaxHead(config.output_input_size, config.vocab_size)
        self.post_init()

    def get_output_embeddings(self):
        return None  # [U W] is not an embedding matrix: nothing to tie or resize with C

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # no key/value cache: each step re-reads the last n - 1 tokens

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        logits_to_keep: int = 0,
        return_dict: bool | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        z = self.model(input_ids, attention_mask=attention_mask).last_hidden_state

        loss = None
        if labels is not None:
            z_sel, targets = shifted_targets(z, labels)
            if targets.numel() == 0:
                raise ValueError("labels hold no target: every label after the shift is -100")
            loss = self.lm_head.nll(z_sel, targets).mean()

        logits = None
        if labels is None or not self.training:
            # generate() asks only for the last position(s): never score positions it will not read.
            z_out = z[:, -logits_to_keep:] if logits_to_keep else z
            logits = self.lm_head(z_out)

        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        # The model is a function of the last n - 1 tokens only; the rest of the prefix is dead weight.
        n_1 = self.config.context_size
        input_ids = input_ids[:, -n_1:]
        if attention_mask is not None:
            attention_mask = attention_mask[:, -n_1:]
        return {"input_ids": input_ids, "attention_mask": attention_mask, "logits_to_keep": 1}


__all__ = ["NPLMForCausalLM", "NPLMModel", "NPLMPreTrainedModel"]
