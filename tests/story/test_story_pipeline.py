"""Title -> storyline -> story (hf_nlm.story) with either approach per stage, and its CLI.

Tiny models are trained until they reproduce the fixture stories (written by us, in the official
ROCStories format); the pipeline must then give back each story's RAKE storyline and its text, which
the training data fixes independently of the pipeline's code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import GenerationConfig

from hf_nlm.data import load_rocstories
from hf_nlm.data.pairs import PairFormat, collate_pairs, tokenize_pairs
from hf_nlm.models import (
    AWDLSTMConfig,
    AWDLSTMForCausalLM,
    StorySeq2SeqConfig,
    StorySeq2SeqForConditionalGeneration,
)
from hf_nlm.story import story_pairs, story_source, storyline_pairs, write_story
from hf_nlm.story.storylines import storyline, storyline_lm_dataset
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm_cli import main as cli_main

FIXTURES = Path(__file__).parents[1] / "fixtures" / "rocstories"


@pytest.fixture(scope="module")
def stories():
    from datasets import concatenate_datasets

    splits = load_rocstories(FIXTURES, split_fractions=(1.0, 0.0, 0.0))
    return concatenate_datasets([splits[name] for name in splits]).select(range(4))


@pytest.fixture(scope="module")
def tokenizer(stories):
    texts = storyline_lm_dataset(stories)["text"]
    return train_word_level_tokenizer(texts)


def _fit(model, batch: dict, max_steps: int = 1500) -> float:
    """Full-batch Adam until the mean NLL is below 0.02 (memorised), at most ``max_steps`` steps."""
    torch.manual_seed(0)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(max_steps):
        optimizer.zero_grad()
        loss = model(**batch).loss
        if float(loss.detach()) < 0.02:
            break
        loss.backward()
        optimizer.step()
    model.eval()
    return float(loss.detach())


def plain_search(model):
    """``model`` searched plainly (transformers' generation config for its config, without the package's
    settings): a model that memorised the stories writes them back only if nothing is refused, and a story
    may repeat a 3-gram."""
    model.generation_config = GenerationConfig.from_model_config(model.config)
    return model


@pytest.fixture(scope="module")
def story_lm(stories, tokenizer):
    torch.manual_seed(0)
    tok = tokenizer
    config = AWDLSTMConfig(vocab_size=len(tok), embedding_size=32, hidden_size=64, num_hidden_layers=1,
                           dropout=0.0, dropout_hidden=0.0, dropout_input=0.0, dropout_embedding=0.0,
                           weight_drop=0.0, alpha=0.0, beta=0.0, bos_token_id=tok.eos_token_id,
                           eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    model = plain_search(AWDLSTMForCausalLM(config))
    rows = [tok(text, add_special_tokens=False).input_ids + [tok.eos_token_id]
            for text in storyline_lm_dataset(stories)["text"]]
    width = max(map(len, rows))
    ids = torch.tensor([r + [tok.eos_token_id] * (width - len(r)) for r in rows])
    labels = torch.tensor([r + [-100] * (width - len(r)) for r in rows])
    assert _fit(model, {"input_ids": ids, "labels": labels}) < 0.02
    return model


def _seq2seq(tokenizer, pairs) -> StorySeq2SeqForConditionalGeneration:
    torch.manual_seed(0)
    tok = tokenizer
    config = StorySeq2SeqConfig(vocab_size=len(tok), embedding_size=64, hidden_size=64, dropout=0.0,
                                pad_token_id=tok.pad_token_id, bos_token_id=tok.eos_token_id,
                                eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id)
    model = plain_search(StorySeq2SeqForConditionalGeneration(config))
    examples, _ = tokenize_pairs(pairs, tok, PairFormat())
    batch = collate_pairs([examples[i] for i in range(len(examples))], tok.pad_token_id)
    assert _fit(model, {k: v for k, v in batch.items() if k != "decoder_attention_mask"}) < 0.02
    return model


@pytest.fixture(scope="module")
def story_seq2seq(stories, tokenizer):
    """Storyline -> story, the second stage of the seq2seq approach."""
    return _seq2seq(tokenizer, story_pairs(stories))


def expected(story) -> dict:
    return {"title": story["title"], "storyline": storyline(story["sentences"]), "story": story["story"]}


def test_the_lm_approach_writes_the_storyline_then_the_story(stories, tokenizer, story_lm):
    for story in stories:
        assert write_story(story["title"], story_lm, tokenizer) == expected(story)
    # Beam search over the same memorised model finds the same texts.
    story = stories[0]
    assert write_story(story["title"], story_lm, tokenizer, num_beams=3) == expected(story)


def test_the_seq2seq_approach_one_model_per_stage(stories, tokenizer, story_seq2seq):
    first = _seq2seq(tokenizer, storyline_pairs(stories))
    second = story_seq2seq
    story = stories[1]
    assert story_pairs(stories)[1]["source"] == story_source(story["title"], storyline(story["sentences"]))
    for story in stories:
        assert write_story(story["title"], first, tokenizer, second, tokenizer) == expected(story)


def test_mixed_approaches_and_bad_input(stories, tokenizer, story_lm, story_seq2seq):
    second = story_seq2seq
    story = stories[2]
    assert write_story(story["title"], story_lm, tokenizer, second, tokenizer) == expected(story)
    with pytest.raises(ValueError, match="title is empty"):
        write_story("  ", story_lm, tokenizer)
    plain = train_word_level_tokenizer(["a b c"])
    lm = AWDLSTMForCausalLM(AWDLSTMConfig(vocab_size=len(plain), embedding_size=8, hidden_size=8,
                                          num_hidden_layers=1))
    with pytest.raises(ValueError, match="no '<sep>' token"):
        write_story("a b", lm, plain)


def test_story_and_plot_attention_commands(stories, tokenizer, story_lm, story_seq2seq, tmp_path, capsys):
    story_lm.save_pretrained(tmp_path / "lm")
    tokenizer.save_pretrained(tmp_path / "lm")
    title = stories[0]["title"]
    assert cli_main(["story", title, "--model", str(tmp_path / "lm"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected(stories[0])
    with pytest.raises(SystemExit):
        cli_main(["story", title, "--storyline-model", str(tmp_path / "lm")])
    assert "needs --story-model" in capsys.readouterr().err

    model = story_seq2seq
    model.save_pretrained(tmp_path / "s2s")
    tokenizer.save_pretrained(tmp_path / "s2s")
    source = story_pairs(stories)[0]["source"]
    assert cli_main(["plot-attention", str(tmp_path / "s2s"), source,
                     "--output", str(tmp_path / "a.png")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["output"] == stories[0]["story"] and (tmp_path / "a.png").stat().st_size > 0
    # A causal LM has no attention map to draw.
    with pytest.raises(SystemExit):
        cli_main(["plot-attention", str(tmp_path / "lm"), source])
    assert "encoder-decoder" in capsys.readouterr().err
