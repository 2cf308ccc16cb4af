"""Small saved run folders for the web demo's tests: an NPLM with a Kneser-Ney 3-gram beside it."""

from __future__ import annotations

import pytest
import torch
from app_runs import TEXTS, save, special_ids

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.app import load_run
from hf_nlm.ngram import KneserNeyLM
from hf_nlm.tokenization import train_word_level_tokenizer


@pytest.fixture(scope="session")
def word_tokenizer():
    return train_word_level_tokenizer(TEXTS)


@pytest.fixture(scope="session")
def nplm_run(tmp_path_factory, word_tokenizer):
    tok = word_tokenizer
    torch.manual_seed(0)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tok), context_size=2, embedding_size=8, hidden_size=8,
                                       initializer_range=0.5, **special_ids(tok)))
    folder = save(model, tok, tmp_path_factory.mktemp("app") / "nplm")
    KneserNeyLM.from_texts(TEXTS, tok, 3).save(folder / "kneser-ney-3gram")
    return load_run(folder)
