"""The Hugging Face Hub side of a model: its card (:mod:`~hf_nlm.hub.model_card`) and its upload
(:mod:`~hf_nlm.hub.push`: ``model.push_to_hub`` and ``hf-nlm push``)."""

from .model_card import CARD_NAME, RESULTS_NAME, write_model_card, write_run_card
from .push import NO_TOKEN, HubError, push_model, push_run

__all__ = ["CARD_NAME", "NO_TOKEN", "RESULTS_NAME", "HubError", "push_model", "push_run", "write_model_card",
           "write_run_card"]
