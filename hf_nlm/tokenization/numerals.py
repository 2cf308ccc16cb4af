"""Numerals as first-class tokens (Spithourakis & Riedel, "Numeracy for Language Models", ACL 2018).

The paper's LMs read a text as a sequence of tokens that are either *words* or *numerals*; a
numeral keeps its value and its precision (digits after the point), and unseen words and unseen
numerals have their own unknown tokens, ``<unk_word>`` and ``<unk_num>``. This module holds

* the digit alphabet: a numeral's canonical string (ASCII digits, at most one ``.``, an optional
  leading ``-``) spelled over 12 symbols plus an end marker, the vocabulary of the character-RNN
  that encodes a numeral's digits (``softmax_digits``) and of the digit-RNN that spells one
  (``drnn``). Rows of a per-token ``digit_ids`` tensor are padded after the end marker with
  :data:`DIGIT_PAD`;
* the numeral recogniser: :func:`parse_numeral` (is ONE token a numeral?) and
  :data:`NUMERAL_PATTERN`, the regex with which the tokenizer cuts numerals out of the text;
* the tokenizer: :func:`train_numeracy_tokenizer` builds a :class:`NumeracyTokenizerFast`, whose
  ``token_features`` (:data:`NUMERAL_FEATURES`) give every token's ``numeral_mask``,
  ``numeral_value``, ``numeral_precision`` and ``digit_ids`` to :func:`hf_nlm.data.lm.tokenize_stream`.

Numeral policy
--------------
Full-width digits and ``．，－＋％`` are folded to ASCII (``３`` is ``3``; one character for one, so
offsets still point into the original text; not NFKC, which expands ``½`` into three characters),
split at whitespace, and every numeral is then cut out of its whitespace-separated piece; what is
left of the piece is a word (punctuation is not split off words: ``cat,`` stays one word, as with
the word-level tokenizer). A numeral is

* digits with an optional fraction: ``12``, ``2.50``, ``.5``, ``00012.500``;
* thousands separators only in valid groups of three: ``1,200`` and ``1,234,567.5`` are one numeral;
  anything else is a comma between numerals (``1,2,3`` is ``1 , 2 , 3``; ``1,2345`` is ``1 , 2345``);
* an optional sign ``-``, ``−`` (U+2212) or ``+``, which is a sign only at the start of a piece or
  right after an opening bracket ``( [ {``; after a digit or letter it is a word (``10-20`` is a range);
* not glued to a word: no letter, digit or ``_`` right before it (nor a letter and a hyphen, nor a
  word character and a ``.``), and no letter, digit or ``_`` right after it (nor a ``.`` and one),
  so ``1st``, ``5kg``, ``x2``, ``COVID-19``, ``1.2.3``, ``1e400`` are words;
* at most :data:`MAX_NUMERAL_LENGTH` canonical symbols: a longer one (a 300-digit number) is a word
  (``<unk_word>`` unless it is in the vocabulary as a word), so a value is never ``inf``.

Only ASCII digits (after folding) count: ``٣`` (Arabic-Indic) and ``½`` are words. ``NaN``, ``inf`` and
scientific notation are words. The canonical string (the digits the digit models spell) drops the
commas and a ``+``, writes ``−`` as ``-`` and keeps every written digit; the value is its float
(``-0`` has value 0.0, not -0.0); the precision r counts the digits after the point.

================  ================================  ==========================================
text              tokens                            numerals: canonical / value / precision
================  ================================  ==========================================
``12``            ``12``                            ``12`` / 12.0 / 0
``2.50``          ``2.50``                          ``2.50`` / 2.5 / 2
``00012.500``     ``00012.500``                     ``00012.500`` / 12.5 / 3
``.5``            ``.5``                            ``.5`` / 0.5 / 1
``1,200``         ``1,200``                         ``1200`` / 1200.0 / 0
``1,2,3``         ``1`` ``,`` ``2`` ``,`` ``3``     three numerals 1, 2, 3
``-5`` ``−5``     ``-5`` / ``−5``                   ``-5`` / -5.0 / 0
``+5``            ``+5``                            ``5`` / 5.0 / 0
``-0``            ``-0``                            ``-0`` / 0.0 / 0
``(-3)``          ``(`` ``-3`` ``)``                ``-3`` / -3.0 / 0
``10-20``         ``10`` ``-`` ``20``               a range: 10 and 20, no negative number
``2019-01-05``    ``2019`` ``-`` ``01`` ``-`` ``05``  a date: 2019, ``01`` (1.0), ``05`` (5.0)
``10:30``         ``10`` ``:`` ``30``               a time: 10 and 30
``1989``          ``1989``                          a year is an integer
``5%``            ``5`` ``%``                       ``5`` / 5.0 / 0, then the word ``%``
``$5.00``         ``$`` ``5.00``                    ``5.00`` / 5.0 / 2
``5.``            ``5`` ``.``                       a sentence's full stop is not a fraction
``３``             ``３``                             ``3`` / 3.0 / 0 (width folding)
``1st`` ``2nd``   ``1st`` / ``2nd``                 words (ordinals)
``1e400``         ``1e400``                         a word (no scientific notation)
``NaN`` ``inf``   ``NaN`` / ``inf``                 words
``1.2.3``         ``1.2.3``                         a word (a version, not a number)
300 digits        the digits, one token             a word: longer than MAX_NUMERAL_LENGTH
================  ================================  ==========================================
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers
from transformers import AutoTokenizer

from .detokenizer import word_decoder
from .features import TokenFeatures
from .word_level import EOS_TOKEN, NLMTokenizerFast, ranked_vocabulary, wrap_tokenizer

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
        raise ValueError(
            f"numeral {canonical!r} has {len(canonical)} symbols; a row of width {width} holds {width - 1}"
        )
    try:
        ids = [_SYMBOL_ID[symbol] for symbol in canonical]
    except KeyError as err:
        raise ValueError(
            f"numeral {canonical!r} is not canonical: {err.args[0]!r} is not one of {DIGIT_SYMBOLS!r}"
        ) from None
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


# ----------------------------------------------------------------------------- the numeral recogniser

#: An unsigned numeral: digits in valid thousands groups (the lookahead stops "1,2345" reading as
#: "1,234" + "5") or plain digits, then an optional fraction; or a bare fraction ".5".
_UNSIGNED = r"(?:(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
_SIGNS = "-−+"
#: One token that is a numeral, as :func:`parse_numeral` reads it (after width folding).
_NUMERAL_TOKEN = re.compile(f"[{_SIGNS}]?{_UNSIGNED}")

#: The numerals inside a whitespace-separated piece of (width-folded) text, in Oniguruma syntax
#: for ``tokenizers.pre_tokenizers.Split``: the unsigned numeral, a sign only at the start of the
#: piece or after an opening bracket, and lookarounds that keep numerals glued to words inside them
#: (see the policy in the module docstring). Every match that :func:`parse_numeral` accepts is a
#: numeral token; everything else the pre-tokenizer yields is a word.
NUMERAL_PATTERN = (
    r"(?<![\p{L}\p{N}_])(?<![\p{L}\p{N}_]\.)(?<!\p{L}[-−])"  # not glued to the word before it
    rf"(?:(?<![^\s(\[{{])[{_SIGNS}])?"  # a sign only where a number can start
    + _UNSIGNED
    + r"(?![\p{L}\p{N}_])(?!\.[\p{L}\p{N}_])"  # nor to the word after it
)


@dataclass(frozen=True)
class Numeral:
    """A numeral token: its exact ``text``, its ``canonical`` string over :data:`DIGIT_SYMBOLS`,
    its ``value`` and its ``precision`` r (digits after the point; Spithourakis & Riedel's r)."""

    text: str
    canonical: str
    value: float
    precision: int


#: Full-width digits and number punctuation -> their ASCII forms, one character for one (what NFKC
#: does for these, without NFKC's expansions of other characters).
WIDTH_FOLD = ({chr(0xFF10 + d): str(d) for d in range(10)}
              | {"．": ".", "，": ",", "－": "-", "＋": "+", "％": "%"})
_FOLD_TABLE = str.maketrans(WIDTH_FOLD)


def parse_numeral(text: str) -> Numeral | None:
    """The numeral that ``text`` (one whole token, as written) is, or None if it is a word.

    Follows the policy of the module docstring: ``parse_numeral("1,200.50")`` is
    ``Numeral("1,200.50", "1200.50", 1200.5, 2)``; ``"1st"``, ``"1,2,3"``, ``"1e400"``, ``"NaN"``,
    ``""`` and numerals of more than :data:`MAX_NUMERAL_LENGTH` canonical symbols are words (None).
    """
    normal = text.translate(_FOLD_TABLE)  # the tokenizer's normaliser: "３" reads as "3"
    if len(normal) > 2 * MAX_NUMERAL_LENGTH or not _NUMERAL_TOKEN.fullmatch(normal):
        return None  # the length test first: a long word is never run through the regex
    canonical = normal.replace(",", "").replace("−", "-").removeprefix("+")
    if len(canonical) > MAX_NUMERAL_LENGTH:
        return None
    fraction = canonical.partition(".")[2]
    # "+ 0.0" turns the -0.0 of "-0" into 0.0: a value, not a signed zero.
    return Numeral(text, canonical, float(canonical) + 0.0, len(fraction))


# ----------------------------------------------------------------------------- per-token side fields

#: The value of each numeral field where there is no numeral: words, ``<eos>``, padding.
NUMERAL_FILL = {"numeral_mask": 0, "numeral_value": 0.0, "numeral_precision": 0, "digit_ids": DIGIT_PAD}


def numeral_features(text: str, spans: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """The numeral fields of every token of one line, read from the token's own text ``text[start:end]``.

    ``numeral_mask`` (bool: a mask indexes, an int8 array would gather rows 0 and 1) is True for
    every numeral token, in the vocabulary or not (``<unk_num>`` keeps its value and digits here,
    which its id lost); ``numeral_value`` (float64) and ``numeral_precision`` (int64) are 0 for
    words; ``digit_ids`` (int8, (n, DIGITS_WIDTH)) is :func:`encode_digits` of the canonical string,
    all :data:`DIGIT_PAD` for words. int8 because the row is the stream's widest field (25 values per
    token, every word included) and its symbols are below :data:`NUM_DIGIT_SYMBOLS`; not uint8, which
    would index as a mask: an int8 tensor used as an index is refused, and the digit models read the
    rows through ``.long()``.
    """
    n = len(spans)
    mask = np.zeros(n, dtype=bool)
    value = np.zeros(n, dtype=np.float64)
    precision = np.zeros(n, dtype=np.int64)
    digits = np.full((n, DIGITS_WIDTH), DIGIT_PAD, dtype=np.int8)
    for i, (start, end) in enumerate(spans):
        numeral = parse_numeral(text[start:end])
        if numeral is not None:
            mask[i], value[i], precision[i] = True, numeral.value, numeral.precision
            digits[i] = encode_digits(numeral.canonical)
    return {"numeral_mask": mask, "numeral_value": value, "numeral_precision": precision, "digit_ids": digits}


#: The tokenizer's ``token_features``: a module-level function, so the tokenizer still pickles
#: (``datasets.map`` fingerprints a transform by pickling what it uses).
NUMERAL_FEATURES = TokenFeatures(numeral_features, NUMERAL_FILL)


# ----------------------------------------------------------------------------- the tokenizer

UNK_WORD_TOKEN = "<unk_word>"
UNK_NUM_TOKEN = "<unk_num>"
#: The first ids of every numeracy vocabulary: ``<unk_word>`` = 0 (the tokenizer's ``unk_token``),
#: ``<eos>`` = 1 (eos, bos and pad, as in :func:`hf_nlm.tokenization.word_level.wrap_tokenizer`),
#: ``<unk_num>`` = 2.
NUMERACY_SPECIAL_TOKENS = (UNK_WORD_TOKEN, EOS_TOKEN, UNK_NUM_TOKEN)


class NumeracyTokenizerFast(NLMTokenizerFast):
    """A word-level tokenizer whose tokens are words or numerals, with two unknown tokens.

    Spithourakis & Riedel's softmax strategy maps unseen words to ``UNK_word`` and unseen numerals
    to ``UNK_num``. The backend ``tokenizers.models.WordLevel`` has one ``unk_token`` (``<unk_word>``),
    so the unknown tokens whose text is a numeral are re-labelled ``<unk_num>`` after the backend
    has run, where transformers turns the backend's encodings into ids (:meth:`_encode_plus`, which
    ``__call__``, ``encode``, batches, ``return_offsets_mapping`` and ``pipeline("text-generation")``
    all go through). ``BatchEncoding.encodings`` / ``.tokens()`` are the backend's own and still say
    ``<unk_word>`` there; :meth:`tokenize` and :meth:`convert_tokens_to_ids` do not.

    The class defines no ``__init__`` on purpose: transformers then loads ``tokenizer.json`` as it
    is, and everything numeral-specific (``token_features``, the ids below) is a class attribute or
    a property, so it is there after ``from_pretrained``, pickling and ``copy.deepcopy``.

    Decoding writes running text (:mod:`hf_nlm.tokenization.detokenizer`: the tokens ``U . S . 5 %`` read
    ``U.S. 5%``) and keeps ``<unk_word>`` and ``<unk_num>`` visible even with ``skip_special_tokens=True``: an
    unknown token is not silently missing from generated text. (``<unk_num>`` is an ordinary vocabulary entry,
    not a special token.)
    """

    #: Per-token numeral fields for :func:`hf_nlm.data.lm.tokenize_stream`.
    token_features = NUMERAL_FEATURES

    @property
    def unk_word_token_id(self) -> int:
        return self.unk_token_id

    @property
    def unk_num_token_id(self) -> int | None:
        return self._tokenizer.token_to_id(UNK_NUM_TOKEN)

    @property
    def numeral_vocab(self) -> dict[str, int]:
        """Every numeral of the vocabulary with its id, and ``<unk_num>``: the numeral class of a
        hierarchical softmax. Computed from the vocabulary on each call: keep it if you need it often."""
        vocab = {token: i for token, i in self.get_vocab().items() if parse_numeral(token) is not None}
        return {**vocab, UNK_NUM_TOKEN: self.unk_num_token_id}

    # --- encoding: <unk_word> -> <unk_num> where the unknown token's text is a numeral

    def _encode_plus(self, text, text_pair=None, **kwargs):
        if kwargs.get("sanitize_control_tokens"):  # chat templates: no encodings to read texts from
            return super()._encode_plus(text, text_pair, **kwargs)
        split_into_words = kwargs.get("is_split_into_words", False)
        if split_into_words:
            batched = isinstance(text, (list, tuple)) and bool(text) and isinstance(text[0], (list, tuple))
        else:
            batched = isinstance(text, (list, tuple))
        if not batched:  # one code path: a batch of one, un-batched at the end exactly as transformers does
            # an empty pair is no pair there too
            text, text_pair = [text], ([text_pair] if text_pair else None)
        return_tensors = kwargs.pop("return_tensors", None)
        output = super()._encode_plus(text, text_pair, return_tensors=None, **kwargs)
        self._relabel_unknown_numerals(output, text, text_pair, split_into_words)
        if not batched and return_tensors is None and not kwargs.get("return_overflowing_tokens", False):
            data = {k: (v[0] if len(v) > 0 and isinstance(v[0], list) else v) for k, v in output.items()}
            return type(output)(data, output.encodings)
        return type(output)(dict(output), output.encodings, tensor_type=return_tensors)

    def _relabel_unknown_numerals(self, output, texts, pairs, split_into_words: bool) -> None:
        """Replace, in place, the ``<unk_word>`` ids of ``output`` whose original text is a numeral."""
        unk, unk_num = self.unk_token_id, self.unk_num_token_id
        if unk is None or unk_num is None:
            return
        samples = output.get("overflow_to_sample_mapping") or range(len(output["input_ids"]))
        for ids, encoding, sample in zip(output["input_ids"], output.encodings, samples, strict=True):
            if unk not in ids:
                continue
            for j, token_id in enumerate(ids):
                if token_id != unk:
                    continue
                sequence = encoding.sequence_ids[j]
                source = (texts if sequence == 0 else pairs)[sample]
                if split_into_words:  # offsets are relative to the word
                    source = source[encoding.word_ids[j]]
                start, end = encoding.offsets[j]
                if parse_numeral(source[start:end]) is not None:
                    ids[j] = unk_num

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False,
                 **kwargs) -> list[str]:
        ids = self._encode_plus(text, pair, add_special_tokens=add_special_tokens, **kwargs)["input_ids"]
        return self.convert_ids_to_tokens(ids)

    def _convert_token_to_id_with_added_voc(self, token: str) -> int:
        index = self._tokenizer.token_to_id(token)
        if index is not None:
            return index
        return self.unk_num_token_id if parse_numeral(token) is not None else self.unk_token_id

    def _encode_without_added_tokens(self, text: str) -> list[int]:
        ids = super()._encode_without_added_tokens(text)
        if self.unk_token_id not in ids:
            return ids
        # The backend's pieces are one token each (a word-level model), so they align with the ids.
        normal = self._tokenizer.normalizer.normalize_str(text) if self._tokenizer.normalizer else text
        pieces = [piece for piece, _ in self._tokenizer.pre_tokenizer.pre_tokenize_str(normal)]
        return [
            self.unk_num_token_id if i == self.unk_token_id and parse_numeral(piece) is not None else i
            for i, piece in zip(ids, pieces, strict=True)
        ]

    # --- decoding: the unknown tokens stay visible

    def _kept_special_ids(self) -> set[int]:
        return {self.unk_token_id, self.unk_num_token_id} - {None}

    def _decode_text(self, token_ids, skip_special_tokens: bool = False, **kwargs) -> str:
        if skip_special_tokens:
            token_ids = token_ids["input_ids"] if isinstance(token_ids, Mapping) else token_ids
            token_ids = [token_ids] if isinstance(token_ids, int) else token_ids
            drop = set(self.all_special_ids) - self._kept_special_ids()
            token_ids = [i for i in token_ids if int(i) not in drop]
        return super()._decode_text(token_ids, skip_special_tokens=False, **kwargs)

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        if skip_special_tokens and not isinstance(ids, int):
            drop = set(self.all_special_ids) - self._kept_special_ids()
            ids = [i for i in ids if int(i) not in drop]
        return super().convert_ids_to_tokens(ids, skip_special_tokens=False)


def numeracy_normalizer(lowercase: bool = False) -> normalizers.Normalizer:
    """Full-width digits and number punctuation folded to ASCII (:data:`WIDTH_FOLD`), then lowercasing if
    asked.

    Not NFKC: NFKC also expands characters into several (``½`` -> ``1⁄2``), and then the pieces cut
    from the expansion all point at the one original character, so a piece's own text (what its
    numeral value, its OOV type and the ``<unk_num>`` decision are read from) is lost. Folding one
    character into one keeps every offset exact."""
    steps = [normalizers.Replace(wide, narrow) for wide, narrow in WIDTH_FOLD.items()]
    return normalizers.Sequence(steps + ([normalizers.Lowercase()] if lowercase else []))


def numeracy_pre_tokenizer(split_punctuation: bool = False) -> pre_tokenizers.PreTokenizer:
    """Whitespace split, then every numeral (:data:`NUMERAL_PATTERN`) isolated from its piece; with
    ``split_punctuation`` also every punctuation character outside a numeral (``nation.`` is ``nation``
    ``.``, ``1,200.`` is ``1,200`` ``.``): one alternation, numerals first, so a numeral's own comma,
    point and sign stay inside it."""
    pattern = NUMERAL_PATTERN + (r"|\p{P}" if split_punctuation else "")
    return pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(pattern), behavior="isolated")]
    )


