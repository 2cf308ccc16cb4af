"""Word tokens back to running text: a ``tokenizers`` decoder, saved in ``tokenizer.json``.

A word-level tokenizer cuts punctuation off words (``split_punctuation``) or reads text that was tokenized
already (Brown, Penn Treebank: ``,`` ``n't`` ``'s`` ```` `` ```` ``''`` are tokens). The tokenizer of
tokenized text decodes to its tokens joined by single spaces (:func:`tokenized_text_decoder`), which encode to
the same ids again: ``was n't`` stays ``was n't``. Where the tokenizer cut the punctuation off (the word-level
and numeracy ``split_punctuation``) or cuts numerals out of words (the numeracy tokenizer), encoding keeps no
trace of where the spaces were, so decoding puts them back by rule (:func:`word_decoder`), the way a
Moses-style detokenizer does (Koehn et al. 2007): every token gets a space in front of it, then the spaces
that English punctuation does not take are removed (``tokenizer.backend_tokenizer.decoder = word_decoder()``
gives a tokenizer of tokenized text these rules too, for reading rather than feeding back):

* none before ``, . ; : ! ? %``, closing brackets and quotes (``) ] }`` ``''`` ``”`` ``’``) and the clitics
  ``n't 's 're 've 'll 'd 'm``;
* none after opening brackets and quotes (``( [ {`` ```` `` ```` `````` ``“`` ``‘``), nor between a
  currency sign and the number after it (``$ 5`` -> ``$5``), nor between the two ``-`` of a ``--``;
* a straight double quote ``"`` opens or closes by parity: the first, third, ... quote token of the text
  opens, the others close. The same for a lone ``'`` where the pre-tokenizer cuts opening single quotes off
  (Brown's ``' pro '``, the numeracy tokenizer's ``split_punctuation``); the word-level
  ``split_punctuation`` keeps an opening ``'`` on its word (``'tis``), so a lone ``'`` there closes
  (``dogs'``, ``'no'``).

The numeracy tokenizer cuts numerals out of words and, with ``split_punctuation``, every punctuation mark
(``U.S.`` -> ``U . S .``, ``don't`` -> ``don ' t``, ``mid-1990s`` -> ``mid - 1990s``); its decoder also joins
``-`` ``:`` ``/`` between numerals (``10-20``, ``10:30``, ``1/2``), and with ``split_punctuation`` ``-``
and ``/`` between any two words, an apostrophe before a clitic (``don't``, ``it's``) and the points of a
single-letter abbreviation (``U.S.``, ``e.g.``).

Every rule is a regular expression over the joined text (Oniguruma, with look-behinds of any length: the
parity of quotes is counted from the start of the text), so the decoder is part of ``tokenizer.json`` and
``AutoTokenizer.from_pretrained`` + ``pipeline("text-generation")`` decode with it and no code of ours.

The text starts with a space unless its first token attaches to what comes before it (``,``): a
continuation decoded on its own, as ``pipeline("text-generation")`` decodes it before appending it to the
prompt, is then a new word or attaches to the prompt's last one. Where the pre-tokenizer dropped a space
that was there (``10 - 20``, a plural possessive ``workers'`` under the numeracy ``split_punctuation``, a
``"`` whose partner is in the prompt of a continuation) the rule guesses wrong; the ids, and so every model
and perplexity, are the same whatever the decoder writes.
"""

from __future__ import annotations

from tokenizers import Regex, decoders

#: Stand-ins for the quote tokens whose side is read from their parity: private-use characters, which no
#: text of the corpora holds.
DOUBLE_QUOTE_MARK = "\ue000"
SINGLE_QUOTE_MARK = "\ue001"

