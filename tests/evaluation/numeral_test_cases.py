"""The tiny numeracy LMs and texts the numeral-scoring tests share (Spithourakis & Riedel 2018's strategies
and Berg-Kirkpatrick & Spokoyny 2020's ``dexp``): every strategy on one word-and-numeral vocabulary, the
value densities started from a few training numbers, so no test depends on training."""

from __future__ import annotations

import torch

from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM

STRATEGIES = ["softmax", "softmax_digits", "hsoftmax", "drnn", "mog", "combination", "dexp"]
TEXTS = [
    "in 1990 the deficit was 3.5 billion dollars , up 12 % .",
    "the budget grew 12 % to 1,200 million in 1990 .",
    "we spent 3.5 billion on 7 programs .",
    "in 1991 the deficit was 2.25 billion dollars .",
] * 5
ALL_AT_ONCE = 10**6


def numeracy_tokenizer():
    from hf_nlm.tokenization import train_numeracy_tokenizer

    return train_numeracy_tokenizer(TEXTS, max_vocab_size=24)


def numeracy_model(tokenizer, strategy: str) -> NumeracyLMForCausalLM:
    torch.manual_seed(0)
    config = NumeracyLMConfig(vocab_size=len(tokenizer), embedding_size=8, hidden_size=8,
                              numeral_strategy=strategy, numeral_vocab=tokenizer.numeral_vocab)
    model = NumeracyLMForCausalLM(config).eval()
    if strategy in ("mog", "combination", "dexp"):
        density = (model.lm_head.value_branch.density if strategy == "combination"
                   else model.lm_head.branch.density)
        density.initialize_from(torch.tensor([1990.0, 3.5, 12.0, 1200.0, 7.0, 2.25]))
    return model


def record_rows(monkeypatch, head) -> list[int]:
    """Patch every function of ``head`` that scores numerals against all candidates to record its rows."""
    rows: list[int] = []

    def recording(fn):
        def wrapped(hidden, *args, **kwargs):
            rows.append(hidden.reshape(-1, hidden.shape[-1]).shape[0])
            return fn(hidden, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(head, "log_probs", recording(head.log_probs))
    branch = getattr(head, "branch", getattr(head, "value_branch", None))
    density = getattr(branch, "density", None)
    if density is not None:
        for name in ("mean", "median", "mode", "quantile"):
            monkeypatch.setattr(density, name, recording(getattr(density, name)))
    return rows