def numeracy_token_counts(texts: Iterable[str], lowercase: bool = False,
                          split_punctuation: bool = False) -> Counter:
    """Counts of the tokens (words and numerals) of ``texts``, cut exactly as the tokenizer cuts them."""
    normalizer, pre_tokenizer = numeracy_normalizer(lowercase), numeracy_pre_tokenizer(split_punctuation)
    counts: Counter = Counter()
    for text in texts:
        counts.update(piece for piece, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    return counts


def train_numeracy_tokenizer(
    texts: Iterable[str],
    max_vocab_size: int | None = None,
    min_frequency: int = 1,
    lowercase: bool = False,
    split_punctuation: bool = False,
) -> NumeracyTokenizerFast:
    """Build the vocabulary of Spithourakis & Riedel (2018): the top-K tokens, words and numerals alike.

    Args:
        texts: training text, one sentence (or line) per item.
        max_vocab_size: K, the number of ids in total, the three special tokens included (the paper
            keeps the 1000 most frequent tokens on clinical records, 5000 on arXiv abstracts).
            None keeps every token seen ``min_frequency`` times.
        min_frequency: keep tokens seen at least this often.
        lowercase: lowercase the text (a normalizer step, so also at encoding time); digits are unaffected.
        split_punctuation: cut punctuation off words too (``nation.`` -> ``nation`` ``.``), for raw text
            such as SOTU, MIMIC notes or arXiv abstracts; numerals keep their commas, points and signs.

    Returns:
        A :class:`NumeracyTokenizerFast`: ``<unk_word>`` = 0, ``<eos>`` = 1, ``<unk_num>`` = 2, then
        the tokens by descending training frequency, ties alphabetical (so the vocabulary is
        deterministic). Words out of the vocabulary encode as ``<unk_word>``, numerals as ``<unk_num>``.
    """
    counts = numeracy_token_counts(texts, lowercase, split_punctuation)
    vocab = ranked_vocabulary(counts, NUMERACY_SPECIAL_TOKENS, min_frequency, max_vocab_size)

    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_WORD_TOKEN))
    backend.normalizer = numeracy_normalizer(lowercase)
    backend.pre_tokenizer = numeracy_pre_tokenizer(split_punctuation)
    backend.decoder = word_decoder(split_punctuation, numerals=True)
    return wrap_tokenizer(backend, unk_token=UNK_WORD_TOKEN, tokenizer_class=NumeracyTokenizerFast)


def register_numeracy_tokenizer(config_class) -> None:
    """Let ``AutoTokenizer.from_pretrained`` load a saved :class:`NumeracyTokenizerFast` (offline, no remote
    code) for the model type of ``config_class``.

    transformers resolves the ``tokenizer_class`` of ``tokenizer_config.json`` by name among the classes given
    to ``AutoTokenizer.register``. Importing :mod:`hf_nlm` registers it with the numeracy LM's config, which
    is all a folder of tokenizer files alone needs; call this for another model type that uses the tokenizer.
    """
    AutoTokenizer.register(config_class, tokenizer_class=NumeracyTokenizerFast, exist_ok=True)


def canonical_digits(token: str) -> str | None:
    """The canonical string of a numeral token (None for a word or a special token such as ``<unk_num>``):
    what the digit models read."""
    numeral = parse_numeral(token)
    return numeral.canonical if numeral is not None else None
