"""Title -> storyline -> story: the two-stage story generator of Yao et al. (2019,
"Plan-and-Write: Towards Better Automatic Storytelling"), each stage either approach.

A storyline is one keyword phrase per sentence (:mod:`hf_nlm.story.storylines`). Each stage is a model of
this package, and the kind of model decides how the stage is asked:

* **The LM approach**: one causal LM (AWD-LSTM first) trained on
  ``"title <sep> k1 # k2 # ... <sep> story"`` (:func:`hf_nlm.story.storylines.storyline_text`). Stage 1
  continues ``"title <sep>"`` up to the next ``<sep>``; stage 2 continues
  ``"title <sep> k1 # ... <sep>"`` up to ``<eos>``. One model can serve both stages.
* **The seq2seq approach** (Luong et al. 2015; Bahdanau et al. 2015): an encoder-decoder
  (``model_type="story_seq2seq"``) per stage, trained on the pairs of :func:`storyline_pairs`
  (title -> ``"k1 # k2 # ..."``) and :func:`story_pairs` (``"title <sep> k1 # ..."`` -> story).

``generate_kwargs`` (``num_beams``, ``length_penalty``, ``do_sample``, ``max_new_tokens``, ...) go to
``model.generate`` of both stages.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..data.storylines import story_pair_dataset, story_source, storyline_source
from .storylines import KEYWORD_SEP, SEP, storyline_text

#: What each stage generates at most, unless ``max_new_tokens`` is given.
MAX_STORYLINE_TOKENS = 40
MAX_STORY_TOKENS = 120


def storyline_pairs(stories, max_words: int | None = 3):
    """(title -> storyline) pairs (``source`` / ``target`` columns) from :func:`hf_nlm.data.load_rocstories`'
    output (a ``DatasetDict`` or one split), for the seq2seq approach's first stage."""
    return story_pair_dataset(stories, "storyline", max_words)


def story_pairs(stories, max_words: int | None = 3):
    """(``"title <sep> storyline"`` -> story) pairs for the seq2seq approach's second stage."""
    return story_pair_dataset(stories, "story", max_words)


def _is_seq2seq(model) -> bool:
    return bool(getattr(model.config, "is_encoder_decoder", False))


@torch.no_grad()
def _continue(model, tokenizer, prompt: str, stop_ids: list[int], max_new_tokens: int,
              **generate_kwargs) -> list[int]:
    """A causal LM's continuation of ``prompt`` (ids), cut before the first of ``stop_ids``."""
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids.to(model.device)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                         eos_token_id=stop_ids, pad_token_id=tokenizer.pad_token_id, **generate_kwargs)
    new = out[0, ids.shape[1]:].tolist()
    for i, token in enumerate(new):
        if token in stop_ids:
            return new[:i]
    return new


@torch.no_grad()
def _transduce(model, tokenizer, source: str, max_new_tokens: int, **generate_kwargs) -> str:
    """An encoder-decoder's output text for ``source``."""
    from ..evaluation import generate_targets

    return generate_targets(model, tokenizer, [source], max_new_tokens=max_new_tokens, **generate_kwargs)[0]


def _separator_id(tokenizer, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or token_id == tokenizer.unk_token_id:
        raise ValueError(f"the tokenizer has no {token!r} token: this LM was not trained on the storyline "
                         f"format 'title {SEP} k1 {KEYWORD_SEP} k2 ... {SEP} story' "
                         "(hf_nlm.story.storylines.storyline_lm_dataset)")
    return token_id


def _split_keywords(text: str) -> list[str]:
    return [k.strip() for k in text.split(KEYWORD_SEP) if k.strip()]


def generate_storyline(model, tokenizer, title: str, **generate_kwargs) -> list[str]:
    """Stage 1: the keyword phrases of a story with ``title``, one per planned sentence."""
    max_new_tokens = generate_kwargs.pop("max_new_tokens", MAX_STORYLINE_TOKENS)
    if _is_seq2seq(model):
        return _split_keywords(_transduce(model, tokenizer, storyline_source(title), max_new_tokens,
                                          **generate_kwargs))
    sep = _separator_id(tokenizer, SEP)
    ids = _continue(model, tokenizer, f"{title.strip()} {SEP}", [sep, tokenizer.eos_token_id], max_new_tokens,
                    **generate_kwargs)
    return _split_keywords(tokenizer.decode(ids, skip_special_tokens=True))


def generate_story(model, tokenizer, title: str, keywords: Sequence[str], **generate_kwargs) -> str:
    """Stage 2: the story of ``title`` that follows the storyline ``keywords``."""
    max_new_tokens = generate_kwargs.pop("max_new_tokens", MAX_STORY_TOKENS)
    if _is_seq2seq(model):
        return _transduce(model, tokenizer, story_source(title, keywords), max_new_tokens, **generate_kwargs)
    _separator_id(tokenizer, SEP)
    ids = _continue(model, tokenizer, storyline_text(title, keywords), [tokenizer.eos_token_id],
                    max_new_tokens, **generate_kwargs)
    return tokenizer.decode(ids, skip_special_tokens=True).strip()


def write_story(title: str, storyline_model, storyline_tokenizer, story_model=None, story_tokenizer=None,
                **generate_kwargs) -> dict:
    """Title -> storyline -> story. ``story_model`` / ``story_tokenizer`` default to the storyline
    stage's (one LM trained on the whole storyline format serves both stages).

    Returns ``{"title", "storyline": [phrases], "story"}``.
    """
    if not title or not title.strip():
        raise ValueError("write_story: the title is empty")
    story_model = story_model if story_model is not None else storyline_model
    story_tokenizer = story_tokenizer if story_tokenizer is not None else storyline_tokenizer
    keywords = generate_storyline(storyline_model, storyline_tokenizer, title, **dict(generate_kwargs))
    story = generate_story(story_model, story_tokenizer, title, keywords, **dict(generate_kwargs))
    return {"title": title.strip(), "storyline": keywords, "story": story}


__all__ = ["generate_story", "generate_storyline", "story_pairs", "story_source", "storyline_pairs",
           "storyline_source", "write_story"]
