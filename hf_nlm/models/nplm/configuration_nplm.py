"""Configuration of Bengio et al.'s neural probabilistic language model (NPLM)."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from ...heads.factory import check_head_config


@strict
class NPLMConfig(PreTrainedConfig):
    r"""
    Configuration for [`NPLMForCausalLM`], the feed-forward n-gram language model of
    Bengio, Ducharme, Vincent & Jauvin, "A Neural Probabilistic Language Model", JMLR 3 (2003).

    The defaults are the paper's Brown-corpus model MLP1 (n = 5, h = 50, m = 60, direct connections).

    Args:
        vocab_size (`int`, defaults to 16383):
            |V|, the number of token ids (16,383 on Brown in the paper).
        context_size (`int`, defaults to 4):
            n - 1, the number of previous tokens the model looks at (the paper's n is the n-gram order).
        embedding_size (`int`, defaults to 60):
            m, the size of each word feature vector C(w).
        hidden_size (`int`, defaults to 50):
            h, the number of tanh hidden units. `0` removes the hidden layer (the paper's MLP3), which then
            requires `direct_connections=True`.
        direct_connections (`bool`, defaults to `True`):
            Whether the output also sees the word features directly (the paper's W x term); `False` sets W = 0.
        initializer_range (`float`, defaults to 0.1):
            Half-width of the uniform initialisation of C, H and the output layer's weights (biases start at 0).
        head (`str`, defaults to `"softmax"`):
            The output layer: `"softmax"` (the paper's), `"split"` (split softmax with tombstones over a
            frequency-sorted vocabulary, needs `cutoffs`) or `"tree"` (binary tree softmax: Morin & Bengio's
            hierarchical NPLM, AISTATS 2005). See `hf_nlm.heads`.
        cutoffs (`list[int]`, *optional*):
            With `head="split"`: the cluster boundaries [s_1, ..., s_(m-1)], strictly increasing inside (0, |V|).
        tree_num_nodes, tree_max_codes, tree_max_depth (`int`, *optional*):
            With `head="tree"`: the word tree's shape (`hf_nlm.heads.tree_config_fields(tree)`), so that
            `from_pretrained` can rebuild the head before loading the tree saved with the weights. Leave them
            unset when building a fresh model with `NPLMForCausalLM(config, tree=tree)`, which fills them.
        tie_word_embeddings (`bool`, defaults to `False`):
            Always `False`: the NPLM's output matrix [U W] does not have the shape of C.
        use_cache (`bool`, defaults to `False`):
            The NPLM has no recurrent state; `generate()` re-reads the last n - 1 tokens at every step.
        bos_token_id (`int`, *optional*, defaults to 1):
            The sentence-boundary token. Positions before the start of the input (a prompt shorter than
            n - 1 tokens, or left padding) are filled with it, as an n-gram model pads with <s>.
        eos_token_id (`int`, *optional*, defaults to 1):
            End-of-sentence token (the word-level tokenizers here use one `<eos>` token for both).
        pad_token_id (`int`, *optional*, defaults to 1):
            Padding token for batched generation.
    """

    model_type = "nplm"

    vocab_size: int = 16383
    context_size: int = 4
    embedding_size: int = 60
    hidden_size: int = 50
    direct_connections: bool = True
    initializer_range: float = 0.1
    head: str = "softmax"
    cutoffs: list[int] | None = None
    tree_num_nodes: int | None = None
    tree_max_codes: int | None = None
    tree_max_depth: int | None = None
    tie_word_embeddings: bool = False
    use_cache: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 1
    pad_token_id: int | None = 1

    def __post_init__(self, **kwargs):
        if self.vocab_size < 2:
            raise ValueError(f"NPLMConfig.vocab_size must be >= 2, got {self.vocab_size}")
        if self.context_size < 1:
            raise ValueError(f"NPLMConfig.context_size (n - 1) must be >= 1, got {self.context_size}")
        if self.embedding_size < 1:
            raise ValueError(f"NPLMConfig.embedding_size (m) must be >= 1, got {self.embedding_size}")
        if self.hidden_size < 0:
            raise ValueError(f"NPLMConfig.hidden_size (h) must be >= 0, got {self.hidden_size}")
        if self.hidden_size == 0 and not self.direct_connections:
            raise ValueError(
                "NPLMConfig: hidden_size=0 with direct_connections=False leaves the output layer no input; "
                "set hidden_size > 0 or direct_connections=True"
            )
        if self.tie_word_embeddings:
            raise ValueError("NPLMConfig.tie_word_embeddings must be False: [U W] is not shaped like C")
        check_head_config(self, "NPLMConfig")
        super().__post_init__(**kwargs)

    @property
    def order(self) -> int:
        """n, the order of the n-gram the model conditions on (context_size + 1)."""
        return self.context_size + 1

    @property
    def output_input_size(self) -> int:
        """Width of the vector the output layer reads: h (tanh units) plus (n-1)m if direct connections."""
        return self.hidden_size + (self.context_size * self.embedding_size if self.direct_connections else 0)


__all__ = ["NPLMConfig"]
