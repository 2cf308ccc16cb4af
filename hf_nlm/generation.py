"""Generation settings: the defaults a trained model is saved with (:func:`set_generation_defaults`), and the check
of search and sampling settings that ``hf-nlm generate`` and the web demo make before generating
(:func:`check_generation_settings`)."""

from __future__ import annotations

#: A model a run makes never writes the same n-gram of this length twice (as BART's summarisation checkpoints do
#: with 3): beam search from a small LM otherwise settles into a loop.
NO_REPEAT_NGRAM_SIZE = 3

#: ``generate()``'s sampling settings when sampling and not given.
SAMPLING_DEFAULTS = {"temperature": 1.0, "top_k": 0, "top_p": 1.0}


def set_generation_defaults(model, tokenizer) -> None:
    """The generation config a trained model is saved with, so that ``generate()``, ``pipeline`` and ``hf-nlm
    generate`` write text rather than loops: no repeated n-gram (:data:`NO_REPEAT_NGRAM_SIZE`), and the
    unknown-word token suppressed: it stands for every word outside the vocabulary at once, so after many
    contexts it is the likeliest "word", and it reads as nothing. A numeracy tokenizer's ``<unk_num>`` stays: an
    open-vocabulary strategy writes an unseen numeral there. Both are plain ``GenerationConfig`` fields that
    ``generate()`` arguments override (``no_repeat_ngram_size=0``, ``suppress_tokens=None``)."""
    model.generation_config.no_repeat_ngram_size = NO_REPEAT_NGRAM_SIZE
    if tokenizer.unk_token_id is not None:
        model.generation_config.suppress_tokens = [tokenizer.unk_token_id]


def check_generation_settings(do_sample: bool = False, num_beams: int = 1, num_return_sequences: int = 1,
                              max_new_tokens: int | None = None, min_new_tokens: int | None = None,
                              temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
                              no_repeat_ngram_size: int | None = None) -> None:
    """Refuse search and sampling settings that make no sense, before a model generates (``ValueError`` naming the
    setting by its flag). None: not given."""
    if not do_sample:
        given = [f"--{name.replace('_', '-')}" for name, value in
                 (("temperature", temperature), ("top_k", top_k), ("top_p", top_p)) if value is not None]
        if given:
            raise ValueError(f"{' / '.join(given)} need --do-sample (greedy and beam search do not sample)")
    if temperature is not None and not temperature > 0:
        raise ValueError(f"--temperature must be > 0, got {temperature} (for the most likely token, drop --do-sample)")
    if top_k is not None and top_k < 0:
        raise ValueError(f"--top-k must be >= 0 (0 = all tokens), got {top_k}")
    if no_repeat_ngram_size is not None and no_repeat_ngram_size < 0:
        raise ValueError(f"--no-repeat-ngram-size must be >= 0 (0 = allow repeats), got {no_repeat_ngram_size}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"--top-p must be in (0, 1], got {top_p}")
    if min_new_tokens is not None and max_new_tokens is not None and not 0 <= min_new_tokens <= max_new_tokens:
        raise ValueError(f"--min-new-tokens must be between 0 and --max-new-tokens ({max_new_tokens}), "
                         f"got {min_new_tokens}")
    if num_return_sequences > 1 and not do_sample and num_return_sequences > num_beams:
        raise ValueError(f"--num-return-sequences {num_return_sequences} needs --do-sample or --num-beams >= "
                         f"{num_return_sequences} (greedy search has one continuation)")


__all__ = ["NO_REPEAT_NGRAM_SIZE", "SAMPLING_DEFAULTS", "check_generation_settings", "set_generation_defaults"]
