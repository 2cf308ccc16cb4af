"""An LSTM encoder-decoder with global attention, as a transformers seq2seq LM.

M.-T. Luong, H. Pham, C. D. Manning, "Effective Approaches to Attention-based Neural Machine Translation",
EMNLP 2015; D. Bahdanau, K. Cho, Y. Bengio, "Neural Machine Translation by Jointly Learning to Align and
Translate", ICLR 2015.

The encoder, a (bidirectional) LSTM, reads the source x_1..x_S into annotations h_1..h_S. The decoder, an LSTM
that starts from the encoder's final state, reads the target shifted right (y_0 = ``decoder_start_token_id``)
and at every step t (Luong et al. sec. 3, the "global" model):

    s_t   = LSTM([E y_{t-1}; h~_{t-1}], s_{t-1})     (h~_{t-1} only with input feeding, sec. 3.3)
    e_tj  = score(s_t, h_j)                           (``config.attention``; see StorySeq2SeqConfig)
    a_tj  = exp(e_tj) / sum_k exp(e_tk)               (over the real source positions: padding gets a_tj = 0)
    c_t   = sum_j a_tj h_j                            (eq. 1-4: the context vector)
    h~_t  = tanh(W_c [c_t; s_t])                      (eq. 5: the attentional vector)
    p(y_t | y_<t, x) = head(h~_t)                     (eq. 6; any head of hf_nlm.heads, not only softmax)

With ``attention="none"`` there is no c_t: h~_t = s_t, the plain encoder-decoder (Sutskever et al. 2014).

The decoder state (each layer's (h, c) and h~_t) is returned as a
:class:`~hf_nlm.cache_utils.Seq2SeqRecurrentCache`, so ``generate()`` runs the encoder once and the decoder
one token per step; greedy search, sampling and beam search (``num_beams``, ``length_penalty``,
``num_return_sequences``) are transformers' own.

**Beam search and length normalisation.** transformers 5 ranks a finished hypothesis y_1..y_t (y_t = ``eos``,
or the last token when ``max_length`` is hit) by ``sum_i log p(y_i | y_<i, x) / t ** length_penalty``, where t
counts the generated tokens, the final ``eos`` included and ``decoder_start_token_id`` not. The
length-normalised score (1/t) sum_i log p(y_i) is therefore ``length_penalty=1.0`` (transformers' default),
and the plain summed log-probability is ``length_penalty=0.0``. (With ``length_penalty > 0`` pass
``early_stopping="never"`` for the exact search: the default heuristic stops once the best running beam,
scored at its current length, cannot beat the finished ones.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import GenerationMixin
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.utils import ModelOutput
from transformers.utils.deprecation import deprecate_kwarg

from ...cache_utils import Seq2SeqRecurrentCache, unread_tokens
from ...modeling_utils import NLMPreTrainedModel, align_targets, positions_to_score
from ...trees import WordTree
from .configuration_story_seq2seq import StorySeq2SeqConfig


@dataclass
class StorySeq2SeqEncoderOutput(ModelOutput):
    """The encoder's outputs (in this order, so that the tuple of ``return_dict=False`` reads back
    positionally).

    Args:
        last_hidden_state: the annotations h_j (B, S, hidden_size), zeros at padded positions.
        final_hidden, final_cell: each encoder layer's final state (h, c), directions concatenated:
            (B, encoder_layers, hidden_size), batch first so that ``generate()`` expands them per beam.
        hidden_states: with ``output_hidden_states``, the embedded source and each layer's outputs.
    """

    last_hidden_state: torch.FloatTensor | None = None
    final_hidden: torch.FloatTensor | None = None
    final_cell: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class StorySeq2SeqLMOutput(Seq2SeqLMOutput):
    """``Seq2SeqLMOutput`` plus ``nll``, the mean negative log-likelihood of the labels (equal to ``loss``:
    this model adds no regularisation term; named as the causal LMs' outputs name it, for perplexity).

    In transformers' layout for an encoder-decoder, with layer l of the decoder the LSTM layer l and the top
    layer also the attention over the source and W_c (eq. 5), as a transformer decoder layer holds its
    cross-attention:

    - ``encoder_hidden_states`` / ``decoder_hidden_states`` (with ``output_hidden_states=True``):
      ``encoder_layers + 1`` / ``decoder_layers + 1`` tensors, the embedded inputs (B, S|T, embedding_size)
      then each layer's output (B, S|T, hidden_size): the encoder's annotations (the last is h_j), the lower
      decoder layers' states s^l_t and, last, the top layer's h~_t after dropout, exactly what the head reads
      (``-lm_head.nll(decoder_hidden_states[-1], labels)``).
    - ``cross_attentions`` (with ``output_attentions=True``, or ``config.output_attentions``): a tuple of one
      tensor (B, 1, T_target, T_source), the weights a_tj of the one attention layer (one head), over the top
      decoder state; none with ``attention="none"``.
    - ``encoder_attentions`` / ``decoder_attentions`` are None: the encoder and decoder are LSTMs, with no
      self-attention.
    """

    nll: torch.FloatTensor | None = None


def shift_tokens_right(labels: torch.LongTensor, pad_token_id: int,
                       decoder_start_token_id: int) -> torch.LongTensor:
    """The decoder inputs for ``labels``: ``decoder_start_token_id`` then the labels but the last, -100 -> pad
    (as BART/T5)."""
    shifted = labels.new_empty(labels.shape)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


class GlobalAttention(nn.Module):
    """score(s_t, h_j) -> weights a_tj over the source -> context c_t (Luong et al. sec. 3.1; Bahdanau et al.
    A.1.2).

    The part of the score that depends on the source alone (W_a h_j, W_1 h_j, W_h h_j) is computed once per
    source by :meth:`keys`, not once per decoder step.
    """

    def __init__(self, config: StorySeq2SeqConfig) -> None:
        super().__init__()
        self.kind = config.attention
        H, E = config.hidden_size, config.embedding_size
        if self.kind == "general":
            self.W_a = nn.Linear(H, H, bias=False)
        elif self.kind in ("additive", "concat"):
            self.W_h = nn.Linear(H, H, bias=False)  # Bahdanau's U_a (W_1 above)
            self.W_s = nn.Linear(H, H)  # Bahdanau's W_a (W_2), with the layer's one bias b
            self.v = nn.Linear(H, 1, bias=False)
            if self.kind == "concat":
                # concat: the decoder's input embedding joins the score
                self.W_y = nn.Linear(E, H, bias=False)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """The source-only part of the score: h_j (dot), W_a h_j (general), W_h h_j (additive, concat)."""
        if self.kind == "general":
            return self.W_a(memory)
        if self.kind in ("additive", "concat"):
            return self.W_h(memory)
        return memory

    def forward(
        self,
        query: torch.Tensor,
        inputs: torch.Tensor,
        memory: torch.Tensor,
        keys: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Context vectors (B, T, H) and weights (B, 1, T, S) for decoder states ``query`` (B, T, H) whose
        inputs were ``inputs`` (B, T, E, used by "concat"), over annotations ``memory`` (B, S, H) with
        ``keys`` from :meth:`keys`; ``mask`` (B, S) is True on real source tokens."""
        if self.kind in ("dot", "general"):
            scores = query @ keys.transpose(1, 2)  # s_t . h_j, or s_t^T (W_a h_j)
        else:
            q = self.W_s(query)
            if self.kind == "concat":
                q = q + self.W_y(inputs)
            # (B, T, 1, H) + (B, 1, S, H): one tanh layer per (t, j) pair.
            scores = self.v(torch.tanh(q[:, :, None] + keys[:, None])).squeeze(-1)
        # -inf before the softmax: padded positions get weight exactly 0 and the rest sum to 1.
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        # Kept as (B, 1, T, S), transformers' (batch, heads, target, source) with one head, and the context
        # read from that tensor: the weights a model returns are then on the output's gradient path.
        weights = torch.softmax(scores.float(), dim=-1).to(memory.dtype)[:, None]
        return weights[:, 0] @ memory, weights


class StorySeq2SeqPreTrainedModel(NLMPreTrainedModel):
    config_class = StorySeq2SeqConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    # The decoder state summarises the prefix and cannot be rolled back (generate() refuses assisted
    # decoding).
    is_stateful = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)  # embeddings and the head: Uniform(+-initializer_range)
        if isinstance(module, nn.LSTM):
            bound = module.hidden_size**-0.5  # PyTorch's own LSTM init, Uniform(+-1/sqrt(H))
            for p in module.parameters():
                init.uniform_(p, -bound, bound)
        elif isinstance(module, nn.Linear):
            init.uniform_(module.weight, -self.config.initializer_range, self.config.initializer_range)
            if module.bias is not None:
                init.zeros_(module.bias)


