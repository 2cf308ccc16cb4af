"""The story generator's named recipes (Yao et al. 2019, "Plan-and-Write") on ROCStories: each stage of the
seq2seq approach and the LM approach trains through ``train(spec)`` from the corpus alone (here the fixture
stories, a few updates), ``--story-stage`` giving the (source, target) pairs of a stage; bad stage settings
are refused naming the flag."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hf_nlm.data.registry import CORPORA
from hf_nlm.training import RunSpec, train
from hf_nlm.training.spec import DataSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rocstories"
SMALL = {"embedding_size": 16, "hidden_size": 16, "split_fractions": (0.7, 0.15, 0.15), "max_steps": 3,
         "progress_bar": False}


@pytest.mark.parametrize(("recipe", "model_type", "stage"), [
    ("rocstories-storyline", "story_seq2seq", "storyline"),
    ("rocstories-story", "story_seq2seq", "story"),
    ("rocstories-lm", "awd_lstm", None),
])
def test_a_stage_recipe_trains_on_the_stories(recipe, model_type, stage, tmp_path):
    spec = RunSpec.from_recipe(recipe=recipe, corpus_path=FIXTURES, output_dir=str(tmp_path / "run"), **SMALL)
    # The corpus path refines the recipe's data: its corpus and stage stay.
    assert (spec.model_type, spec.data.corpus, spec.data.story_stage) == (model_type, "rocstories", stage)
    assert spec.training.seed == 0 and spec.training.num_epochs == 20 and spec.training.max_time_s is None
    result = train(spec)
    assert result.metrics["global_step"] == 3
    assert math.isfinite(result.metrics["validation"]["perplexity"])


def test_a_stage_gives_its_pairs():
    split = {"corpus": "rocstories", "corpus_path": FIXTURES, "split_fractions": (0.7, 0.15, 0.15)}
    storyline = DataSpec(**split, story_stage="storyline").load(pair_columns=("source", "target"))["train"][0]
    story = DataSpec(**split, story_stage="story").load(pair_columns=("src", "tgt"))["train"][0]
    assert " # " in storyline["target"] and "<sep>" not in storyline["source"]
    assert story["src"].startswith(storyline["source"]) and " <sep> " in story["src"]
    assert story["src"].endswith(storyline["target"]) and len(story["tgt"].split()) > 20


def test_bad_story_stage_settings_are_refused_naming_the_flag(tmp_path):
    with pytest.raises(ValueError, match=r"--story-stage 'plot': choose from storyline, story"):
        DataSpec(corpus="rocstories", story_stage="plot")
    with pytest.raises(ValueError, match=r"--story-stage applies to --corpus rocstories only, not brown"):
        DataSpec(corpus="brown", story_stage="story")
    causal = RunSpec.from_recipe("awd_lstm", corpus="rocstories", corpus_path=FIXTURES, story_stage="story",
                                 output_dir=str(tmp_path / "a"), max_steps=1)
    with pytest.raises(ValueError, match=r"--story-stage story gives \(source, target\) pairs"):
        train(causal)
    no_stage = RunSpec.from_recipe("story_seq2seq", corpus="rocstories", corpus_path=FIXTURES,
                                   output_dir=str(tmp_path / "b"), max_steps=1)
    with pytest.raises(ValueError, match=r"--story-stage storyline or story"):
        train(no_stage)
    assert "stage" in CORPORA["rocstories"].options
