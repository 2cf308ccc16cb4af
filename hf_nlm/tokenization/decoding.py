"""Generated ids back to text."""

from __future__ import annotations


def decode_generated(tokenizer, ids, numerals: dict[int, str] | None = None) -> str:
    """The text of generated ``ids``: special tokens dropped, except ``<unk>``, which stays visible so that an
    unknown word is not silently missing from the text; ``numerals`` (position in ``ids`` -> text) replace the
    ``<unk_num>`` tokens an open-vocabulary numeral decoder wrote out
    (:func:`hf_nlm.models.numeracy_lm.modeling_numeracy_lm.write_unknown_numerals`, or
    ``generate(..., return_dict_in_generate=True).numerals``).

    The text starts with its first word: the space a word-level decode puts before a continuation's first word
    (so that it appends to its prompt) is left to whoever joins the two."""
    drop = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    if not numerals:
        return tokenizer.decode([i for i in ids.tolist() if i not in drop],
                                skip_special_tokens=False).lstrip()
    ids = ids.tolist()
    tokens = [numerals.get(t, token)
              for t, (i, token) in enumerate(zip(ids, tokenizer.convert_ids_to_tokens(ids), strict=True))
              if i not in drop]
    return tokenizer.convert_tokens_to_string(tokens).lstrip()

