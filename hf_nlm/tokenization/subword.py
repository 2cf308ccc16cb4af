"""Subword tokenizers (BPE, WordPiece) trained with the ``tokenizers`` library.

Both follow the special-token convention of :mod:`hf_nlm.tokenization.word_level`: ``<unk>`` is id 0,
``<eos>`` is id 1 and doubles as bos and pad, and encoding adds no tokens (the LM data code appends
``<eos>`` after each line itself). Literal ``<unk>`` / ``<eos>`` in the text (PTB and WikiText write
``<unk>``) encode to those ids, as they do in the word-level tokenizer.

Text is first split on whitespace only, so a subword never spans two words and punctuation stays
attached to its word ("world!" is one pre-token). Decoding inverts that: ``tok.decode(tok.encode(t))``
equals ``" ".join(t.split())`` (lowercased if ``lowercase=True``) for any text whose characters were
seen in training. A character never seen in training becomes ``<unk>``:

* BPE marks the start of each word with ``▁`` (sentencepiece's Metaspace) rather than a word-end
  suffix such as ``</w>``: with a suffix every character needs a second, word-final copy, and a
  character seen only inside words in training would become ``<unk>`` at the end of a test word.
  An unknown character becomes one ``<unk>`` piece; on decoding, every ``<unk>`` / ``<eos>`` is shown
  as a separate word, which is exact for PTB's literal ``<unk>`` words and approximate (a space
  too many) for an unknown character inside a word. The character ``▁`` itself decodes as a space.
* WordPiece (the ``##`` continuation prefix) turns a whole word into ``<unk>`` if any of its
  characters is unknown, or if it is longer than ``max_input_chars_per_word``.

Training is deterministic: the same texts and arguments give the same vocabulary and ids. (The
``tokenizers`` WordPiece trainer on its own is not: it numbers the ``##x`` pieces in hash-map order,
and merges with equal counts are ranked by those numbers. We give the ``##x`` pieces fixed, sorted
ids before training; see :func:`train_wordpiece_tokenizer`.)
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from .word_level import SPECIAL_TOKENS, UNK_TOKEN, wrap_tokenizer

#: Marks the start of a word in BPE pieces (the sentencepiece convention).
WORD_START = "\u2581"
#: Marks a non-initial piece of a word in WordPiece (the BERT convention).
CONTINUATION_PREFIX = "##"


def _check_arguments(texts: Iterable[str], vocab_size: int, min_frequency: int) -> None:
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of strings (e.g. lines), not a single string")
    if not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size must be an int larger than the {len(SPECIAL_TOKENS)} special tokens "
            f"{list(SPECIAL_TOKENS)}, got {vocab_size!r}"
        )
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")


def _check_trained(tokenizer: Tokenizer, vocab_size: int, units: str) -> None:
    """Raise a ValueError if training saw no text or could not fit the alphabet in ``vocab_size``."""
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size <= len(SPECIAL_TOKENS):
        raise ValueError(
            "cannot train a tokenizer on empty text: the training texts have no non-space characters"
        )
    # The trainers stop merging when the vocabulary is full but always keep every character, so an
    # oversized vocabulary means the characters alone did not fit; its size is the minimum needed.
    if size > vocab_size:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for this text: the {len(SPECIAL_TOKENS)} special tokens "
            f"and {units} already take {size} entries; use vocab_size >= {size} (and larger, to learn any "
            "merges)"
        )


def _normalizer(lowercase: bool) -> normalizers.Normalizer | None:
    return normalizers.Lowercase() if lowercase else None


def train_bpe_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    lowercase: bool = False,
    min_frequency: int = 2,
    show_progress: bool = True,
) -> PreTrainedTokenizerFast:
    """Train a byte-pair-encoding tokenizer (Sennrich et al. 2016) on ``texts``.

    Args:
        texts: training text, one line or sentence per item; read once.
        vocab_size: total number of ids, special tokens included. It must at least hold the special
            tokens, ``▁`` and every character of the training text; merges fill the rest.
        lowercase: lowercase the text (a normalizer, so also at encoding time).
        min_frequency: only merge pairs seen at least this often.
        show_progress: show the ``tokenizers`` progress bar.

    Returns:
        A ``PreTrainedTokenizerFast`` with ``<unk>`` = 0, ``<eos>`` = 1 (also bos and pad). Word-initial
        pieces start with ``▁`` ("▁the", "▁1", "9", "84").

    Raises:
        ValueError: for an empty text, ``vocab_size`` below the special tokens plus the alphabet, or
            ``min_frequency`` < 1.
    """
    _check_arguments(texts, vocab_size, min_frequency)
    tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
    tokenizer.normalizer = _normalizer(lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme="always"),
        ]
    )
    tokenizer.decoder = decoders.Sequence(
        [
            # Special tokens are cut out of the text before pre-tokenization, so they carry no word
            # marker; give them one so that "the <unk> year" does not decode as "the<unk> year" ...
            *(decoders.Replace(token, WORD_START + token) for token in SPECIAL_TOKENS),
            decoders.Fuse(),  # one string from here on
            # ... and an unknown word-initial character ("▁", "<unk>") does not give two spaces.
            decoders.Replace(WORD_START + WORD_START, WORD_START),
            # Every word, the first included, decodes with a space in front (as word_decoder() does):
            # a continuation decoded alone, as pipeline("text-generation") does, then stays apart
            # from the prompt.
            decoders.Replace(WORD_START, " "),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=show_progress,
    )
    tokenizer.train_from_iterator(texts, trainer)
    _check_trained(tokenizer, vocab_size, f"the {WORD_START!r} word marker and the characters of the text")
    return wrap_tokenizer(tokenizer)


def train_wordpiece_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    lowercase: bool = False,
    min_frequency: int = 2,
    max_input_chars_per_word: int = 100,
    show_progress: bool = True,
) -> PreTrainedTokenizerFast:
    """Train a WordPiece tokenizer (Schuster & Nakajima 2012; BERT's ``##`` convention) on ``texts``.

    As in ``tokenizers``, the vocabulary is learned by BPE merges over word-initial pieces and
    ``##``-prefixed continuation pieces; encoding is WordPiece's greedy longest match.

    Args:
        texts: training text, one line or sentence per item. Read twice (alphabet, then training): a
            one-shot iterator is first copied into a list.
        vocab_size: total number of ids, special tokens included. It must at least hold the special
            tokens and every character of the training text twice (``c`` and ``##c``).
        lowercase: lowercase the text (a normalizer, so also at encoding time).
        min_frequency: only merge pairs seen at least this often.
        max_input_chars_per_word: longer words encode as ``<unk>``.
        show_progress: show the ``tokenizers`` progress bar.

    Returns:
        A ``PreTrainedTokenizerFast`` with ``<unk>`` = 0, ``<eos>`` = 1 (also bos and pad), then the
        ``##c`` pieces of every character in sorted order, then the rest of the vocabulary.

    Raises:
        ValueError: for an empty text, ``vocab_size`` below the special tokens plus the alphabet, or
            ``min_frequency`` < 1.
    """
    _check_arguments(texts, vocab_size, min_frequency)
    if iter(texts) is texts:  # a generator or file object: keep it for the second pass
        texts = list(texts)
    normalizer = _normalizer(lowercase)
    pre_tokenizer = pre_tokenizers.WhitespaceSplit()

    # Pass 1: the alphabet. Every character gets a ## piece with a fixed (sorted) id, registered as
    # a special token of the *trainer* only, so the trainer never numbers them in hash-map order.
    # (A superset of what the trainer would add: also characters seen only at word starts, which
    # lets a test word with such a character inside it encode without <unk>.)
    alphabet: set[str] = set()
    for text in texts:
        alphabet.update(normalizer.normalize_str(text) if normalizer is not None else text)
    continuation_pieces = sorted(CONTINUATION_PREFIX + char for char in alphabet if not char.isspace())

    # Pass 2: train on a scratch tokenizer (its added tokens include those ## pieces) ...
    scratch = Tokenizer(models.WordPiece(unk_token=UNK_TOKEN, continuing_subword_prefix=CONTINUATION_PREFIX))
    scratch.normalizer = normalizer
    scratch.pre_tokenizer = pre_tokenizer
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *continuation_pieces],
        continuing_subword_prefix=CONTINUATION_PREFIX,
        show_progress=show_progress,
    )
    scratch.train_from_iterator(texts, trainer)
    _check_trained(scratch, vocab_size, "the characters of the text (as initial and ## pieces)")

    # ... then build the real one from its vocabulary, with only <unk> and <eos> special: as added
    # tokens the ## pieces would be cut out of raw text and dropped by skip_special_tokens.
    tokenizer = Tokenizer(
        models.WordPiece(
            vocab=scratch.get_vocab(with_added_tokens=False),
            unk_token=UNK_TOKEN,
            continuing_subword_prefix=CONTINUATION_PREFIX,
            max_input_chars_per_word=max_input_chars_per_word,
        )
    )
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    # cleanup=True would "fix" spacing around punctuation ("a ." -> "a."), breaking the round trip.
    # A space before every word-initial piece, none before "##" pieces: the same convention as
    # word_decoder(), so that a continuation decoded on its own starts with its space.
    tokenizer.decoder = decoders.Sequence(
        [
            decoders.Replace(Regex("^"), " "),
            decoders.Replace(" " + CONTINUATION_PREFIX, ""),
            decoders.Fuse(),
        ]
    )
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS]
    )
    return wrap_tokenizer(tokenizer)
