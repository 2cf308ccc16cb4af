"""What the numeral heads share: the config's numeral vocabulary, the rule that resizing keeps every
numeral, and how an open numeral distribution is laid over the vocabulary's numeral rows.

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
    return vocab


def sorted_numerals(vocab: dict[str, int]) -> list[tuple[str, int]]:
    """The numeral tokens by id: the order of the head's rows, independent of the dict's order."""
    return sorted(vocab.items(), key=lambda item: item[1])


def check_numerals_kept(numeral_vocab: dict[str, int], vocab_size: int, owner: str) -> None:
    """Raise ``ValueError`` if a vocabulary resized to ``vocab_size`` tokens would cut a numeral of
    ``numeral_vocab`` (``owner`` starts the message): resizing adds or cuts words at the end only."""
    cut = sorted((i, token) for token, i in numeral_vocab.items() if i >= vocab_size)
    if cut:
        i, token = cut[0]
        raise ValueError(
            f"{owner} cannot follow a vocabulary resized to {vocab_size} tokens: it would cut the numeral "
            f"{token!r} (id {i}) of numeral_vocab. Resizing adds or cuts words at the end of the vocabulary: "
            f"keep at least {cut[-1][0] + 1} tokens, or train a tokenizer and a new model without those "
            "numerals"
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
    "check_numerals_kept",
    "first_rows",
    "numeral_vocab_of",
    "sorted_numerals",
    "spread_over_rows",
]
