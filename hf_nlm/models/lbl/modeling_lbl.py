"""Mnih & Hinton's log-bilinear language model (LBL) as a transformers causal LM.

A. Mnih, G. Hinton, "Three New Graphical Models for Statistical Language Modelling", ICML 2007
(sec. 3.3, the log-bilinear model); A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed
Language Model", NIPS 2008 (sec. 2, eq. 1-2).

Every word w has a real-valued feature vector r_w, a row of the |V| x D table R. For the n - 1
previous words w_{t-1}, ..., w_{t-n+1} the model *predicts* the feature vector of the next word by
a linear combination of the context words' feature vectors,

    r_hat = sum_{i=1}^{n-1} C_i r_{w_{t-i}}                              (eq. 1 of the 2008 paper)

with one D x D matrix C_i per context position (``diagonal_context=True``: diagonal C_i, stored as
vectors c_i, r_hat = sum_i c_i * r_{w_{t-i}}, linear in D). The next word's distribution scores each
word by how well its feature vector matches the prediction:

    P(w_t = w | context) = exp(r_hat . r_w + b_w) / sum_j exp(r_hat . r_j + b_j)   (eq. 2)

The same table R serves the context words and the predicted word: ``lm_head.weight`` is tied to
``model.R.weight`` (``tie_word_embeddings=True``) and ``lm_head.bias`` is b. Any head of
``hf_nlm.heads`` may replace the softmax (``config.head``); with a tree head this is the HLBL
(:mod:`hf_nlm.models.hlbl`).
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
from .configuration_lbl import LBLConfig


class LBLPreTrainedModel(NLMPreTrainedModel):
    config_class = LBLConfig

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)  # R and the head: Uniform(+-r), zero biases
        if isinstance(module, LBLModel):  # the position matrices C_i
            init.uniform_(module.C, -self.config.initializer_range, self.config.initializer_range)


class LBLModel(WindowModelMixin, LBLPreTrainedModel):
    """The LBL body: the n - 1 previous words -> the predicted feature vector r_hat at every position.

    Parameters: ``R`` (the |V| x D feature table, an ``nn.Embedding``) and ``C`` (the position
    matrices: (n-1, D, D), or (n-1, D) for diagonal C_i). ``C[i - 1]`` acts on word w_{t-i}.
    """

    embedding_attr = "R"

    def __init__(self, config: LBLConfig) -> None:
        super().__init__(config)
        n_1, D = config.context_size, config.hidden_size
        self.R = nn.Embedding(config.vocab_size, D)
        self.C = nn.Parameter(torch.empty((n_1, D) if config.diagonal_context else (n_1, D, D)))
        self.post_init()

    def window_output(self, r: torch.Tensor) -> torch.Tensor:
        """r_hat = sum_i C_i r_{w_{t-i}} of the context windows' feature vectors ``r`` (B, T, n - 1, D)."""
        if self.config.diagonal_context:
            return (r * self.C).sum(dim=2)  # sum_i c_i * r_{w_{t-i}}
        return torch.einsum("btid,ied->bte", r, self.C)

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        return_dict: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        """r_hat at every position; with ``output_hidden_states``, also ``hidden_states = (r_{w_t}, r_hat)``:
        the feature vectors of the input words (``<bos>``'s at left padding), from which the context windows
        are cut, and the predicted ones."""
        # (B, T, D): r_{w_t}; (B, T, n-1, D): r_{w_{t-i}}
        r_w, r = self.context_vectors(input_ids, attention_mask)
        r_hat = self.window_output(r)
        hidden_states = (r_w, r_hat) if self._hidden_states(output_hidden_states) else None
        return self._output(BaseModelOutput(last_hidden_state=r_hat, hidden_states=hidden_states),
                            return_dict)


class LBLForCausalLM(WindowCausalLMMixin, LBLPreTrainedModel, GenerationMixin):
    """LBL body + output head: P(w | context) = softmax(r_hat . r_w + b_w) with the input table R.

    ``forward(input_ids, labels=input_ids)`` returns the mean NLL of every labelled next token
    (labels are shifted inside; -100 is ignored); in training mode the |V|-wide logits are not built.

    Args:
        config: the :class:`LBLConfig`.
        tree: with ``config.head == "tree"``, the word tree of the head (its shape is written into the
            config). Not needed when the config already records a tree shape (``from_pretrained``).
    """

    # One feature table R for context and target words (Mnih & Hinton): used when config.tie_word_embeddings.
    _tied_weights_keys = {"lm_head.weight": "model.R.weight"}
    base_model_class = LBLModel  # the body (HLBLForCausalLM uses HLBLModel)

    def __init__(self, config: LBLConfig, tree: WordTree | None = None, **head_kwargs) -> None:
        super().__init__(config)
        self.model = self.base_model_class(config)
        # Softmax / split head: weight = R (tied), bias = b_w. Tree head: node vectors q_i, biases b_i.
        self.lm_head = self._build_head(config.hidden_size, tree=tree, **head_kwargs)
        self.post_init()


__all__ = ["LBLForCausalLM", "LBLModel", "LBLPreTrainedModel"]
