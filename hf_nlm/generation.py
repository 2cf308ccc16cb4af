"""The generation settings every model of this package is built with (:func:`generation_defaults`), and the
check of search and sampling settings that ``hf-nlm generate`` and the web demo make before generating
(:func:`check_generation_settings`).

Everything that makes a small model's continuation read as text lives in its ``generation_config``, as plain
``GenerationConfig`` fields, which ``save_pretrained`` writes to ``generation_config.json``, so
``model.generate(ids)``, ``pipeline("text-generation")`` and ``hf-nlm generate`` read the same settings and
give the same continuation. The model class makes them from its config when it is built
(``NLMPreTrainedModel.__init__``, where transformers makes a model's generation config from its config), so
a model built directly, by ``AutoModelForCausalLM.from_config`` or by ``train(spec)`` has them alike; the
token ids they name come from the config (``unk_token_id``, ``first_step_suppressed_ids``), which
``NLMConfig.from_tokenizer`` fills from the tokenizer. ``generate()`` arguments (and the command line's
flags) override each of them.

Why each one (the measurements: docs/generation.md, ``benchmarks/generation_defaults.py``):

* ``do_sample=False``: greedy or beam search. ``pipeline`` samples (temperature 0.7) for every model whose
  generation config leaves ``do_sample`` unset, so it is written out.
* ``max_new_tokens=20``: a continuation of 20 tokens at most whatever the prompt's length (left unset,
  ``generate()`` warns and takes 20 of its own, ``pipeline`` 256). It is a count of new tokens, not a
  ``max_length``: a saved total length would refuse every prompt as long as it. It is a default only: a call
  that gives ``max_length`` (as lm-evaluation-harness does, prompt + ``max_gen_toks``) stops at that total,
  although transformers would let the saved ``max_new_tokens`` win (``NLMPreTrainedModel.generate``).
* ``min_new_tokens=1``: never an empty continuation (``<eos>`` is refused at the first step). A saved minimum
  never exceeds the new tokens a call's maximum leaves (it would only make transformers warn).
* ``begin_suppress_tokens``: the punctuation tokens but the comma (:func:`first_step_suppressed_ids`), refused
  at the first step, so that a continuation starts with a word or goes on with a comma. A prompt that reads as
  a whole sentence ("in the last year") otherwise gets "." and the end of the text from beam search: 40% of
  held-out Brown prompts from a 90-second NPLM, 0% with it. The comma stays: it cannot end a sentence, and it
  is how a prompt cut mid-sentence most often goes on (refusing it too changes two to six times as many greedy
  continuations, for the same 0%).
* ``no_repeat_ngram_size=3``: no 3-gram twice (as BART's summarisation checkpoints): beam search from a small
  LM otherwise settles into a loop.
* ``suppress_tokens=[unk_token_id]``: the unknown-word token stands for every word outside the vocabulary at
  once, so after many contexts it is the likeliest "word", and it reads as nothing. A numeracy tokenizer's
  ``<unk_num>`` stays: an open-vocabulary numeral strategy writes an unseen numeral there.

Sampling settings (``top_k``, ``temperature``) and beam-only ones (``length_penalty``) are not saved:
transformers refuses to save a generation config that sets them while it does not sample or search with beams.
"""

from __future__ import annotations

import math
import unicodedata

#: New tokens of a continuation, at most and at least.
MAX_NEW_TOKENS = 20
MIN_NEW_TOKENS = 1

#: A trained model never writes the same n-gram of this length twice.
NO_REPEAT_NGRAM_SIZE = 3

#: ``generate()``'s sampling settings when sampling and not given: the model's own distribution. They are not
#: saved: transformers refuses to save a generation config that sets them while it does not sample.
SAMPLING_DEFAULTS = {"temperature": 1.0, "top_k": 0, "top_p": 1.0}


def is_punctuation(text: str) -> bool:
    """Whether ``text`` (a token's text, spaces around it ignored) is made of punctuation marks only: Unicode
    categories P* (``.``, ``,``, ``''``, ``--``, ``"``) and Sk, the modifier symbols, which hold the backquote
    of the opening quotes ```` `` ```` of Brown and Penn Treebank."""
    text = text.strip()
    categories = [unicodedata.category(c) for c in text]
    return bool(text) and all(c[0] == "P" or c == "Sk" for c in categories)


def punctuation_token_ids(tokenizer) -> list[int]:
    """The ids of ``tokenizer``'s vocabulary whose text is punctuation only (:func:`is_punctuation`), read
    through the tokenizer's own decoding (so a subword tokenizer's ``▁.`` or ``##.`` counts); special tokens
    never count."""
    special = set(tokenizer.all_special_ids)
    ids = [i for i in sorted(tokenizer.get_vocab().values()) if i not in special]
    texts = tokenizer.batch_decode([[i] for i in ids])
    return [i for i, text in zip(ids, texts, strict=True) if is_punctuation(text)]


#: Punctuation a continuation may start with: it goes on with the prompt's sentence and cannot end it.
CONTINUING_PUNCTUATION = (",",)


def first_step_suppressed_ids(tokenizer) -> list[int]:
    """The ids refused as a continuation's first token (``begin_suppress_tokens``): the punctuation tokens
    (:func:`punctuation_token_ids`) but those of :data:`CONTINUING_PUNCTUATION`."""
    ids = punctuation_token_ids(tokenizer)
    texts = tokenizer.batch_decode([[i] for i in ids])
    return [i for i, text in zip(ids, texts, strict=True) if text.strip() not in CONTINUING_PUNCTUATION]