_END = r"(?= |\z)"  # the end of a token: every token starts with a space
_CLITIC = r"(?i:n't|'s|'re|'ve|'ll|'d|'m)"
_CLOSING = r"[,.;:!?%…\p{Pe}\p{Pf}]+|''|" + _CLITIC
_OPENING = r"[\p{Ps}\p{Pi}`]+"
_NUMBER_START = r"[-+]?\.?\p{Nd}"
_NUMBER_END = r"\p{Nd}"


def _opens_or_closes(mark: str) -> str:
    """The space after an odd-numbered ``mark`` token or before an even-numbered one."""
    odd_so_far = rf"(?<=\A[^{mark}]*{mark}(?:[^{mark}]*{mark}[^{mark}]*{mark})*[^{mark}]*)"
    return rf" (?:(?={mark}{_END})|(?<= {mark} )){odd_so_far}"


def _between(infix: str, left: str, right: str) -> list[str]:
    """The two spaces around an ``infix`` token that stands between a token ending in ``left`` and one
    starting with ``right``."""
    return [rf"(?<={left}) (?={infix} {right})", rf"(?<={left} {infix}) (?={right})"]


def tokenized_text_decoder() -> decoders.Decoder:
    """The decoder of the word-level tokenizer of text tokenized already (``split_punctuation=False``): every
    token with one space in front of it, so that the decoded text encodes to the same ids again (Penn
    Treebank's ``was n't`` stays two tokens, where :func:`word_decoder` would write ``wasn't``, one word
    that the vocabulary may not hold).

    >>> tokenized_text_decoder().decode(["no", "it", "was", "n't", "black", "monday", "."])
    " no it was n't black monday ."
    """
    return decoders.Sequence([decoders.Replace(Regex("^"), " "), decoders.Fuse()])


def word_decoder(split_punctuation: bool = False, numerals: bool = False) -> decoders.Decoder:
    """The decoder of the word-level (``numerals=False``) or numeracy tokenizer with that
    ``split_punctuation``: tokens joined into text as the module docstring says.

    >>> word_decoder(True).decode(["He", "said", '"', "no", '"', ",", "(", "twice", ")", "."])
    ' He said "no", (twice).'
    """
    removed = [
        rf" (?=(?:{_CLOSING}){_END})",
        rf"(?<= {_OPENING}) ",
        rf"(?<= \p{{Sc}}) (?={_NUMBER_START})",
        rf"(?<= -) (?=-{_END})",
        _opens_or_closes(DOUBLE_QUOTE_MARK),
    ]
    marks = [(rf'(?<= )"{_END}', DOUBLE_QUOTE_MARK, '"')]
    lone_apostrophe = rf"(?<= )'{_END}"
    if split_punctuation and not numerals:
        removed.append(rf" (?='{_END})")  # an opening ' stays on its word: a lone one closes
    else:
        clitic = r"(?i:t|s|re|ve|ll|d|m)"
        if split_punctuation:  # "don ' t": an apostrophe between a word and a clitic is no quote
            removed += _between("'", r"[\p{L}\p{N}]", clitic + _END)
            lone_apostrophe = (rf"(?<![\p{{L}}\p{{N}}] ){lone_apostrophe}|"
                               rf"{lone_apostrophe}(?! {clitic}{_END})")
        marks.append((lone_apostrophe, SINGLE_QUOTE_MARK, "'"))
        removed.append(_opens_or_closes(SINGLE_QUOTE_MARK))
    if numerals:
        removed += _between("[-:/]", _NUMBER_END, _NUMBER_START)
        if split_punctuation:
            removed += _between("[-/]", r"[^ -]", r"[^ -]")
            removed.append(rf"(?<= \p{{L}} \.) (?=\p{{L}} \.{_END})")  # U . S . -> U.S.
    return decoders.Sequence([
        decoders.Replace(Regex("^"), " "),
        decoders.Fuse(),
        *(decoders.Replace(Regex(pattern), mark) for pattern, mark, _ in marks),
        decoders.Replace(Regex("|".join(removed)), ""),
        *(decoders.Replace(mark, text) for _, mark, text in marks),
    ])
