"""Word-level vocabularies with a frequency cut-off and frequency-sorted ids.

The papers reproduced here (Bengio et al. 2003, Mnih & Hinton 2008, Merity et al. 2018) all model
whitespace-separated words over a closed vocabulary: words seen fewer than ``min_frequency`` times in
the training text become ``<unk>``. Ids are assigned by descending training frequency (ties broken
alphabetically, so the vocabulary is deterministic), after the special tokens; split softmax and
frequency-based word trees rely on that order.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from ..remote_code import write_tokenizer_code
from .detokenizer import tokenized_text_decoder, word_decoder
from .files import check_tokenizer_files

UNK_TOKEN = "<unk>"
EOS_TOKEN = "<eos>"
SPECIAL_TOKENS = (UNK_TOKEN, EOS_TOKEN)


class NLMTokenizerFast(PreTrainedTokenizerFast):
    """transformers' ``PreTrainedTokenizerFast`` for the tokenizers this package trains (word-level, BPE,
    WordPiece; the numeracy tokenizer is a subclass). Saved under this name in ``tokenizer_config.json``, so
    that ``AutoTokenizer.from_pretrained`` (after ``import hf_nlm``, which every model of this package needs
    too) comes here: a damaged tokenizer file of a local folder is named first
    (:func:`~hf_nlm.tokenization.check_tokenizer_files`), where transformers raises a bare
    ``JSONDecodeError``. Folders saved as ``PreTrainedTokenizerFast`` load as before."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        if pretrained_model_name_or_path is not None and os.path.isdir(pretrained_model_name_or_path):
            check_tokenizer_files(pretrained_model_name_or_path)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' ``save_pretrained``, with ``tokenizer_config.json``'s ``auto_map`` and the code file
        it names, so that ``AutoTokenizer.from_pretrained(folder, trust_remote_code=True)`` loads this class
        in a process that has not imported hf_nlm (:mod:`hf_nlm.remote_code`), a folder of tokenizer files
        alone included."""
        if not os.path.isfile(save_directory):  # transformers refuses a file with its own message
            self._auto_map = write_tokenizer_code(save_directory, type(self))
        return super().save_pretrained(save_directory, *args, **kwargs)

    def _decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=None,
                **kwargs) -> str:
        """transformers' ``_decode``, without the space the decoder writes in front of a continuation
        (:mod:`hf_nlm.tokenization.detokenizer`) where the ids start at a sentence boundary: a first id that
        is ``bos_token_id`` (``<eos>``), shown or skipped, starts a text, which then starts with its first
        word (``decode(model.generate(...)[0], skip_special_tokens=True)`` for a prompt that starts with
        ``<eos>`` or an empty one). Ids that start with a word read as a continuation and keep the space in
        front, which ``pipeline("text-generation")`` needs to append the continuation to its prompt. No text
        ends with a space."""
        text = self._decode_text(token_ids, skip_special_tokens=skip_special_tokens,
                                 clean_up_tokenization_spaces=clean_up_tokenization_spaces, **kwargs)
        ids = token_ids["input_ids"] if isinstance(token_ids, Mapping) else token_ids
        ids = [ids] if isinstance(ids, int) else ids
        if len(ids) and self.bos_token_id is not None and int(ids[0]) == self.bos_token_id:
            text = text.lstrip()
        return text.rstrip()

    def _decode_text(self, token_ids, skip_special_tokens=False, **kwargs) -> str:
        """The text of ``token_ids`` as the decoder writes it (transformers' ``_decode``); subclasses choose
        here which special tokens show."""
        return super()._decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)

    @classmethod
    def register_for_auto_class(cls, auto_class="AutoTokenizer"):
        """Nothing: :meth:`save_pretrained` writes this package's auto_map itself. transformers calls this on
        a class it loaded as remote code; its own version would make every later save copy the defining
        module, whose relative imports of the rest of the package do not load from a model folder."""


def wrap_tokenizer(
    tokenizer: Tokenizer, unk_token: str = UNK_TOKEN, tokenizer_class: type = NLMTokenizerFast
) -> PreTrainedTokenizerFast:
    """Wrap a ``tokenizers.Tokenizer`` with the hf_nlm special-token convention.

    ``<unk>`` (or ``unk_token``) is id 0; ``<eos>`` (id 1) marks sentence ends and doubles as bos and
    pad, as ``<|endoftext|>`` does for GPT-2: an LM trained on sentence streams reads ``<eos>`` as "a
    new sentence starts here", which is exactly what a prompt's left context should say.
    Because pad == eos, a collator that finds padding by comparing ids with ``pad_token_id`` (transformers'
    ``DataCollatorForLanguageModeling(mlm=False)``) also drops every ``<eos>`` from the targets: with
    transformers' ``Trainer`` use :class:`hf_nlm.data.DataCollatorForCausalLM`, which pads by length
    (:func:`hf_nlm.data.check_collator` tells whether a collator keeps the sentence ends).
    ``tokenizer_class``: the :class:`NLMTokenizerFast` subclass to build (the numeracy tokenizer's).
    """
    sentence_boundary = dict.fromkeys(("eos_token", "bos_token", "pad_token"), EOS_TOKEN)
    return tokenizer_class(tokenizer_object=tokenizer, unk_token=unk_token, **sentence_boundary,
                           clean_up_tokenization_spaces=False)


def ranked_vocabulary(
    counts: Counter, special_tokens: tuple[str, ...], min_frequency: int = 1,
    max_vocab_size: int | None = None,
) -> dict[str, int]:
    """token -> id: ``special_tokens`` first, then the tokens seen at least ``min_frequency`` times by
    descending count (ties alphabetical, so the vocabulary is deterministic), cut to ``max_vocab_size``
    ids in total. Special tokens written in the text count as the special tokens, not as words."""
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")
    if not counts:
        raise ValueError("cannot build a vocabulary from empty training text")
    counts = Counter({t: c for t, c in counts.items() if t not in special_tokens})
    tokens = sorted((t for t, c in counts.items() if c >= min_frequency), key=lambda t: (-counts[t], t))
    if max_vocab_size is not None:
        if max_vocab_size <= len(special_tokens):
            raise ValueError(
                f"max_vocab_size must exceed the {len(special_tokens)} special tokens, got {max_vocab_size}"
            )
        tokens = tokens[: max_vocab_size - len(special_tokens)]
    return {tok: i for i, tok in enumerate([*special_tokens, *tokens])}


#: Punctuation cut off a word by ``split_punctuation``: a punctuation character at a word's start or end
#: (``Nation,`` -> ``Nation`` ``,``; ``"people"`` -> ``"`` ``people`` ``"``), never one between two letters or
#: digits (``don't``, ``mid-1990s``, ``22,000``), nor an apostrophe that starts a clitic (``'s``, ``'re``),
#: nor the last point of an abbreviation written with points (``U.S.``). Text tokenized already (Penn
#: Treebank: ``n't``, ``'s``, ``<unk>``) keeps its tokens.
EDGE_PUNCTUATION = r"(?<!\w)(?!'\w)\p{P}|(?<!\.\w)\p{P}(?!\w)"

#: Under ``split_punctuation=None`` punctuation is cut off when at least this share of the training words
#: carry a comma, semicolon, colon, question or exclamation mark or double quote at their end (raw text:
#: 4.8% of State of the Union words; tokenized text such as Penn Treebank: none).
ATTACHED_PUNCTUATION_SHARE = 0.01
_ATTACHED = re.compile(r"\w[,;:!?\"]+$")


def attached_punctuation_share(texts: Iterable[str]) -> float:
    """The share of whitespace words of ``texts`` that end in punctuation attached to a letter or digit."""
    words = attached = 0
    for text in texts:
        for word in text.split():
            words += 1
            attached += _ATTACHED.search(word) is not None
    return attached / words if words else 0.0


def word_pre_tokenizer(split_punctuation: bool = False) -> pre_tokenizers.PreTokenizer:
    """Whitespace words, and with ``split_punctuation`` the punctuation at their edges as tokens of its own
    (:data:`EDGE_PUNCTUATION`)."""
    if not split_punctuation:
        return pre_tokenizers.WhitespaceSplit()
    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                    pre_tokenizers.Split(Regex(EDGE_PUNCTUATION), behavior="isolated")])


def word_counts(texts: Iterable[str], lowercase: bool = False, split_punctuation: bool = False) -> Counter:
    """Counts of the words of ``texts`` (after lowercasing if asked), cut as :func:`word_pre_tokenizer` cuts
    them."""
    counts: Counter = Counter()
    if not split_punctuation:
        for text in texts:
            counts.update((text.lower() if lowercase else text).split())
        return counts
    pre_tokenizer = word_pre_tokenizer(True)
    for text in texts:
        counts.update(piece for piece, _ in
                      pre_tokenizer.pre_tokenize_str(text.lower() if lowercase else text))
    return counts


def train_word_level_tokenizer(
    texts: Iterable[str],
    min_frequency: int = 1,
    lowercase: bool = False,
    max_vocab_size: int | None = None,
    split_punctuation: bool = False,
) -> PreTrainedTokenizerFast:
    """Build a word-level tokenizer from training ``texts``.

    Args:
        texts: training text, one sentence (or line) per item; words are separated by whitespace.
        min_frequency: keep words seen at least this often. Bengio et al. merge words of frequency
            <= 3 on Brown, i.e. ``min_frequency=4``.
        lowercase: lowercase before counting and at encoding time (a normalizer of the tokenizer).
        max_vocab_size: keep at most this many ids in total (special tokens included), the most frequent.
        split_punctuation: cut punctuation off the edges of words (:data:`EDGE_PUNCTUATION`), for raw text;
            :func:`attached_punctuation_share` tells whether a text needs it. It also picks the decoder: with
            it, :func:`~hf_nlm.tokenization.detokenizer.word_decoder` writes the text as English does
            (``Nation`` ``,`` -> ``Nation,``); without it (text tokenized already), decoding is the inverse of
            encoding, the tokens joined by single spaces
            (:func:`~hf_nlm.tokenization.detokenizer.tokenized_text_decoder`: ``was n't`` stays ``was n't``).

    Returns:
        A ``PreTrainedTokenizerFast``: ``<unk>`` = 0, ``<eos>`` = 1, then words by descending frequency.
    """
    counts = word_counts(texts, lowercase, split_punctuation)
    vocab = ranked_vocabulary(counts, SPECIAL_TOKENS, min_frequency, max_vocab_size)
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    if lowercase:
        tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = word_pre_tokenizer(split_punctuation)
    # Raw text decodes as English writes it; tokenized text (Penn Treebank's ``was n't``) decodes to its
    # tokens joined by spaces, which encode to the same ids again. The decoder is saved in tokenizer.json.
    tokenizer.decoder = word_decoder(True) if split_punctuation else tokenized_text_decoder()
    return wrap_tokenizer(tokenizer)


#: A word-level or numeracy vocabulary leaving more than this share of the training tokens unknown is refused,
#: with settings that leave at most :data:`SUGGESTED_UNKNOWN_SHARE`.
MAX_UNKNOWN_SHARE = 0.5
SUGGESTED_UNKNOWN_SHARE = 0.1


def check_vocabulary_coverage(tokenizer, counts: dict[str, int], min_frequency: int, vocab_size: int | None,
                              specials: tuple[str, ...] = ("<unk>", "<eos>")) -> None:
    """Refuse a vocabulary under which more than :data:`MAX_UNKNOWN_SHARE` of the training tokens (``counts``,
    token -> count as the tokenizer splits the text) are unknown, naming the setting that cut it and a value
    that keeps :data:`SUGGESTED_UNKNOWN_SHARE` or less unknown. ``specials``: the tokenizer's special tokens,
    those starting with ``<unk`` being its unknowns."""
    vocab = tokenizer.get_vocab()
    unknown_tokens = {t for t in specials if t.startswith("<unk")}
    total = sum(counts.values())
    unknown = sum(c for t, c in counts.items() if t not in vocab or t in unknown_tokens)
    if not total or unknown <= MAX_UNKNOWN_SHARE * total:
        return
    words = len(vocab) - len(specials)
    ranked = sorted((c for t, c in counts.items() if t not in specials), reverse=True)
    # The share left unknown keeping the `kept` most frequent words (an <unk> written in the text stays
    # unknown).
    left = total - sum(c for t, c in counts.items() if t in specials and t not in unknown_tokens)
    kept = 0
    while kept < len(ranked) and left > SUGGESTED_UNKNOWN_SHARE * total:
        left -= ranked[kept]
        kept += 1
    cut_by_size = vocab_size is not None and sum(1 for c in ranked if c >= min_frequency) > words
    if cut_by_size:
        flag, fix = f"--vocab-size {vocab_size}", f"--vocab-size {kept + len(specials)}"
    else:
        flag, fix = f"--min-frequency {min_frequency}", f"--min-frequency {ranked[kept - 1] if kept else 1}"
    raise ValueError(
        f"{flag} keeps {words:,} of the {len(ranked):,} distinct training words: {unknown:,} of the "
        f"{total:,} training tokens ({unknown / total:.1%}) would be unknown, more than "
        f"{MAX_UNKNOWN_SHARE:.0%}; {fix} leaves at most {SUGGESTED_UNKNOWN_SHARE:.0%} unknown"
    )