def tokenizer_generation_ids(tokenizer) -> dict:
    """The model config fields the generation settings read, from ``tokenizer``: ``unk_token_id`` (suppressed)
    and ``first_step_suppressed_ids`` (:func:`first_step_suppressed_ids`, refused at the first step)."""
    return {"unk_token_id": tokenizer.unk_token_id,
            "first_step_suppressed_ids": first_step_suppressed_ids(tokenizer) or None}


def generation_defaults(config) -> dict:
    """The generation settings of the module docstring for a model with ``config`` (an ``NLMConfig``), as
    ``GenerationConfig`` fields: what every model of this package's ``generation_config`` starts from."""
    unk = getattr(config, "unk_token_id", None)
    first = getattr(config, "first_step_suppressed_ids", None)
    return {"do_sample": False, "max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": MIN_NEW_TOKENS,
            "no_repeat_ngram_size": NO_REPEAT_NGRAM_SIZE,
            "begin_suppress_tokens": list(first) if first else None,
            "suppress_tokens": [unk] if unk is not None else None}


def set_generation_defaults(model, tokenizer) -> None:
    """Give ``model`` the generation settings of the module docstring for ``tokenizer``: its config takes the
    tokenizer's ids (:func:`tokenizer_generation_ids`) and its ``generation_config`` the settings
    (:func:`generation_defaults`), both saved by ``save_pretrained``. A model whose config was made by
    ``NLMConfig.from_tokenizer`` has them from construction; this is for one whose config was not, or an old
    checkpoint whose ``generation_config.json`` lacks them."""
    for name, value in tokenizer_generation_ids(tokenizer).items():
        setattr(model.config, name, value)
    model.generation_config.update(**generation_defaults(model.config))


#: The temperatures sampling takes, both ends included. ``generate()`` divides the float32 logits by the
#: temperature: at 1e-30 a logit of magnitude up to 3e8 stays finite (float32 ends at 3.4e38), so the softmax
#: is defined, and is already greedy search's choice for any two logits more than 1e-28 apart (their odds are
#: exp(-100) or less); at 1e30 every such logit is within 3e-22 of 0, the distribution uniform over the tokens
#: allowed. Beyond them the division overflows
#: (``inf - inf``) or the temperature itself is not a float32 number (1e-45 is a subnormal, 1e300 is inf), and
#: torch's sampler fails on NaN probabilities.
MIN_TEMPERATURE = 1e-30
MAX_TEMPERATURE = 1e30


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_generation_settings(do_sample: bool = False, num_beams: int | None = 1,
                              num_return_sequences: int = 1,
                              max_new_tokens: int | None = None, min_new_tokens: int | None = None,
                              temperature: float | None = None, top_k: int | None = None,
                              top_p: float | None = None, no_repeat_ngram_size: int | None = None) -> None:
    """Refuse search and sampling settings that cannot be searched or sampled with, before a model generates
    (``ValueError`` naming the setting by its ``generate()`` keyword, ``temperature`` or ``top_p``, which a
    command line or a page says in its own words). None: not given, so not checked (the model's generation
    config decides it)."""
    if not do_sample:
        given = [name for name, value in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p))
                 if value is not None]
        if given:
            raise ValueError(f"{' / '.join(given)} need do_sample (greedy and beam search do not sample)")
    if temperature is not None and not (_is_number(temperature)
                                        and MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE):
        raise ValueError(f"temperature must be a number from {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}, got "
                         f"{temperature} (beyond them the sampling probabilities are not numbers; for the "
                         "most likely token, do not sample)")
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0 = all tokens), got {top_k}")
    if no_repeat_ngram_size is not None and no_repeat_ngram_size < 0:
        raise ValueError(f"no_repeat_ngram_size must be >= 0 (0 = allow repeats), got {no_repeat_ngram_size}")
    if top_p is not None and not (_is_number(top_p) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if max_new_tokens is not None and max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if min_new_tokens is not None and min_new_tokens < 0:
        raise ValueError(f"min_new_tokens must be >= 0, got {min_new_tokens}")
    if min_new_tokens is not None and max_new_tokens is not None and min_new_tokens > max_new_tokens:
        raise ValueError(f"min_new_tokens must be between 0 and max_new_tokens ({max_new_tokens}), "
                         f"got {min_new_tokens}")
    if num_beams is not None and num_beams < 1:
        raise ValueError(f"num_beams must be >= 1, got {num_beams}")
    if num_return_sequences < 1:
        raise ValueError(f"num_return_sequences must be >= 1, got {num_return_sequences}")
    n = num_return_sequences
    if n > 1 and not do_sample and num_beams is not None and n > num_beams:
        raise ValueError(f"num_return_sequences {num_return_sequences} needs do_sample or num_beams >= "
                         f"{num_return_sequences} (greedy search has one continuation)")


__all__ = ["CONTINUING_PUNCTUATION", "MAX_NEW_TOKENS", "MAX_TEMPERATURE", "MIN_NEW_TOKENS", "MIN_TEMPERATURE",
           "NO_REPEAT_NGRAM_SIZE", "SAMPLING_DEFAULTS", "check_generation_settings",
           "first_step_suppressed_ids", "generation_defaults", "is_punctuation", "punctuation_token_ids",
           "set_generation_defaults", "tokenizer_generation_ids"]
