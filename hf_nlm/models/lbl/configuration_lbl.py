"""Configuration of Mnih & Hinton's log-bilinear language model (LBL)."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from ...heads.factory import check_head_config


@strict
class LBLConfig(PreTrainedConfig):
    r"""
    Configuration for [`LBLForCausalLM`], the log-bilinear language model of A. Mnih, G. Hinton,
    "Three New Graphical Models for Statistical Language Modelling", ICML 2007 (and its hierarchical
    version, [`HLBLConfig`], Mnih & Hinton, NIPS 2008).

    Args:
        vocab_size (`int`, defaults to 10000):
            |V|, the number of token ids.
        context_size (`int`, defaults to 5):
            n - 1, the number of previous words the model looks at.
        hidden_size (`int`, defaults to 100):
            D, the size of the word feature vectors r_w (and of the predicted vector r_hat).
        diagonal_context (`bool`, defaults to `False`):
            Use diagonal position matrices C_i (stored as vectors of D entries, r_hat = sum_i c_i * r_{w_i}),
            which makes the context cost linear in D instead of quadratic.
        initializer_range (`float`, defaults to 0.1):
            Half-width of the uniform initialisation of R, C and the head's weights (biases start at 0).
        head (`str`, defaults to `"softmax"`):
            The output layer: `"softmax"` (the paper's P(w) = softmax(r_hat . r_w + b_w)), `"split"` (split softmax
            with tombstones, needs `cutoffs`) or `"tree"` (binary tree softmax: the HLBL; prefer [`HLBLConfig`]).
        cutoffs (`list[int]`, *optional*):
            With `head="split"`: the cluster boundaries [s_1, ..., s_(m-1)], strictly increasing inside (0, |V|).
        tree_num_nodes, tree_max_codes, tree_max_depth (`int`, *optional*):
            With `head="tree"`: the word tree's shape (`hf_nlm.heads.tree_config_fields(tree)`), so that
            `from_pretrained` can rebuild the head before loading the tree saved with the weights. Leave them unset
            when building a fresh model with `tree=`, which fills them.
        tie_word_embeddings (`bool`, defaults to `True`):
            Use the same feature table R for the context words and the predicted word, as Mnih & Hinton do
            (`lm_head.weight` is `model.R.weight`). Must be `False` with a tree head, whose node vectors q_i are
            not word vectors.
        use_cache (`bool`, defaults to `False`):
            The LBL has no recurrent state; `generate()` re-reads the last n - 1 tokens at every step.
        bos_token_id (`int`, *optional*, defaults to 1):
            Fills the context before the start of the input (a prompt shorter than n - 1 tokens, or left padding).
        eos_token_id (`int`, *optional*, defaults to 1):
            End-of-sentence token.
        pad_token_id (`int`, *optional*, defaults to 1):
            Padding token for batched generation.
    """

    model_type = "lbl"

    vocab_size: int = 10000
    context_size: int = 5
    hidden_size: int = 100
    diagonal_context: bool = False
    initializer_range: float = 0.1
    head: str = "softmax"
    cutoffs: list[int] | None = None
    tree_num_nodes: int | None = None
    tree_max_codes: int | None = None
    tree_max_depth: int | None = None
    tie_word_embeddings: bool = True
    use_cache: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 1
    pad_token_id: int | None = 1

    def __post_init__(self, **kwargs):
        name = type(self).__name__
        if self.vocab_size < 2:
            raise ValueError(f"{name}.vocab_size must be >= 2, got {self.vocab_size}")
        if self.context_size < 1:
            raise ValueError(f"{name}.context_size (n - 1) must be >= 1, got {self.context_size}")
        if self.hidden_size < 1:
            raise ValueError(f"{name}.hidden_size (D, the feature vector size) must be >= 1, got {self.hidden_size}")
        if not self.initializer_range >= 0:
            raise ValueError(f"{name}.initializer_range must be >= 0, got {self.initializer_range}")
        check_head_config(self, name)
        super().__post_init__(**kwargs)

    @property
    def order(self) -> int:
        """n, the order of the n-gram the model conditions on (context_size + 1)."""
        return self.context_size + 1


__all__ = ["LBLConfig"]
