"""Small saved run folders for the web demo's tests: an NPLM with a Kneser-Ney 3-gram beside it."""

from __future__ import annotations

import pytest
import torch
from app_runs import TEXTS, save, special_ids

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.app import load_page_run
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
    return load_page_run(folder)


@pytest.fixture(scope="session")
def every_kind_of_run(tmp_path_factory, word_tokenizer, nplm_run):
    """One run of each tab's kind, small: the NPLM (with its 3-gram), a numeracy LM with a MoG head (the
    density picture), an HLBL over a random tree, and a story seq2seq model serving both stages."""
    from hf_nlm import HLBLConfig, HLBLForCausalLM
    from hf_nlm.models import (
        NumeracyLMConfig,
        NumeracyLMForCausalLM,
        StorySeq2SeqConfig,
        StorySeq2SeqForConditionalGeneration,
    )
    from hf_nlm.tokenization import train_numeracy_tokenizer
    from hf_nlm.trees import random_tree

    root = tmp_path_factory.mktemp("kinds")
    torch.manual_seed(0)
    numbers = train_numeracy_tokenizer(["in 1990 the deficit was 3.5 billion , up 12 % ."] * 4,
                                       max_vocab_size=30)
    numeracy = NumeracyLMForCausalLM(NumeracyLMConfig(
        vocab_size=len(numbers), embedding_size=8, hidden_size=8, numeral_strategy="mog",
        numeral_vocab=numbers.numeral_vocab, mog_components=3, bos_token_id=numbers.eos_token_id,
        eos_token_id=numbers.eos_token_id, pad_token_id=numbers.eos_token_id))
    tok = word_tokenizer
    tree = HLBLForCausalLM(HLBLConfig(vocab_size=len(tok), context_size=2, hidden_size=4, **special_ids(tok)),
                           tree=random_tree(len(tok), seed=1))
    stories = train_word_level_tokenizer(["the picnic # rain # went home", "we had a picnic . it rained .",
                                          "<sep> #"])
    story = StorySeq2SeqForConditionalGeneration(StorySeq2SeqConfig(
        vocab_size=len(stories), embedding_size=8, hidden_size=8, dropout=0.0,
        pad_token_id=stories.pad_token_id, bos_token_id=stories.eos_token_id,
        eos_token_id=stories.eos_token_id, decoder_start_token_id=stories.eos_token_id))
    return [nplm_run] + [load_page_run(save(model, tokenizer, root / name)) for model, tokenizer, name in
                         ((numeracy, numbers, "numeracy"), (tree, tok, "hlbl"), (story, stories, "story"))]
