"""Which tokenizer a run trains: :class:`TokenizerSpec`, and :meth:`TokenizerSpec.train` on the training texts.

``word`` (whitespace words with a frequency cut-off: the papers' setting), ``numeracy`` (words and numerals,
Spithourakis & Riedel 2018), ``bpe`` / ``wordpiece`` (subwords). A word-level vocabulary that would leave most of
the training tokens unknown is refused, with a setting that keeps at most :data:`SUGGESTED_UNKNOWN_SHARE` unknown.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TOKENIZERS = ("word", "numeracy", "bpe", "wordpiece")

#: A word-level or numeracy vocabulary leaving more than this share of the training tokens unknown is refused,
#: with settings that leave at most :data:`SUGGESTED_UNKNOWN_SHARE`.
MAX_UNKNOWN_SHARE = 0.5
SUGGESTED_UNKNOWN_SHARE = 0.1


@dataclass(frozen=True)
class TokenizerSpec:
    """The tokenizer of a run, trained on its training texts.

    Args:
        kind: ``word``, ``numeracy``, ``bpe`` or ``wordpiece`` (the ``--tokenizer`` flag).
        min_frequency: keep words (word, numeracy) or merges (bpe, wordpiece) seen at least this often.
        vocab_size: the largest vocabulary (required for bpe and wordpiece); None: no cap.
        lowercase: lowercase the text before tokenizing.
        split_punctuation: word and numeracy tokenizers: cut punctuation off words; None: decided from the
            training text (:meth:`resolve`).
    """

    kind: str = "word"
    min_frequency: int = 1
    vocab_size: int | None = None
    lowercase: bool = False
    split_punctuation: bool | None = None

    def __post_init__(self) -> None:
        if self.kind not in TOKENIZERS:
            raise ValueError(f"--tokenizer {self.kind}: choose from {', '.join(TOKENIZERS)}")
        if self.min_frequency < 1:
            raise ValueError(f"--min-frequency must be >= 1, got {self.min_frequency}")
        if self.vocab_size is not None and self.vocab_size < 1:
            raise ValueError(f"--vocab-size must be >= 1, got {self.vocab_size}")
        if self.kind in ("bpe", "wordpiece") and self.vocab_size is None:
            raise ValueError(f"--tokenizer {self.kind} needs --vocab-size")

    @property
    def word_level(self) -> bool:
        return self.kind in ("word", "numeracy")

    def resolve(self, train_texts: Sequence[str]) -> TokenizerSpec:
        """This spec with ``split_punctuation`` decided where it is None: cut when the training text carries
        punctuation on its words (:data:`hf_nlm.tokenization.word_level.ATTACHED_PUNCTUATION_SHARE`), which raw
        text does and tokenized text (Penn Treebank) does not. The choice is said on stderr."""
        if not self.word_level or self.split_punctuation is not None:
            return self
        from .word_level import ATTACHED_PUNCTUATION_SHARE, attached_punctuation_share

        share = attached_punctuation_share(train_texts)
        split = share >= ATTACHED_PUNCTUATION_SHARE
        if int(os.environ.get("RANK", "0")) == 0:
            said = ("cut off the words (--no-split-punctuation keeps it on them)" if split else
                    "left as it is (--split-punctuation cuts it off the words)")
            print(f"punctuation: {share:.1%} of the training words carry some at their end; {said}", file=sys.stderr)
        return dataclasses.replace(self, split_punctuation=split)

    def train(self, train_texts: Sequence[str]):
        """The tokenizer this spec describes, trained on ``train_texts`` (``split_punctuation`` resolved first).
        A word-level vocabulary leaving most training tokens unknown raises ``ValueError``
        (:func:`check_vocabulary_coverage`)."""
        spec = self.resolve(train_texts)
        if spec.kind in ("bpe", "wordpiece"):
            try:
                from . import subword
            except ImportError as err:
                raise ValueError(f"--tokenizer {spec.kind} is not available in this install ({err})") from err
            train = subword.train_bpe_tokenizer if spec.kind == "bpe" else subword.train_wordpiece_tokenizer
            return train(train_texts, vocab_size=spec.vocab_size, min_frequency=spec.min_frequency,
                         lowercase=spec.lowercase)
        from .numerals import NUMERACY_SPECIAL_TOKENS, numeracy_token_counts, train_numeracy_tokenizer
        from .word_level import SPECIAL_TOKENS, train_word_level_tokenizer, word_counts

        numeracy = spec.kind == "numeracy"
        train, count = ((train_numeracy_tokenizer, numeracy_token_counts) if numeracy
                        else (train_word_level_tokenizer, word_counts))
        tokenizer = train(train_texts, min_frequency=spec.min_frequency, lowercase=spec.lowercase,
                          max_vocab_size=spec.vocab_size, split_punctuation=spec.split_punctuation)
        check_vocabulary_coverage(tokenizer, count(train_texts, spec.lowercase, spec.split_punctuation),
                                  spec.min_frequency, spec.vocab_size,
                                  NUMERACY_SPECIAL_TOKENS if numeracy else SPECIAL_TOKENS)
        return tokenizer

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def check_vocabulary_coverage(tokenizer, counts: Mapping[str, int], min_frequency: int, vocab_size: int | None,
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
    # The share left unknown keeping the `kept` most frequent words (an <unk> written in the text stays unknown).
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
        f"{flag} keeps {words:,} of the {len(ranked):,} distinct training words: {unknown:,} of the {total:,} "
        f"training tokens ({unknown / total:.1%}) would be unknown, more than {MAX_UNKNOWN_SHARE:.0%}; "
        f"{fix} leaves at most {SUGGESTED_UNKNOWN_SHARE:.0%} unknown"
    )


__all__ = ["MAX_UNKNOWN_SHARE", "SUGGESTED_UNKNOWN_SHARE", "TOKENIZERS", "TokenizerSpec", "check_vocabulary_coverage"]
