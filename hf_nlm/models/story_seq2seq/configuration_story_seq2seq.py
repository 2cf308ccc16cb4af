"""Configuration of the attention seq2seq story generator (Luong et al. 2015; Bahdanau et al. 2015)."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub.dataclasses import strict

from ...configuration_utils import NLMConfig
from ...hub.model_card import CardText

ATTENTION_TYPES = ("dot", "general", "additive", "concat", "none")


@strict
class StorySeq2SeqConfig(NLMConfig):
    r"""
    Configuration for [`StorySeq2SeqForConditionalGeneration`]: an LSTM encoder and an LSTM decoder with
    global attention (M.-T. Luong, H. Pham, C. D. Manning, "Effective Approaches to Attention-based Neural
    Machine Translation", EMNLP 2015; D. Bahdanau, K. Cho, Y. Bengio, "Neural Machine Translation by Jointly
    Learning to Align and Translate", ICLR 2015). The output head (`head`, `cutoffs`, the tree shape) and the
    token ids are the fields of [`~hf_nlm.configuration_utils.NLMConfig`]; source and target share one
    vocabulary (one tokenizer).

    Args:
        embedding_size (`int`, defaults to 256):
            Size of the word embeddings (source words and decoder inputs).
        hidden_size (`int`, defaults to 256):
            Size of the decoder's LSTM states s_t, of the encoder's annotations h_j (with a bidirectional
            encoder each direction has `hidden_size / 2` units and the two are concatenated, so `hidden_size`
            must be even) and of the attentional vector h~_t the head reads.
        encoder_layers (`int`, defaults to 1):
            Number of stacked encoder LSTM layers.
        decoder_layers (`int`, defaults to 1):
            Number of stacked decoder LSTM layers. Decoder layer l starts from encoder layer l's final state
            (h, c); decoder layers beyond the encoder's start from zeros.
        bidirectional_encoder (`bool`, defaults to `True`):
            Read the source in both directions (each annotation h_j is [forward; backward]).
        attention (`str`, defaults to `"general"`):
            The score e_tj between the decoder state s_t and the annotation h_j (Luong et al. sec. 3.1),
            turned into weights a_tj = softmax_j(e_tj) over the real (unpadded) source positions: `"dot"`:
            s_t . h_j; `"general"`: s_t^T W_a h_j; `"additive"` (Bahdanau et al.):
            v^T tanh(W_1 h_j + W_2 s_t + b); `"concat"` (a variant that scores from the decoder's input
            embedding and state together): v^T tanh(W_y E[y_t] + W_s s_t + W_h h_j + b), i.e. one tanh layer
            over [E[y_t]; s_t; h_j]; the PyTorch seq2seq tutorial's layer instead gave one score per fixed
            source *position* from [E[y_t]; s_t], which ties a model to a maximum source length, so the source
            vector h_j takes the place of the position here; `"none"`: no attention, the decoder sees the
            source only through the encoder's final state it starts from (the no-attention baseline; the head
            then reads s_t).
        input_feeding (`bool`, defaults to `True`):
            Luong et al. sec. 3.3: the previous attentional vector h~_{t-1} is concatenated to the embedding
            of the next decoder input, so that the decoder knows what it attended to (with `attention="none"`,
            h~_{t-1} = s_{t-1}). Without it the decoder LSTM runs over the whole target in one fused call.
        dropout (`float`, defaults to 0.2):
            Dropout on the embeddings, between LSTM layers and on h~_t before the head.
        tie_word_embeddings (`bool`, *optional*):
            One embedding matrix for source words, decoder inputs and the output head (softmax and split
            heads; needs `embedding_size == hidden_size`, since the head reads h~_t). `False`: separate
            encoder and decoder embeddings and an untied head. Unset, it is `True` for the heads whose weight
            is a word matrix (softmax, split) and `False` for the others (tree).
        decoder_start_token_id (`int`, *optional*, defaults to 1):
            The token the decoder starts from (`labels` are shifted right behind it); the word-level
            tokenizers' `<eos>`.
        is_encoder_decoder (`bool`, defaults to `True`):
            Tells `generate()` to run the encoder once and then the decoder.
        use_cache (`bool`, defaults to `True`):
            `generate()` carries the decoder state (each layer's (h, c) and h~_{t-1}) in a
            [`~hf_nlm.cache_utils.Seq2SeqRecurrentCache`] and feeds one token per step.
    """

    model_type = "story_seq2seq"
    card_text = CardText.from_toml(Path(__file__).with_name("card.toml"))

    embedding_size: int = 256
    hidden_size: int = 256
    encoder_layers: int = 1
    decoder_layers: int = 1
    bidirectional_encoder: bool = True
    attention: str = "general"
    input_feeding: bool = True
    dropout: float = 0.2
    tie_word_embeddings: bool | None = None
    decoder_start_token_id: int | None = 1
    is_encoder_decoder: bool = True
    use_cache: bool = True

    def validate_sizes(self):
        self.require_positive("embedding_size", "hidden_size", "encoder_layers", "decoder_layers")
        name = type(self).__name__
        if self.bidirectional_encoder and self.hidden_size % 2:
            raise ValueError(
                f"{name}.hidden_size must be even with bidirectional_encoder=True (each direction has "
                f"hidden_size / 2 units), got {self.hidden_size}"
            )

    def validate_attention(self):
        if self.attention not in ATTENTION_TYPES:
            raise ValueError(
                f"{type(self).__name__}.attention must be one of {', '.join(map(repr, ATTENTION_TYPES))}; "
                f"got {self.attention!r}"
            )

    def validate_dropout(self):
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"{type(self).__name__}.dropout is a probability and must be in [0, 1), got {self.dropout}"
            )

    def validate_encoder_decoder(self):
        name = type(self).__name__
        if not self.is_encoder_decoder:
            raise ValueError(f"{name}.is_encoder_decoder must be True (an encoder-decoder model), got False")
        if self.decoder_start_token_id is None:
            raise ValueError(f"{name}.decoder_start_token_id must be set: the decoder starts from it")
        for field in ("decoder_start_token_id", "pad_token_id"):
            value = getattr(self, field)
            if value is not None and not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"{name}.{field} must be a token id in [0, vocab_size={self.vocab_size}), got {value}"
                )

    def validate_tied_sizes(self):
        if self.tie_word_embeddings and self.embedding_size != self.hidden_size:
            raise ValueError(
                f"{type(self).__name__}: tie_word_embeddings=True scores h~_t "
                f"(hidden_size={self.hidden_size}) against the embedding matrix "
                f"(embedding_size={self.embedding_size}): the two must be equal, or set "
                "tie_word_embeddings=False"
            )


__all__ = ["ATTENTION_TYPES", "StorySeq2SeqConfig"]
