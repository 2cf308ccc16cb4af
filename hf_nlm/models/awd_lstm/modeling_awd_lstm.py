"""The AWD-LSTM language model as a transformers causal LM.

S. Merity, N. S. Keskar, R. Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018.

A stack of L LSTM layers reads the embedded words x_t = E[w_t] and the last layer's output h^L_t is scored by
an output head (the full softmax over E's rows when the embeddings are tied, or any head of
:mod:`hf_nlm.heads`, e.g. the split softmax of the reference code's SplitCrossEntropyLoss). Every LSTM
layer computes

    i_t = sigma(W^i x_t + U^i h_{t-1}),  f_t = sigma(W^f x_t + U^f h_{t-1}),
    o_t = sigma(W^o x_t + U^o h_{t-1}),  c~_t = tanh(W^c x_t + U^c h_{t-1}),
    c_t = i_t * c~_t + f_t * c_{t-1},     h_t = o_t * tanh(c_t)                  (sec. 2, eq. 1)

and the paper's regularisers act as follows (all only in training mode):

* **Weight drop** (sec. 2): DropConnect (Wan et al. 2013) on the hidden-to-hidden matrices
  U = [U^i, U^f, U^o, U^c], one mask per forward pass shared by every time step. Here each layer is an
  ``nn.LSTM`` called through ``torch.func.functional_call`` with the masked ``weight_hh_l0``, so the
  fused LSTM kernel runs unchanged (no per-step Python loop, no warnings; the reference code's
  WeightDrop wrapper broke on PyTorch 0.2, 1.0 and 1.4).
* **Embedding dropout** (sec. 4.3, Gal & Ghahramani 2016): whole rows of E (word types) dropped for the
  forward pass, kept rows scaled by 1 / (1 - p_e).
* **Locked (variational) dropout** (sec. 4.2): one Bernoulli mask per sequence, shared over time, on
  the inputs of the first layer, between layers and on the last layer's outputs.
* **AR / TAR** (sec. 4.6): alpha * L2(m * h^L_t) on the dropped last-layer outputs and
  beta * L2(h^L_t - h^L_{t+1}) on the undropped ones, added to the loss (``output.loss``); the plain
  NLL stays in ``output.nll`` for perplexity.

The recurrent state (h^l_t, c^l_t) of every layer is returned as a
:class:`~hf_nlm.cache_utils.RecurrentCache` in ``cache``; given back, only the new tokens are read,
which is what ``generate()`` (greedy, sampling, beam search) does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import GenerationMixin, GradientCheckpointingLayer
from transformers import initialization as init
from transformers.utils import ModelOutput
from transformers.utils.deprecation import deprecate_kwarg

from ...cache_utils import RecurrentCache, unread_tokens
from ...modeling_utils import NLMCausalLMOutput, NLMPreTrainedModel
from ...trees import WordTree
from .configuration_awd_lstm import AWDLSTMConfig


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Variational dropout on ``x`` (B, T, D): one mask per sequence and feature, the same at every step t."""
    if not training or p == 0.0:
        return x
    mask = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1.0 - p) / (1.0 - p)
    return x * mask  # the (B, 1, D) mask broadcasts over time


def embedding_dropout(embedding: nn.Embedding, input_ids: torch.LongTensor, p: float,
                      training: bool) -> torch.Tensor:
    """The vectors of ``input_ids`` with whole rows of the embedding matrix (word types) dropped with
    probability p and the rest scaled by 1/(1-p): E[w] * m_w, one mask m per word type for the forward pass.

    The embedding module itself is called and the mask applied to its output (the same numbers as looking up
    the masked matrix), so that hooks on the input embedding see the lookup, as transformers'
    ``enable_input_require_grads`` (used with adapters and gradient checkpointing) needs."""
    vectors = embedding(input_ids)
    if not training or p == 0.0:
        return vectors
    mask = vectors.new_empty(embedding.num_embeddings, 1).bernoulli_(1.0 - p) / (1.0 - p)
    return vectors * mask[input_ids]