def masked_lstm_layer(layer: nn.LSTM, x: torch.Tensor, mask: torch.Tensor):
    """One (bidirectional) ``nn.LSTM`` layer over ``x`` (B, S, D) one position at a time, where a padded
    position (``mask`` False) leaves the state unchanged and outputs zeros: what the packed call computes,
    written without data-dependent shapes so that ``torch.export`` can trace it. Returns ``nn.LSTM``'s
    ``(out, (h_n, c_n))``."""
    B, S, _ = x.shape
    outputs, finals_h, finals_c = [], [], []
    for suffix in ("", "_reverse")[: 2 if layer.bidirectional else 1]:
        w = [getattr(layer, f"{name}_l0{suffix}")
             for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        h = c = x.new_zeros(B, layer.hidden_size)
        out: list[torch.Tensor | None] = [None] * S
        for t in range(S) if not suffix else reversed(range(S)):
            h_new, c_new = torch.lstm_cell(x[:, t], (h, c), *w)
            keep = mask[:, t, None]
            h, c = torch.where(keep, h_new, h), torch.where(keep, c_new, c)
            out[t] = torch.where(keep, h, torch.zeros_like(h))
        outputs.append(torch.stack(out, dim=1))
        finals_h.append(h)
        finals_c.append(c)
    return torch.cat(outputs, dim=-1), (torch.stack(finals_h), torch.stack(finals_c))


class StorySeq2SeqEncoder(nn.Module):
    """Source ids -> annotations h_j and each layer's final state; a stack of (bidirectional) LSTM layers.

    Padding may be anywhere (left, right): each row's real tokens are read in order as one packed sequence, so
    neither the annotations nor the final state see a pad (traced by ``torch.export``, where packing's shapes
    depend on the data, the same by :func:`masked_lstm_layer`).
    """

    main_input_name = "input_ids"

    def __init__(self, config: StorySeq2SeqConfig, embed_tokens: nn.Embedding) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = embed_tokens
        directions = 2 if config.bidirectional_encoder else 1
        sizes = [config.embedding_size] + [config.hidden_size] * (config.encoder_layers - 1)
        self.layers = nn.ModuleList(
            nn.LSTM(d_in, config.hidden_size // directions, batch_first=True, bidirectional=directions == 2)
            for d_in in sizes
        )
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> StorySeq2SeqEncoderOutput | tuple:
        B, S = input_ids.shape
        mask = (None if attention_mask is None
                else attention_mask.to(device=input_ids.device, dtype=torch.bool))
        if mask is not None and mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask has shape {tuple(mask.shape)}, expected input_ids' {(B, S)}")
        traced = torch.compiler.is_compiling()
        if mask is not None and not traced and bool(mask.all()):
            mask = None  # no padding: one plain call per layer
        if mask is not None and not traced:
            lengths = mask.sum(dim=1)
            empty = (lengths == 0).nonzero().flatten().tolist()
            if empty:
                raise ValueError(
                    f"source rows {empty} have no token (attention_mask is all 0 there): nothing to encode"
                )
            # Real tokens first, in order (a stable sort of the pad flags), then packed by length.
            order = torch.sort((~mask).to(torch.uint8), dim=1, stable=True).indices

        x = self.dropout(self.embed_tokens(input_ids))
        hidden_states = [x] if output_hidden_states else None
        finals_h, finals_c = [], []
        for idx, layer in enumerate(self.layers):
            if mask is None:
                out, (h_n, c_n) = layer(x)
            elif traced:
                out, (h_n, c_n) = masked_lstm_layer(layer, x, mask)
            else:
                compact = x.gather(1, order[..., None].expand(-1, -1, x.shape[-1]))
                packed = pack_padded_sequence(compact, lengths.cpu(), batch_first=True, enforce_sorted=False)
                out, (h_n, c_n) = layer(packed)
                out, _ = pad_packed_sequence(out, batch_first=True, total_length=S)
                # Back to the original positions; pads get the zeros pad_packed_sequence put after each row.
                out = torch.zeros_like(out).scatter(1, order[..., None].expand(-1, -1, out.shape[-1]), out)
            # h_n: (directions, B, H / directions) -> (B, H), [forward; backward].
            finals_h.append(torch.cat(list(h_n), dim=-1))
            finals_c.append(torch.cat(list(c_n), dim=-1))
            x = self.dropout(out) if idx < len(self.layers) - 1 else out
            if hidden_states is not None:
                hidden_states.append(x)
        output = StorySeq2SeqEncoderOutput(
            last_hidden_state=x,
            final_hidden=torch.stack(finals_h, dim=1),
            final_cell=torch.stack(finals_c, dim=1),
            hidden_states=tuple(hidden_states) if hidden_states is not None else None,
        )
        return output.to_tuple() if return_dict is False else output


@dataclass
class StorySeq2SeqDecoderOutput(BaseModelOutput):
    """The decoder's outputs: ``last_hidden_state`` is h~_t after dropout (what the head reads),
    ``hidden_states`` (E y, s^1, ..., s^{L-1}, h~): the embedded inputs and each layer's output,
    ``attentions`` the cross-attention weights (B, 1, T, S), ``cache`` the state after the inputs."""

    cache: Seq2SeqRecurrentCache | None = None


class StorySeq2SeqDecoder(nn.Module):
    """The attention decoder: target ids (shifted right) -> h~_t, from the encoder's final state or a
    cache."""

    def __init__(self, config: StorySeq2SeqConfig, embed_tokens: nn.Embedding) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = embed_tokens
        H = config.hidden_size
        feed = H if config.input_feeding else 0
        self.lstm = nn.LSTM(config.embedding_size + feed, H, num_layers=config.decoder_layers,
                            batch_first=True, dropout=config.dropout if config.decoder_layers > 1 else 0.0)
        self.attention = GlobalAttention(config) if config.attention != "none" else None
        self.W_c = nn.Linear(2 * H, H, bias=False) if self.attention is not None else None  # eq. 5
        self.dropout = nn.Dropout(config.dropout)

    def initial_state(
        self, encoder: StorySeq2SeqEncoderOutput
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Decoder layer l starts from encoder layer l's final (h, c); layers beyond the encoder's from
        zeros."""
        h_enc, c_enc = encoder.final_hidden, encoder.final_cell
        B, L_enc, H = h_enc.shape
        zeros = h_enc.new_zeros(B, H)
        hidden = [h_enc[:, i] if i < L_enc else zeros for i in range(self.config.decoder_layers)]
        cell = [c_enc[:, i] if i < L_enc else zeros for i in range(self.config.decoder_layers)]
        return hidden, cell

    def attend(
        self, s: torch.Tensor, y: torch.Tensor, memory: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """h~ = tanh(W_c [c; s]) (eq. 5) and the weights, or (s, None) without attention."""
        if self.attention is None:
            return s, None
        context, weights = self.attention(s, y, memory, keys, mask)
        return torch.tanh(self.W_c(torch.cat([context, s], dim=-1))), weights

    def forward(
        self,
        input_ids: torch.LongTensor,
        encoder_outputs: StorySeq2SeqEncoderOutput,
        encoder_attention_mask: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Seq2SeqRecurrentCache | None = None,
        use_cache: bool = False,
        output_hidden_states: bool = False,
    ) -> StorySeq2SeqDecoderOutput:
        cfg = self.config
        B, T = input_ids.shape
        memory = encoder_outputs.last_hidden_state
        src_mask = (
            torch.ones(memory.shape[:2], dtype=torch.bool, device=memory.device)
            if encoder_attention_mask is None
            else encoder_attention_mask.to(device=memory.device, dtype=torch.bool)
        )
        keys = self.attention.keys(memory) if self.attention is not None else None
        tgt_mask = None
        if attention_mask is not None:
            if attention_mask.shape[1] < T:
                raise ValueError(
                    f"decoder_attention_mask covers {attention_mask.shape[1]} positions "
                    f"but decoder_input_ids has {T}"
                )
            # generate() passes the mask of the whole target so far; the new tokens are its last T columns.
            tgt_mask = attention_mask[:, -T:].to(device=input_ids.device, dtype=torch.bool)
            if not torch.compiler.is_compiling() and bool(tgt_mask.all()):
                tgt_mask = None

        if cache is not None and cache.get_seq_length() > 0:
            hidden, cell = list(cache.hidden), list(cache.cell)
            feed = cache.input_feed
        else:
            hidden, cell = self.initial_state(encoder_outputs)
            feed = None
        if cfg.input_feeding and feed is None:
            feed = memory.new_zeros(B, cfg.hidden_size)  # h~_0 = 0

        y = self.dropout(self.embed_tokens(input_ids))
        # The fused LSTM call returns the top layer's states only: the lower layers' states, when they are
        # asked for, come from the step-by-step run of the same weights.
        lower_states_asked = output_hidden_states and cfg.decoder_layers > 1
        if cfg.input_feeding or tgt_mask is not None or T == 1 or lower_states_asked:
            layer_states, hidden, cell, feed = self._step_by_step(
                y, hidden, cell, feed, memory, keys, src_mask, tgt_mask, all_layers=output_hidden_states
            )
            s = layer_states[-1]
        else:
            # No input feeding: s_t does not depend on h~, so the LSTM reads the whole target in one fused
            # call.
            s, (h_n, c_n) = self.lstm(y, (torch.stack(hidden), torch.stack(cell)))
            hidden, cell = list(h_n), list(c_n)
            layer_states = [s]
        # One attention call over all positions, reading the states s that are returned: s and the weights
        # returned are then the tensors h~ (and so the prediction) is computed from, on the loss's gradient
        # path.
        h_tilde, weights = self.attend(s, y, memory, keys, src_mask)
        if cfg.input_feeding:  # the next call's h~_{t-1}: that of the last position, unless it is padding
            last = h_tilde[:, -1]
            feed = last if tgt_mask is None else torch.where(tgt_mask[:, -1, None], last, feed)

        new_cache = None
        if use_cache:
            new_cache = cache if cache is not None else Seq2SeqRecurrentCache()
            for idx, (h, c) in enumerate(zip(hidden, cell, strict=True)):
                new_cache.update_state(idx, h, c)
            new_cache.input_feed = feed if cfg.input_feeding else None
            new_cache.seq_length += T
        out = self.dropout(h_tilde)
        return StorySeq2SeqDecoderOutput(
            last_hidden_state=out,
            # transformers' layout: the embeddings, then each layer's output; the top layer's is h~ (its LSTM
            # state s_t, attention and W_c together, as a transformer layer holds its cross-attention).
            hidden_states=(y, *layer_states[:-1], out) if output_hidden_states else None,
            attentions=weights,
            cache=new_cache,
        )

    def _step_by_step(self, y, hidden, cell, feed, memory, keys, src_mask, tgt_mask, all_layers=False):
        """The decoder's LSTM one position at a time; positions where ``tgt_mask`` is False leave the state
        unchanged. The layers are ``self.lstm``'s weights run through ``torch.lstm_cell``, with the same
        dropout between layers as the fused call. Returns the top layer's states s (B, T, H) in a list, or
        with ``all_layers`` every layer's states (the lower ones after the dropout between layers, as the
        next layer reads them), then each layer's last (h, c) and the input feed the last position read.

        With input feeding s_t needs h~_{t-1}, so every position but the last is attended to as it is reached,
        for the next one's input; ``forward`` then attends to all positions at once, from the returned s."""
        L, T = self.config.decoder_layers, y.shape[1]
        w = [
            tuple(getattr(self.lstm, f"{name}_l{k}")
                  for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
            for k in range(L)
        ]
        kept = range(L) if all_layers else [L - 1]
        states: list[list[torch.Tensor]] = [[] for _ in range(L)]
        for t in range(T):
            x = torch.cat([y[:, t], feed], dim=-1) if self.config.input_feeding else y[:, t]
            keep = tgt_mask[:, t, None] if tgt_mask is not None else None
            for k in range(L):
                h, c = torch.lstm_cell(x, (hidden[k], cell[k]), *w[k])
                if keep is not None:
                    h, c = torch.where(keep, h, hidden[k]), torch.where(keep, c, cell[k])
                hidden[k], cell[k] = h, c
                x = h if k == L - 1 else F.dropout(h, self.lstm.dropout, self.training)
                if k in kept:
                    states[k].append(x)
            if self.config.input_feeding and t < T - 1:
                h_tilde, _ = self.attend(hidden[-1][:, None], y[:, t : t + 1], memory, keys, src_mask)
                feed = h_tilde[:, 0] if keep is None else torch.where(keep, h_tilde[:, 0], feed)
        return [torch.stack(states[k], dim=1) for k in kept], hidden, cell, feed


class StorySeq2SeqModel(StorySeq2SeqPreTrainedModel):
    """The encoder and the attention decoder (no head): ``forward`` returns a ``Seq2SeqModelOutput`` whose
    ``last_hidden_state`` is h~_t (what a head reads)."""

    # With tie_word_embeddings, source words and decoder inputs share one matrix (the LM ties its head to it
    # too).
    _tied_weights_keys = {"decoder.embed_tokens.weight": "encoder.embed_tokens.weight"}

    def __init__(self, config: StorySeq2SeqConfig) -> None:
        super().__init__(config)
        self.encoder = StorySeq2SeqEncoder(config, nn.Embedding(config.vocab_size, config.embedding_size))
        self.decoder = StorySeq2SeqDecoder(config, nn.Embedding(config.vocab_size, config.embedding_size))
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.embed_tokens = value
        if self.config.tie_word_embeddings:
            self.decoder.embed_tokens = value

    def get_encoder(self, *args, **kwargs) -> StorySeq2SeqEncoder:
        return self.encoder

    def get_decoder(self, *args, **kwargs) -> StorySeq2SeqDecoder:
        return self.decoder

    @deprecate_kwarg("past_key_values", "6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: StorySeq2SeqEncoderOutput | tuple | None = None,
        cache: Seq2SeqRecurrentCache | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        cfg = self.config
        use_cache = cfg.use_cache if use_cache is None else use_cache
        output_hidden_states = self._hidden_states(output_hidden_states)
        if cache is not None and not isinstance(cache, Seq2SeqRecurrentCache):
            raise TypeError(
                "story_seq2seq carries its decoder state in a hf_nlm.cache_utils.Seq2SeqRecurrentCache, got "
                f"{type(cache).__name__}"
            )
        if decoder_input_ids is None:
            raise ValueError("give decoder_input_ids (or labels to the LM, which shifts them right)")
        if encoder_outputs is None:
            if input_ids is None:
                raise ValueError("give input_ids (the source) or encoder_outputs")
            encoder_outputs = self.encoder(input_ids, attention_mask,
                                           output_hidden_states=output_hidden_states)
        elif not isinstance(encoder_outputs, StorySeq2SeqEncoderOutput):
            # A tuple (return_dict=False): the fields in order, None ones left out.
            encoder_outputs = StorySeq2SeqEncoderOutput(*encoder_outputs)
        if encoder_outputs.final_hidden is None:
            raise ValueError(
                "encoder_outputs lacks final_hidden / final_cell, the state the decoder starts from"
            )
        decoder = self.decoder(
            decoder_input_ids, encoder_outputs, attention_mask, decoder_attention_mask, cache,
            use_cache=use_cache, output_hidden_states=output_hidden_states,
        )
        if output_attentions is None:
            output_attentions = bool(cfg.output_attentions)
        cross_attentions = None
        if output_attentions and decoder.attentions is not None:
            # transformers' layout: one (B, heads, T, S) tensor per attention layer. Luong's decoder attends
            # once, from the top LSTM layer, with one head.
            cross_attentions = (decoder.attentions,)
        output = Seq2SeqModelOutput(
            last_hidden_state=decoder.last_hidden_state,
            cache=decoder.cache,
            decoder_hidden_states=decoder.hidden_states,
            cross_attentions=cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
        )
        return self._output(output, return_dict)


class StorySeq2SeqForConditionalGeneration(StorySeq2SeqPreTrainedModel, GenerationMixin):
    """Encoder, attention decoder and output head (``AutoModelForSeq2SeqLM``).

    ``forward(input_ids, attention_mask, labels=labels)`` returns the mean NLL of the labels (-100 ignored);
    without ``decoder_input_ids`` the decoder reads the labels shifted right behind ``decoder_start_token_id``
    (-100 -> pad). ``labels[:, t]`` is the target of decoder position t (no further shift, as in BART / T5).
    Where the logits of every position are returned (eval mode, ``logits_to_keep=0``) the loss is their
    cross-entropy with the labels, ``F.cross_entropy(logits, labels)``; in training mode the |V|-wide logits
    are not built and the head's ``nll`` scores the targets alone (the same value: the logits'
    ``log_softmax`` is the head's exact log-distribution).

    Args:
        config: the :class:`StorySeq2SeqConfig`.
        tree: with ``config.head == "tree"``, the word tree of the head.
    """

    _tied_weights_keys = {"lm_head.weight": "model.encoder.embed_tokens.weight"}

    def __init__(self, config: StorySeq2SeqConfig, tree: WordTree | None = None, **head_kwargs) -> None:
        super().__init__(config)
        self.model = StorySeq2SeqModel(config)
        self.lm_head = self._build_head(config.hidden_size, tree=tree, **head_kwargs)
        self.post_init()

    def get_encoder(self, *args, **kwargs) -> StorySeq2SeqEncoder:
        return self.model.encoder

    def get_decoder(self, *args, **kwargs) -> StorySeq2SeqDecoder:
        return self.model.decoder

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # the state lives in a Seq2SeqRecurrentCache that forward() creates, not a key/value cache
        return False

    def prepare_decoder_input_ids_from_labels(self, labels: torch.LongTensor) -> torch.LongTensor:
        """What ``DataCollatorForSeq2Seq`` calls: the labels shifted right (see
        :func:`shift_tokens_right`)."""
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        """The source embedding and the output head (see the base class), and the decoder's own embedding
        where it is untied (``tie_word_embeddings=False``): new rows the mean of the old ones with
        ``mean_resizing``, as transformers resizes an input embedding."""
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        decoder = self.model.decoder
        if decoder.embed_tokens.num_embeddings != embeddings.num_embeddings:
            resized = self._get_resized_embeddings(decoder.embed_tokens, embeddings.num_embeddings,
                                                   mean_resizing=mean_resizing)
            resized.requires_grad_(decoder.embed_tokens.weight.requires_grad)
            decoder.embed_tokens = resized
        return embeddings

    @deprecate_kwarg("past_key_values", "6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        encoder_outputs: StorySeq2SeqEncoderOutput | tuple | None = None,
        cache: Seq2SeqRecurrentCache | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs,
    ) -> StorySeq2SeqLMOutput:
        cfg = self.config
        if kwargs.get("shift_labels") is not None:
            raise ValueError(
                "story_seq2seq takes labels, not shift_labels: labels[:, t] is already the target of decoder "
                "position t"
            )
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = shift_tokens_right(labels, cfg.pad_token_id, cfg.decoder_start_token_id)
        if labels is not None and labels.shape != decoder_input_ids.shape:
            raise ValueError(
                f"labels has shape {tuple(labels.shape)}, decoder_input_ids {tuple(decoder_input_ids.shape)}"
            )
        self.check_inputs(input_ids)
        self.check_inputs(decoder_input_ids, labels)
        if labels is not None and not torch.compiler.is_compiling() and bool((labels == -100).all()):
            raise ValueError("labels hold no target: every label is -100")
        if use_cache is None:
            use_cache = cfg.use_cache and labels is None  # a training batch has no next step to cache for
        body = self.model(
            input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, encoder_outputs, cache,
            use_cache=use_cache, output_attentions=output_attentions,
            output_hidden_states=output_hidden_states, return_dict=True,
        )
        hidden = body.last_hidden_state
        logits = None
        if labels is None or not self.training:
            # generate() asks only for the last position: never score positions it will not read.
            logits = self.lm_head(positions_to_score(hidden, logits_to_keep))
        nll = None
        if labels is not None:
            every_position = (logits is not None and isinstance(logits_to_keep, int)
                              and logits.shape[1] == labels.shape[1])
            if every_position and not self.lm_head.target_fields:
                # The logits of every labelled position are there: the loss is their cross-entropy
                # (log_softmax of the logits is the head's exact log-distribution), on their gradient path.
                nll = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten().to(logits.device),
                                      ignore_index=-100)
            else:
                # Training, or logits_to_keep leaves positions out: the head scores the targets alone.
                fields = {name: kwargs[name] for name in self.lm_head.target_fields
                          if kwargs.get(name) is not None}
                h_sel, targets = align_targets(hidden, shift_labels=labels, fields=fields)
                nll = self.lm_head.nll(h_sel, targets).mean()
        output = StorySeq2SeqLMOutput(
            loss=nll,
            nll=nll,
            logits=logits,
            cache=body.cache,
            decoder_hidden_states=body.decoder_hidden_states,
            cross_attentions=body.cross_attentions,
            encoder_last_hidden_state=body.encoder_last_hidden_state,
            encoder_hidden_states=body.encoder_hidden_states,
        )
        return self._output(output, return_dict)

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.LongTensor,
        cache: Seq2SeqRecurrentCache | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: StorySeq2SeqEncoderOutput | None = None,
        use_cache: bool | None = None,
        **kwargs,
    ) -> dict:
        # ``input_ids`` are the decoder's tokens so far; without a state the whole target prefix is read from
        # the encoder's final state.
        input_ids, cache = unread_tokens(input_ids, cache)
        inputs = {
            "decoder_input_ids": input_ids,
            "attention_mask": attention_mask,
            "decoder_attention_mask": decoder_attention_mask,
            "encoder_outputs": encoder_outputs,
            "cache": cache,
            "use_cache": use_cache,
            "logits_to_keep": 1,
        }
        for name in ("output_attentions", "output_hidden_states"):
            if name in kwargs:
                inputs[name] = kwargs[name]
        return inputs


__all__ = [
    "StorySeq2SeqEncoderOutput",
    "StorySeq2SeqForConditionalGeneration",
    "StorySeq2SeqLMOutput",
    "StorySeq2SeqModel",
    "StorySeq2SeqPreTrainedModel",
    "shift_tokens_right",
]
