"""Generated ids back to text."""

from __future__ import annotations


def decode_generated(tokenizer, ids, numerals: dict[int, str] | None = None, prompt: str = "") -> str:
    """The text of generated ``ids``: special tokens dropped, except ``<unk>``, which stays visible so that an
    unknown word is not silently missing from the text; ``numerals`` (position in ``ids`` -> text) replace the
    ``<unk_num>`` tokens an open-vocabulary numeral decoder wrote out
    (:func:`hf_nlm.models.numeracy_lm.modeling_numeracy_lm.write_unknown_numerals`, or
    ``generate(..., return_dict_in_generate=True).numerals``).

    Without ``prompt`` the text starts with its first word. With ``prompt`` it is the prompt followed by the
    continuation, decoded after the prompt's tokens, so that the tokenizer's decoder
    (:mod:`hf_nlm.tokenization.detokenizer`) joins the two: one space before a word, none before ``,`` or
    ``n't``, none before the quote that closes a quotation the prompt opened."""
    drop = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    numerals = numerals or {}
    tokens = [numerals.get(t, token)
              for t, (i, token) in enumerate(zip(ids.tolist(), tokenizer.convert_ids_to_tokens(ids.tolist()),
                                                 strict=True))
              if i not in drop]
    if not prompt:
        return tokenizer.convert_tokens_to_string(tokens).lstrip()
    head = tokenizer.convert_ids_to_tokens(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    context = tokenizer.convert_tokens_to_string(head)
    text = tokenizer.convert_tokens_to_string(head + tokens)
    # The decoder reads a token's neighbours (a quote's side, "don ' t"): where the prompt decodes otherwise
    # with the continuation after it, the continuation is decoded on its own.
    text = text[len(context):] if text.startswith(context) else tokenizer.convert_tokens_to_string(tokens)
    return (prompt.rstrip() + text).strip()