class WeightDropLSTM(GradientCheckpointingLayer):
    """One LSTM layer with DropConnect on its hidden-to-hidden matrix U (``weight_hh_l0``).

    The masked matrix is computed once per forward (so every time step sees the same mask) and handed
    to the unchanged ``nn.LSTM`` through ``torch.func.functional_call``: the stored parameter is never
    replaced (no ``del``/re-register tricks), gradients flow to it through the mask, and the fused
    kernel is used. ``nn.LSTM`` notices the swapped tensor (``_weights_have_changed``, added to PyTorch
    for ``functional_call``) and, on a GPU, re-packs its weights for cuDNN, which is what keeps the
    "weights are not part of single contiguous chunk" warning away there (checked on CPU only so far).

    It is one of the model's checkpointing layers: after ``model.activation_checkpointing_enable()``
    (every layer, or every ``every_n_layers``-th) its activations are recomputed in the backward pass
    instead of kept. ``torch.utils.checkpoint`` restores the RNG state before recomputing, so the
    recomputation draws the same weight-drop mask as the forward pass.
    """

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float = 0.0) -> None:
        super().__init__()
        self.weight_drop = weight_drop
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True)

    @property
    def hidden_size(self) -> int:
        return self.lstm.hidden_size

    def dropped_weights(self) -> dict[str, torch.Tensor]:
        """The parameters to run with: ``weight_hh_l0`` masked in training (one fresh mask), else nothing."""
        if not self.training or self.weight_drop == 0.0:
            return {}
        w_hh, p = self.lstm.weight_hh_l0, self.weight_drop
        # Same distribution as F.dropout (keep with probability 1 - p, scale by 1 / (1 - p)), but
        # thresholding uniform noise is ~3x faster on a CPU than bernoulli_ for a 4H x H matrix.
        mask = (torch.rand_like(w_hh) >= p).to(w_hh.dtype).div_(1.0 - p)
        return {"weight_hh_l0": w_hh * mask}

    def forward(
        self,
        x: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Run over ``x`` (B, T, D_in) from ``state`` = (h, c), each (B, H).

        ``mask`` (B, T) bool: positions where it is False (padding) leave the state unchanged: the
        columns up to the last one holding padding are read one step at a time (still one weight mask
        for all steps), the rest in one fused call. Without padding the whole sequence goes through the
        fused kernel in one call.
        """
        weights = self.dropped_weights()

        def step(inp: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
            if inp.shape[1] == 1 and inp.device.type == "cpu":
                # One token (cached generate(), the padding loop): on a CPU nn.LSTM goes through oneDNN,
                # whose per-call set-up costs 4-5x the step itself; the plain cell kernel does not.
                lstm = self.lstm
                h, c = torch.lstm_cell(
                    inp[:, 0], (h, c), lstm.weight_ih_l0, weights.get("weight_hh_l0", lstm.weight_hh_l0),
                    lstm.bias_ih_l0, lstm.bias_hh_l0,
                )
                return h[:, None], h, c
            # nn.LSTM wants states as (num_layers=1, B, H).
            out, (h_n, c_n) = torch.func.functional_call(self.lstm, weights, (inp, (h[None], c[None])))
            return out, h_n[0], c_n[0]

        h, c = state
        if mask is None or (not torch.compiler.is_compiling() and bool(mask.all())):
            out, h, c = step(x, h, c)
            return out, (h, c)
        # Step by step up to the last padded column (for left padding: the padding prefix), then the
        # rest, where every row is real, in one fused call. Traced (torch.export / compile), where the
        # mask's values are unknown, every column goes step by step: right for any mask.
        if torch.compiler.is_compiling():
            k = x.shape[1]
        else:
            k = int((~mask).any(dim=0).nonzero()[-1]) + 1
        outputs = []
        for t in range(k):
            _, h_new, c_new = step(x[:, t : t + 1], h, c)
            keep = mask[:, t, None]
            h = torch.where(keep, h_new, h)
            c = torch.where(keep, c_new, c)
            outputs.append(h[:, None])  # a padded position outputs the (unchanged) state
        if k < x.shape[1]:
            out, h, c = step(x[:, k:], h, c)
            outputs.append(out)
        return torch.cat(outputs, dim=1), (h, c)


@dataclass
class AWDLSTMModelOutput(ModelOutput):
    """The body's outputs.

    Args:
        last_hidden_state: the last layer's outputs after output (locked) dropout, what the head reads:
            (B, T, H_L).
        raw_last_hidden_state: the same before dropout (TAR acts on these).
        cache: the state after the input, when ``use_cache``.
        hidden_states: with ``output_hidden_states``, the (dropped-out) embedded inputs and each layer's
            (dropped-out) outputs, what the next layer or the head reads: L + 1 tensors (B, T, D_l) at the
            positions of ``input_ids`` (not the boundary's), the last one ``last_hidden_state``. Each is the
            tensor the next layer reads, so ``retain_grad()`` on it gives the loss's gradient there.
    """

    last_hidden_state: torch.FloatTensor | None = None
    raw_last_hidden_state: torch.FloatTensor | None = None
    cache: RecurrentCache | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class AWDLSTMCausalLMOutput(NLMCausalLMOutput):
    """``CausalLMOutputWithPast`` plus the pieces of the training loss.

    Args:
        loss: in training mode with labels, nll + activation_regularization +
            temporal_activation_regularization (sec. 4.6); in eval mode the NLL alone.
        nll: mean negative log-likelihood of the shifted labels (use this for perplexity).
        activation_regularization: alpha * mean((m * h^L)^2) (training only).
        temporal_activation_regularization: beta * mean((h^L_t - h^L_{t+1})^2) (training only).
    """

    activation_regularization: torch.FloatTensor | None = None
    temporal_activation_regularization: torch.FloatTensor | None = None


class AWDLSTMPreTrainedModel(NLMPreTrainedModel):
    config_class = AWDLSTMConfig
    # The LSTM state summarises the prefix and cannot be rolled back (generate() refuses assisted decoding).
    is_stateful = True
    # Long BPTT keeps every layer's activations for the backward pass; with activation checkpointing each
    # WeightDropLSTM layer recomputes its own instead.
    supports_gradient_checkpointing = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)  # the embedding (the reference code's encoder init) and the head
        if isinstance(module, nn.LSTM):
            bound = module.hidden_size**-0.5  # PyTorch's own LSTM init, Uniform(+-1/sqrt(H))
            for p in module.parameters():
                init.uniform_(p, -bound, bound)


class AWDLSTMModel(AWDLSTMPreTrainedModel):
    """The AWD-LSTM body: token ids -> the last LSTM layer's outputs (and the new recurrent state)."""

    def __init__(self, config: AWDLSTMConfig) -> None:
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.embedding_size)
        sizes = config.layer_sizes
        inputs = [config.embedding_size, *sizes[:-1]]
        self.layers = nn.ModuleList(
            WeightDropLSTM(d_in, d_out, config.weight_drop) for d_in, d_out in zip(inputs, sizes, strict=True)
        )
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed_tokens = value

    @deprecate_kwarg("past_key_values", "6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        cache: RecurrentCache | None = None,
        use_cache: bool | None = None,
        return_dict: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> AWDLSTMModelOutput:
        cfg = self.config
        use_cache = cfg.use_cache if use_cache is None else use_cache
        if cache is not None and not isinstance(cache, RecurrentCache):
            raise TypeError(
                "AWD-LSTM carries its LSTM state in a hf_nlm.cache_utils.RecurrentCache, got "
                f"{type(cache).__name__}"
            )
        B, T = input_ids.shape
        mask = None
        if attention_mask is not None:
            if attention_mask.shape[1] < T:
                raise ValueError(
                    f"attention_mask covers {attention_mask.shape[1]} positions but input_ids has {T} new "
                    "tokens"
                )
            # generate() passes the mask of the whole sequence; the new tokens are the last T columns.
            mask = attention_mask[:, -T:].to(device=input_ids.device, dtype=torch.bool)
        # A new sequence (no state given) is read from the state after the sentence boundary, as every
        # sentence in training follows an <eos>: the boundary is read first and its output dropped. So
        # forward(), evaluation and generate() agree on what a sequence starts from. (An explicit
        # RecurrentCache(), empty, starts from the zero state instead.)
        boundary = cache is None and cfg.bos_token_id is not None
        if boundary:
            input_ids = torch.cat([input_ids.new_full((B, 1), cfg.bos_token_id), input_ids], dim=1)
            if mask is not None:
                mask = torch.cat([mask.new_ones(B, 1), mask], dim=1)

        x = embedding_dropout(self.embed_tokens, input_ids, cfg.dropout_embedding, self.training)
        x = locked_dropout(x, cfg.dropout_input, self.training)

        new_states = []
        hidden_states = [] if self._hidden_states(output_hidden_states) else None
        for idx, layer in enumerate(self.layers):
            if hidden_states is not None:
                own = x[:, 1:] if boundary else x  # the positions of input_ids
                hidden_states.append(own)
                if boundary:
                    # The layer reads the boundary column joined back onto the returned tensor (the same
                    # values), so that tensor is on the loss's gradient path, as a caller's retain_grad()
                    # expects.
                    x = torch.cat([x[:, :1], own], dim=1)
            state = cache.get_state(idx) if cache is not None else None
            if state is None:
                zeros = x.new_zeros(B, layer.hidden_size)
                state = (zeros, zeros)
            raw, new_state = layer(x, state, mask)
            new_states.append(new_state)
            # Between layers: the hidden dropout; after the last one: the output dropout.
            p = cfg.dropout if idx == len(self.layers) - 1 else cfg.dropout_hidden
            x = locked_dropout(raw, p, self.training)

        if boundary:  # drop the boundary's outputs: the caller asked about input_ids alone
            x, raw = x[:, 1:], raw[:, 1:]
        if hidden_states is not None:
            hidden_states.append(x)
        new_cache = None
        if use_cache:
            new_cache = cache if cache is not None else RecurrentCache()
            for idx, (h, c) in enumerate(new_states):
                new_cache.update_state(idx, h, c)
            new_cache.seq_length += T
        output = AWDLSTMModelOutput(
            last_hidden_state=x, raw_last_hidden_state=raw, cache=new_cache,
            hidden_states=tuple(hidden_states) if hidden_states is not None else None,
        )
        return self._output(output, return_dict)


class AWDLSTMForCausalLM(AWDLSTMPreTrainedModel, GenerationMixin):
    """AWD-LSTM body + output head; tied embeddings by default (``lm_head.weight`` is
    ``model.embed_tokens.weight``).

    ``forward(input_ids, labels=input_ids)`` returns the mean NLL of the shifted labels (-100 ignored) in
    ``output.nll``; ``shift_labels`` (already aligned: the target of each position) replaces ``labels`` when a
    chunk's last position must predict too, as in stateful BPTT (``hf_nlm.data.stream``); in training mode
    ``output.loss`` adds AR and TAR. In training mode with labels the |V|-wide logits are not built.

    Args:
        config: the :class:`AWDLSTMConfig`.
        tree: with ``config.head == "tree"``, the word tree of the head.
    """

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    #: The body's class (a model that reuses this LM with its own config names its own body class).
    base_model_class = AWDLSTMModel

    def __init__(self, config: AWDLSTMConfig, tree: WordTree | None = None, **head_kwargs) -> None:
        super().__init__(config)
        self.model = self.base_model_class(config)
        self.lm_head = self._build_head(config.output_size, tree=tree, **head_kwargs)
        self.post_init()

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # the state lives in a RecurrentCache that forward() creates, not a key/value cache

    @deprecate_kwarg("past_key_values", "6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        cache: RecurrentCache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        return_dict: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> AWDLSTMCausalLMOutput:
        self.check_inputs(input_ids, labels, kwargs.get("shift_labels"), attention_mask)
        body = self.model(
            input_ids, attention_mask=attention_mask, cache=cache, use_cache=use_cache,
            output_hidden_states=output_hidden_states, return_dict=True,
        )
        hidden = body.last_hidden_state
        ar = tar = None
        if self.training and (labels is not None or kwargs.get("shift_labels") is not None):
            # Sec. 4.6: AR on the dropped outputs m * h_t, TAR on the raw outputs' step-to-step change.
            # Like the reference code, both average over every position (padding included).
            ar = self.config.alpha * hidden.pow(2).mean()
            raw = body.raw_last_hidden_state
            tar = raw.new_zeros(()) if raw.shape[1] < 2 else (raw[:, 1:] - raw[:, :-1]).pow(2).mean()
            tar = self.config.beta * tar
        return self.lm_output(
            hidden, labels, logits_to_keep, return_dict,
            output_class=AWDLSTMCausalLMOutput,
            regularization={"activation_regularization": ar, "temporal_activation_regularization": tar},
            outputs={"cache": body.cache, "hidden_states": body.hidden_states},
            **kwargs,
        )

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.LongTensor,
        cache: RecurrentCache | None = None,
        attention_mask: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs,
    ) -> dict:
        # Without a state the whole prefix is read from the sentence boundary. attention_mask stays whole:
        # forward() takes its last columns. From a state, the unread tokens are the ones generate() appended,
        # never padding: no mask, so that no step reads the mask's values back.
        input_ids, cache = unread_tokens(input_ids, cache)
        if cache is not None:
            attention_mask = None
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "cache": cache,
            "use_cache": use_cache,
            "logits_to_keep": 1,
        }


__all__ = ["AWDLSTMForCausalLM", "AWDLSTMModel", "AWDLSTMPreTrainedModel"]
