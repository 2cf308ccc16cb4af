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

``config.head`` picks the output layer: ``"softmax"`` (the paper's), ``"split"`` (split softmax), or
``"tree"``: the hierarchical NPLM of F. Morin, Y. Bengio, "Hierarchical Probabilistic Neural Network
Language Model", AISTATS 2005, where P(w | context) = prod_i sigmoid(+-(z . q_i + b_i)) along w's path
in a binary word tree (build it with ``NPLMForCausalLM(config, tree=tree)``).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput

from ...modeling_utils import NLMPreTrainedModel
from ...trees import WordTree
from ..window import WindowCausalLMMixin, WindowModelMixin
from .configuration_nplm import NPLMConfig


class NPLMPreTrainedModel(NLMPreTrainedModel):
    config_class = NPLMConfig

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)  # C and the head: Uniform(+-r), zero biases
        if isinstance(module, nn.Linear):  # H and d
            init.uniform_(module.weight, -self.config.initializer_range, self.config.initializer_range)
            if module.bias is not None:
                init.zeros_(module.bias)


class NPLMModel(WindowModelMixin, NPLMPreTrainedModel):
    """The NPLM body: the n - 1 previous tokens -> z = [tanh(d + H x); x] at every position."""

    def __init__(self, config: NPLMConfig) -> None:
        super().__init__(config)
        # C: the |V| x m table of word feature vectors.
        self.C = nn.Embedding(config.vocab_size, config.embedding_size)
        # H and d: the hidden layer (absent when h = 0).
        self.H = (nn.Linear(config.context_size * config.embedding_size, config.hidden_size)
                  if config.hidden_size else None)
        self.dropout = nn.Dropout(config.dropout)
        self.post_init()

    def output_input(self, x: torch.Tensor) -> torch.Tensor:
        """z = [tanh(d + H x); x] of the concatenated word features x (..., (n - 1) m)."""
        parts = []
        if self.H is not None:
            parts.append(torch.tanh(self.H(x)))  # tanh(d + H x)
        if self.config.direct_connections:
            parts.append(x)
        z = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return self.dropout(z) if self.training else z  # no module call per generated token

    def window_output(self, windows: torch.Tensor) -> torch.Tensor:
        """z of the context windows' word features ``windows`` (B, T, n - 1, m)."""
        return self.output_input(windows.flatten(2))

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        return_dict: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        """z at every position; with ``output_hidden_states``, also ``hidden_states = (x, z)``: the
        concatenated word features and the vector the output layer reads."""
        x = self.C(self.contexts(input_ids, attention_mask)).flatten(2)  # (B, T, (n-1) m)
        z = self.output_input(x)
        hidden_states = (x, z) if self._hidden_states(output_hidden_states) else None
        return self._output(BaseModelOutput(last_hidden_state=z, hidden_states=hidden_states), return_dict)


class NPLMForCausalLM(WindowCausalLMMixin, NPLMPreTrainedModel, GenerationMixin):
    """NPLM body + output head (full softmax b + [U W] z by default; ``config.head`` picks another).

    ``forward(input_ids, labels=input_ids)`` returns the mean NLL of every labelled next token
    (labels are shifted inside; -100 is ignored). In training mode with labels, the |V|-wide
    ``logits`` are not materialised (``logits=None``): the head computes the loss directly.

    Args:
        config: the :class:`NPLMConfig`.
        tree: with ``config.head == "tree"``, the word tree of the head (a
            :class:`~hf_nlm.trees.WordTree`; its shape is written into the config). Not needed when the
            config already records a tree shape (``from_pretrained`` then loads the saved tree).
    """

    def __init__(self, config: NPLMConfig, tree: WordTree | None = None, **head_kwargs) -> None:
        super().__init__(config)
        self.model = NPLMModel(config)
        # The output layer: lm_head.weight is [U W] (|V| x (h + (n-1) m)), lm_head.bias is b
        # (for a tree head: the node vectors q_i and biases b_i).
        self.lm_head = self._build_head(config.output_input_size, tree=tree, **head_kwargs)
        self.post_init()


__all__ = ["NPLMForCausalLM", "NPLMModel", "NPLMPreTrainedModel"]
