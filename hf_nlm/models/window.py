"""What the fixed-window (n-gram) neural LMs share: NPLM (Bengio et al. 2003), LBL and HLBL
(Mnih & Hinton 2007, 2008).

Each of them predicts w_{t+1} from the n - 1 tokens w_t, ..., w_{t-n+2} only, so

* :class:`WindowModelMixin` gives their bodies the input embedding, :meth:`contexts` (those tokens for
  every position, the positions before the start of the input and left padding filled with
  ``bos_token_id``, as an n-gram model pads with <s>) and :meth:`context_vectors` (the same windows, of
  word vectors), both cut by :func:`sliding_windows`;
* :class:`WindowCausalLMMixin` gives their ``XForCausalLM`` classes the same ``generate()`` behaviour
  (no key/value cache: each step reads the last n - 1 tokens, and only the last position's window goes
  through the body and the head).
"""

from __future__ import annotations

import torch


def window_tokens(
    input_ids: torch.LongTensor,
    attention_mask: torch.Tensor | None,
    context_size: int,
    fill_id: int | None,
    model_name: str = "model",
) -> torch.LongTensor:
    """The tokens the windows are cut from: ``input_ids`` (B, T) with left padding (``attention_mask`` 0)
    replaced by ``fill_id`` (the config's ``bos_token_id``), which also stands for the positions before
    the start of the input (:meth:`WindowModelMixin.contexts`)."""
    n_1 = context_size
    needs_fill = n_1 > 1 or (attention_mask is not None and bool((attention_mask == 0).any()))
    if needs_fill and fill_id is None:
        raise ValueError(
            f"this {model_name} looks at {n_1} previous tokens but the input is shorter (or padded) "
            "and config.bos_token_id is None, so there is nothing to fill the missing context with; "
            "set config.bos_token_id or give at least context_size tokens"
        )
    if attention_mask is not None:
        input_ids = input_ids.masked_fill(attention_mask.to(input_ids.device) == 0,
                                          fill_id if fill_id is not None else 0)
    return input_ids


def sliding_windows(sequence: torch.Tensor, fill: torch.Tensor, context_size: int) -> torch.Tensor:
    """The n - 1 entries each position conditions on, most recent first: ``sequence`` (B, T, ...) ->
    (B, T, n - 1, ...).

    ``fill`` (B, 1, ...) stands for the positions before the start of the input. Works on token ids and on
    their vectors alike."""
    before = fill.expand(-1, context_size - 1, *fill.shape[2:])
    # unfold puts the window last, oldest -> newest; move it next to the position and flip it to the
    # papers' order (w_{t-1} first).
    return torch.cat([before, sequence], dim=1).unfold(1, context_size, 1).movedim(-1, 2).flip(2)


