"""Numerals as first-class tokens (Spithourakis & Riedel, "Numeracy for Language Models", ACL 2018).

The digit alphabet: a numeral's canonical string (ASCII digits, at most one ``.``, an optional
leading ``-``) spelled over 12 symbols plus an end marker, the vocabulary of the character-RNN that
encodes a numeral's digits (``softmax_digits``) and of the digit-RNN that spells one (``drnn``).
Rows of a per-token ``digit_ids`` tensor are padded after the end marker with :data:`DIGIT_PAD`.
"""

from __future__ import annotations

#: The symbols of a canonical numeral string, in id order: "0"-"9" are ids 0-9, "." is 10, "-" is 11.
DIGIT_SYMBOLS = "0123456789.-"
#: Id of the end-of-numeral marker that follows the last symbol.
DIGIT_END = len(DIGIT_SYMBOLS)
#: Id of the padding after the end marker (never predicted; an embedding row that stays unused).
DIGIT_PAD = DIGIT_END + 1
#: Size of the digit vocabulary (symbols, end, padding).
NUM_DIGIT_SYMBOLS = DIGIT_PAD + 1
#: Longest canonical numeral string kept as a numeral (longer ones are words, see the policy above).
MAX_NUMERAL_LENGTH = 24
#: Width of a ``digit_ids`` row: the longest numeral plus its end marker.
DIGITS_WIDTH = MAX_NUMERAL_LENGTH + 1

_SYMBOL_ID = {symbol: i for i, symbol in enumerate(DIGIT_SYMBOLS)}


def encode_digits(canonical: str, width: int = DIGITS_WIDTH) -> list[int]:
    """The digit ids of a canonical numeral string, then :data:`DIGIT_END`, padded to ``width``.

    >>> encode_digits("-2.5", width=6)
    [11, 2, 10, 5, 12, 13]
    """
    if len(canonical) + 1 > width:
        raise ValueError(f"numeral {canonical!r} has {len(canonical)} symbols; a row of width {width} holds {width - 1}")
    try:
        ids = [_SYMBOL_ID[symbol] for symbol in canonical]
    except KeyError as err:
        raise ValueError(f"numeral {canonical!r} is not canonical: {err.args[0]!r} is not one of {DIGIT_SYMBOLS!r}") from None
    return ids + [DIGIT_END] + [DIGIT_PAD] * (width - len(ids) - 1)


def decode_digits(ids) -> str:
    """The canonical string spelled by digit ids, up to the first end marker (padding ignored)."""
    out = []
    for i in ids:
        i = int(i)
        if i == DIGIT_END:
            break
        if i == DIGIT_PAD:
            continue
        out.append(DIGIT_SYMBOLS[i])
    return "".join(out)


def canonical_digits(token: str) -> str | None:
    """The canonical string of a numeral token (None for a word). TEMPORARY: replaced by parse_numeral."""
    text = token.replace(",", "").replace("\u2212", "-").lstrip("+")
    body = text[1:] if text.startswith("-") else text
    if not body or body.count(".") > 1 or not body.replace(".", "").isdigit() or len(text) > MAX_NUMERAL_LENGTH:
        return None
    return text
