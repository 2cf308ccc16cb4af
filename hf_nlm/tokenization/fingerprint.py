"""Which vocabulary a model was trained with: a fingerprint of its tokenizer, and the check that a model and a
tokenizer loaded together share it. A model scored with another run's tokenizer gives a plausible perplexity
from the wrong ids, or an index error for a larger vocabulary; this says so instead."""

from __future__ import annotations

import hashlib
import json


def tokenizer_fingerprint(tokenizer) -> str:
    """The sha256 (hex) of the tokenizer's vocabulary: its ``(token, id)`` pairs, sorted, as JSON. Two
    tokenizers share it exactly when they map the same tokens to the same ids."""
    pairs = sorted(tokenizer.get_vocab().items())
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def _special_ids(tokenizer) -> dict[str, int]:
    """The tokenizer's bos / eos / pad ids as a config records them (bos and pad fall back to eos)."""
    eos = tokenizer.eos_token_id
    return {
        "bos_token_id": tokenizer.bos_token_id if tokenizer.bos_token_id is not None else eos,
        "eos_token_id": eos,
        "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
    }


def check_tokenizer(model, tokenizer) -> None:
    """Raise ``ValueError`` if ``tokenizer`` is not the one ``model`` (or its config) was trained with.

    A config that records ``tokenizer_fingerprint`` (``hf-nlm train`` and the trainer write it) must match
    :func:`tokenizer_fingerprint`; a config without one must have the tokenizer's size as ``vocab_size`` and
    its bos / eos / pad ids. The message names the model (its folder when loaded from one) and both
    vocabularies."""
    config = getattr(model, "config", model)
    where = (getattr(model, "name_or_path", None) or getattr(config, "_name_or_path", None)
             or type(model).__name__)
    vocab_size, size = getattr(config, "vocab_size", None), len(tokenizer)
    expected = getattr(config, "tokenizer_fingerprint", None)
    if expected is not None:
        found = tokenizer_fingerprint(tokenizer)
        if found != expected:
            raise ValueError(
                f"the tokenizer ({size} tokens, fingerprint {found[:12]}) is not the one the model in "
                f"{where} was trained with ({vocab_size} tokens, fingerprint {expected[:12]}): load the "
                "tokenizer saved with the model"
            )
        return
    wrong = []
    if vocab_size is not None and size != vocab_size:
        wrong.append(f"{size} tokens, the model's vocab_size is {vocab_size}")
    for name, value in _special_ids(tokenizer).items():
        said = getattr(config, name, None)
        if (value is not None and said is not None
                and value not in (said if isinstance(said, list) else [said])):
            wrong.append(f"{name} {value}, the model's is {said}")
    if wrong:
        raise ValueError(
            f"the tokenizer does not match the model in {where}: {'; '.join(wrong)}. Load the tokenizer "
            "saved with the model"
        )


__all__ = ["check_tokenizer", "tokenizer_fingerprint"]