class WindowModelMixin:
    """What the fixed-window bodies share: the word feature table named by ``embedding_attr`` is the
    input embedding (``resize_token_embeddings`` and weight tying go through it), :meth:`contexts` and
    :meth:`context_vectors`."""

    embedding_attr = "C"

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return getattr(self, self.embedding_attr)

    def set_input_embeddings(self, value: torch.nn.Embedding) -> None:
        setattr(self, self.embedding_attr, value)

    def _window_tokens(self, input_ids: torch.LongTensor,
                       attention_mask: torch.Tensor | None) -> torch.LongTensor:
        config = self.config
        return window_tokens(input_ids, attention_mask, config.context_size, config.bos_token_id,
                             config.model_type.upper())

    def _fill_id(self, input_ids: torch.LongTensor) -> torch.LongTensor:
        """(B, 1) of ``bos_token_id``: what the context holds before the start of the input."""
        fill = self.config.bos_token_id if self.config.context_size > 1 else 0  # unused without a context
        return input_ids.new_full((input_ids.shape[0], 1), fill)

    def contexts(self, input_ids: torch.LongTensor,
                 attention_mask: torch.Tensor | None = None) -> torch.LongTensor:
        """The n - 1 token ids each position conditions on, most recent first: shape (B, T, n - 1).

        Position t sees w_t, w_{t-1}, ..., w_{t-n+2} and predicts w_{t+1}. Before the start of the
        input, and where ``attention_mask`` is 0 (left padding), the context holds ``bos_token_id``.
        """
        ids = self._window_tokens(input_ids, attention_mask)
        return sliding_windows(ids, self._fill_id(ids), self.config.context_size)

    def last_context(self, input_ids: torch.LongTensor,
                     attention_mask: torch.Tensor | None = None) -> torch.LongTensor:
        """``contexts(input_ids, attention_mask)[:, -1:]``, (B, 1, n - 1), cut from the last n - 1 tokens
        alone: what a generation step reads."""
        n_1 = self.config.context_size
        ids = self._window_tokens(input_ids[:, -n_1:],
                                  None if attention_mask is None else attention_mask[:, -n_1:])
        if ids.shape[1] < n_1:
            ids = torch.cat([self._fill_id(ids).expand(-1, n_1 - ids.shape[1]), ids], dim=1)
        return ids.flip(1)[:, None]

    def window_output(self, windows: torch.Tensor) -> torch.Tensor:
        """The vector the head reads, (B, T, D_out), from the context windows' word vectors ``windows``
        (B, T, n - 1, D): each body's own network."""
        raise NotImplementedError

    def last_hidden_state(self, input_ids: torch.LongTensor,
                          attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``forward(input_ids, attention_mask).last_hidden_state[:, -1:]`` from the last window alone."""
        return self.window_output(self.get_input_embeddings()(self.last_context(input_ids, attention_mask)))

    def context_vectors(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The input embedding of each position's token, (B, T, D), and the windows of :meth:`contexts` cut
        from it, (B, T, n - 1, D). Every word is looked up once, so a body that reads the windows is computed
        from the first tensor (it can be returned as a hidden state and receive the loss's gradient)."""
        ids = self._window_tokens(input_ids, attention_mask)
        embed = self.get_input_embeddings()
        vectors = embed(ids)
        return vectors, sliding_windows(vectors, embed(self._fill_id(ids)), self.config.context_size)


class WindowCausalLMMixin:
    """``forward`` and generation plumbing of a fixed-window causal LM (``self.model``: the body,
    whose ``last_hidden_state`` the head reads). No key/value cache: each ``generate()`` step re-reads
    the last n - 1 tokens (``config.context_size``). The head, loss and logits come from
    :meth:`~hf_nlm.modeling_utils.NLMPreTrainedModel.lm_output`.
    """

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        return_dict: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ):
        """The body's vectors at every position, then the head: loss (mean NLL of the shifted ``labels``,
        or of ``shift_labels``; -100 ignored) and logits, as :meth:`lm_output` describes."""
        self.check_inputs(input_ids, labels, kwargs.get("shift_labels"), attention_mask)
        if (isinstance(logits_to_keep, int) and logits_to_keep == 1 and not self.training and labels is None
                and kwargs.get("shift_labels") is None and not self._hidden_states(output_hidden_states)):
            # A generate() step: only the last position is scored, so only its window is read (one
            # embedding lookup of n - 1 words and one pass of the network, not one per position).
            hidden = self.model.last_hidden_state(input_ids, attention_mask)
            return self.lm_output(hidden, None, 1, return_dict, outputs={"hidden_states": None}, **kwargs)
        body = self.model(
            input_ids, attention_mask=attention_mask, output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        return self.lm_output(
            body.last_hidden_state, labels, logits_to_keep, return_dict,
            outputs={"hidden_states": body.hidden_states}, **kwargs,
        )

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # no key/value cache: each step re-reads the last n - 1 tokens

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        # The model is a function of the last n - 1 tokens only; the rest of the prefix is dead weight.
        n_1 = self.config.context_size
        input_ids = input_ids[:, -n_1:]
        if attention_mask is not None:
            attention_mask = attention_mask[:, -n_1:]
        return {"input_ids": input_ids, "attention_mask": attention_mask, "logits_to_keep": 1}


__all__ = ["WindowCausalLMMixin", "WindowModelMixin", "sliding_windows", "window_tokens"]
