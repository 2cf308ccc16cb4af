"""Configuration of the AWD-LSTM language model (Merity, Keskar & Socher 2018)."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub.dataclasses import strict

from ...configuration_utils import NLMConfig
from ...hub.model_card import CardText

DROPOUT_FIELDS = ("dropout", "dropout_hidden", "dropout_input", "dropout_embedding", "weight_drop")


@strict
class AWDLSTMConfig(NLMConfig):
    r"""
    Configuration for [`AWDLSTMForCausalLM`], the ASGD Weight-Dropped LSTM of S. Merity, N. S. Keskar,
    R. Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018. Defaults are the paper's
    WikiText-2 / PTB model (the PTB dropouts are given in brackets where they differ). The output head
    (`head`: softmax, `"split"`, the reference code's SplitCrossEntropyLoss, or `"tree"`, which needs
    `tie_word_embeddings=False`), `cutoffs`, the tree shape and the token ids are the fields of
    [`~hf_nlm.configuration_utils.NLMConfig`].

    Args:
        embedding_size (`int`, defaults to 400):
            Size of the word embeddings. With `tie_word_embeddings=True` the last LSTM layer's hidden size is
            `embedding_size` (not `hidden_size`), as in the paper, so that its output can be scored against
            the embedding matrix (Inan et al. 2017; Press & Wolf 2017).
        hidden_size (`int`, defaults to 1150):
            Hidden size of every LSTM layer but the last (and of the last one too when the embeddings are
            untied).
        num_hidden_layers (`int`, defaults to 3):
            Number of stacked LSTM layers.
        last_hidden_size (`int`, *optional*):
            Hidden size of the last LSTM layer, the vectors the head reads. Unset: `embedding_size` when the
            embeddings are tied (the paper's 1150, 1150, 400), else `hidden_size`. A tied model must have
            `last_hidden_size == embedding_size`.
        dropout (`float`, defaults to 0.4):
            Locked (variational) dropout on the last layer's outputs, before the head.
        dropout_hidden (`float`, defaults to 0.3):
            Locked dropout between LSTM layers (PTB: 0.25).
        dropout_input (`float`, defaults to 0.65):
            Locked dropout on the embedded inputs of the first layer (PTB: 0.4).
        dropout_embedding (`float`, defaults to 0.1):
            Embedding dropout: probability of dropping a whole word type (a row of the embedding matrix) for
            the forward pass (Gal & Ghahramani 2016); kept rows are scaled by 1 / (1 - p).
        weight_drop (`float`, defaults to 0.5):
            DropConnect probability on each layer's hidden-to-hidden matrix W_hh (Wan et al. 2013), one mask
            per forward pass.
        alpha (`float`, defaults to 2.0):
            Activation regularisation (AR) weight: alpha * mean(m * h_t)^2 on the dropped last-layer outputs.
        beta (`float`, defaults to 1.0):
            Temporal activation regularisation (TAR) weight: beta * mean(h_t - h_{t+1})^2 on the undropped
            ones.
        initializer_range (`float`, defaults to 0.1):
            Half-width of the uniform initialisation of the embedding (and of an untied head), as in the
            reference code. LSTM weights use PyTorch's Uniform(+-1/sqrt(H)).
        tie_word_embeddings (`bool`, *optional*):
            Use the embedding matrix as the output matrix (`lm_head.weight` is `model.embed_tokens.weight`).
            Unset, it is `True` for the heads whose weight is a word matrix (softmax, split) and `False` for
            the others (tree).
        use_cache (`bool`, defaults to `True`):
            `generate()` carries the LSTM state in a [`~hf_nlm.cache_utils.RecurrentCache`] and feeds only new
            tokens.
    """

    model_type = "awd_lstm"
    card_text = CardText.from_toml(Path(__file__).with_name("card.toml"))

    embedding_size: int = 400
    hidden_size: int = 1150
    num_hidden_layers: int = 3
    last_hidden_size: int | None = None
    dropout: float = 0.4
    dropout_hidden: float = 0.3
    dropout_input: float = 0.65
    dropout_embedding: float = 0.1
    weight_drop: float = 0.5
    alpha: float = 2.0
    beta: float = 1.0
    tie_word_embeddings: bool | None = None
    use_cache: bool = True

    def validate_sizes(self):
        self.require_positive("embedding_size", "hidden_size", "num_hidden_layers")
        if self.last_hidden_size is not None:
            self.require_positive("last_hidden_size")

    def validate_regularisation(self):
        name = type(self).__name__
        self.require_dropout(*DROPOUT_FIELDS)
        for field in ("alpha", "beta"):
            if not getattr(self, field) >= 0:
                raise ValueError(f"{name}.{field} must be >= 0, got {getattr(self, field)}")

    def validate_tied_sizes(self):
        name = type(self).__name__
        last = self.layer_sizes[-1]
        if self.tie_word_embeddings and last != self.embedding_size:
            # The head scores the last layer's output h against the embedding rows: sizes must agree.
            raise ValueError(
                f"{name}: tie_word_embeddings=True scores the last LSTM layer's output against the embedding "
                f"matrix, so last_hidden_size ({last}) must equal embedding_size ({self.embedding_size}); "
                "leave last_hidden_size unset (it then follows embedding_size) or set "
                "tie_word_embeddings=False"
            )

    @property
    def layer_sizes(self) -> list[int]:
        """Hidden size of each LSTM layer: ``hidden_size`` except the last, which is ``last_hidden_size``
        (default: ``embedding_size`` when the embeddings are tied, the paper's 1150, 1150, 400)."""
        sizes = [self.hidden_size] * self.num_hidden_layers
        if self.last_hidden_size is not None:
            sizes[-1] = self.last_hidden_size
        elif self.tie_word_embeddings:
            sizes[-1] = self.embedding_size
        return sizes

    @property
    def output_size(self) -> int:
        """Size of the vectors the head reads (the last layer's hidden size)."""
        return self.layer_sizes[-1]


__all__ = ["AWDLSTMConfig"]
