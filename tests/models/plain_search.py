"""For the tests of the search itself (greedy, beam, exhaustive search against the model's own distribution):
a model with transformers' generation config made from its config alone, without the package's settings
(:func:`hf_nlm.generation.generation_defaults` refuses ``<unk>``, a first punctuation mark, a repeated
3-gram and an end at once), which would make the search's choice differ from the distribution's."""

from __future__ import annotations

from transformers import GenerationConfig


def plain_search(model):
    """``model``, its ``generation_config`` transformers' own for its config."""
    model.generation_config = GenerationConfig.from_model_config(model.config)
    return model
