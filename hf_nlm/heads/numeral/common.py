"""What the numeral heads share: the config's numeral vocabulary, the numerals a resized vocabulary keeps,
and how an open numeral distribution is laid over the vocabulary's numeral rows.

The vocabulary holds words and numerals ranked together (Spithourakis & Riedel, "Numeracy for Language
Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018, sec. 3);
``config.numeral_vocab`` (token -> id, ``<unk_num>`` included) says which ids are numerals.
"""

from __future__ import annotations

import torch

NUMERAL_HEAD_FIELD = "numeral_vocab"


def numeral_vocab_of(config, owner: str, head: str) -> dict[str, int]:
    """``config.numeral_vocab``, which a numeral head cannot do without."""
    vocab = getattr(config, NUMERAL_HEAD_FIELD, None)
    if not vocab:
        raise ValueError(
            f"{owner}: head={head!r} needs numeral_vocab, the numeral tokens of the vocabulary and their ids "
            "(a NumeracyLMConfig built with numeral_vocab=tokenizer.numeral_vocab from a numeracy tokenizer)"
        )
    outside = sorted((i, token) for token, i in vocab.items() if not 0 <= i < config.vocab_size)
    if outside:  # a config whose vocab_size was changed alone (resize_token_embeddings keeps them in step)
        raise ValueError(
            f"{owner}.numeral_vocab: id {outside[0][0]} of {outside[0][1]!r} is outside the vocabulary "
            f"[0, vocab_size={config.vocab_size}); change the vocabulary with model.resize_token_embeddings, "
            "which keeps numeral_vocab in step"
        )
    return vocab


def sorted_numerals(vocab: dict[str, int]) -> list[tuple[str, int]]:
    """The numeral tokens by id: the order of the head's rows, independent of the dict's order."""
    return sorted(vocab.items(), key=lambda item: item[1])


def kept_numerals(numeral_vocab: dict[str, int], vocab_size: int, owner: str,
                  needed: tuple[str, ...] = ()) -> dict[str, int]:
    """The numerals of ``numeral_vocab`` that a vocabulary resized to ``vocab_size`` tokens keeps: resizing
    adds or cuts tokens at the end, and a numeral whose id is cut leaves the vocabulary with it. Raise
    ``ValueError`` (``owner`` starts the message) if it would keep none, or cut a token of ``needed``."""
    kept = {token: i for token, i in numeral_vocab.items() if i < vocab_size}
    lost = [token for token in needed if token in numeral_vocab and token not in kept]
    if kept and not lost:
        return kept
    if lost:
        what, keep = f"{lost[0]!r} (id {numeral_vocab[lost[0]]}), which it needs", numeral_vocab[lost[0]] + 1
    else:
        what, keep = "every numeral of numeral_vocab", min(numeral_vocab.values()) + 1
    raise ValueError(
        f"{owner} cannot follow a vocabulary resized to {vocab_size} tokens: it would cut {what}. Resizing "
        f"adds or cuts tokens at the end of the vocabulary: keep at least {keep} tokens, or build a model "
        "with another strategy"
    )


def spread_over_rows(known: torch.Tensor, scored_rows: list[int], unknown_row: int,
                     num_rows: int) -> torch.Tensor:
    """An open numeral distribution over the numeral rows of the vocabulary: ``known`` (..., len(scored_rows))
    log-probabilities of the rows' numerals go to ``scored_rows``, the rest of the mass (every numeral
    outside the vocabulary) to ``unknown_row`` (``<unk_num>``), -inf elsewhere (a duplicate spelling)."""
    known = known.to(torch.float64)
    rest = torch.log1p(-torch.exp(torch.logsumexp(known, dim=-1)).clamp(max=1 - 1e-12))
    out = known.new_full((*known.shape[:-1], num_rows), float("-inf"))
    out[..., scored_rows] = known
    out[..., unknown_row] = rest
    return out


def first_rows(keys: list) -> list[int]:
    """The first row of each distinct key (None: ``<unk_num>`` or a token that is no numeral)."""
    seen, rows = set(), []
    for row, key in enumerate(keys):
        if key is not None and key not in seen:
            seen.add(key)
            rows.append(row)
    return rows


__all__ = [
    "NUMERAL_HEAD_FIELD",
    "first_rows",
    "kept_numerals",
    "numeral_vocab_of",
    "sorted_numerals",
    "spread_over_rows",
]
