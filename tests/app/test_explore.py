"""The web demo's answers (hf_nlm.app.explore), each against a computation of its own: the model asked one
position at a time, the n-gram model's table, the evaluation's perplexity, the tree formula."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from app_runs import save, special_ids

from hf_nlm import HLBLConfig, HLBLForCausalLM
from hf_nlm.app import (
    MAX_PROMPT_TOKENS,
    continue_prompt,
    load_page_run,
    load_runs,
    next_numeral,
    next_words,
    text_surprisal,
    tree_path,
)
from hf_nlm.app.explore import (
    MAX_GENERATION_SECONDS,
    MAX_TEXT_CHARS,
    MAX_TITLE_TOKENS,
    NUMBER_LIMITS,
    distinct_names,
    generation_settings,
    page_wording,
    tell_story,
    words_below,
)
from hf_nlm.evaluation import evaluate_lm
from hf_nlm.generation import set_generation_defaults
from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM
from hf_nlm.tokenization import train_numeracy_tokenizer, train_word_level_tokenizer
from hf_nlm.trees import random_tree

NUMERAL_TEXTS = ["in 1990 the deficit was 3.5 billion , up 12 % .",
                 "we spent 3.5 billion on 7 programs in 1991 ."] * 4


def next_log_probs(model, ids: list[int]) -> torch.Tensor:
    """The model's next-token log-distribution after ``ids``, from a fresh forward pass (no cache)."""
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1)


@pytest.mark.parametrize("search", ["greedy", "beam", "sample"])
def test_each_hypothesis_carries_the_models_probability_of_each_token(nplm_run, search):
    run = nplm_run
    prompt = "the cat"
    result = continue_prompt(run, prompt, search=search, num_beams=3, num_return_sequences=2,
                             max_new_tokens=4)
    assert len(result["hypotheses"]) == (1 if search == "greedy" else 2)
    for hypothesis in result["hypotheses"]:
        ids = run.tokenizer(prompt, add_special_tokens=False).input_ids
        total = 0.0
        for token, p in hypothesis["tokens"]:
            log_p = next_log_probs(run.model, ids)
            i = run.tokenizer.convert_tokens_to_ids(token)
            assert p == pytest.approx(math.exp(float(log_p[i])), rel=1e-4)
            if search == "greedy":  # greedy takes the likeliest token at every step
                assert i == int(log_p.argmax())
            total += float(log_p[i])
            ids.append(i)
        assert hypothesis["log_prob"] == pytest.approx(total, rel=1e-4)
        assert hypothesis["text"] == run.tokenizer.decode(
            [i for i in ids[2:] if i != run.tokenizer.eos_token_id]).strip()


def test_a_hypothesis_ends_at_its_end_of_text(nplm_run):
    run = copy.copy(nplm_run)
    run.model = copy.deepcopy(nplm_run.model)
    eos = run.tokenizer.eos_token_id
    with torch.no_grad():  # the end of text likely after every word, so that beams end at different lengths
        run.model.lm_head.bias[eos] += 3.0
    run.model.generation_config.min_new_tokens = 0  # a beam may end at once too
    result = continue_prompt(run, "the cat", search="beam", num_beams=4, num_return_sequences=4,
                             max_new_tokens=6)
    lengths = [len(h["tokens"]) for h in result["hypotheses"]]
    assert min(lengths) < max(lengths)  # padding after the shorter ones' end of text is not shown
    for h in result["hypotheses"]:
        ids = [run.tokenizer.convert_tokens_to_ids(t) for t, _ in h["tokens"]]
        assert eos not in ids[:-1] and (ids[-1] == eos or len(ids) == 6)


def test_beam_search_keeps_the_best_hypothesis_first_when_nothing_else_ranks(nplm_run):
    result = continue_prompt(nplm_run, "the dog", search="beam", num_beams=4, num_return_sequences=4,
                             max_new_tokens=3)
    scores = [h["log_prob"] for h in result["hypotheses"]]
    assert scores == sorted(scores, reverse=True)


def test_next_words_are_the_top_of_each_models_distribution(nplm_run):
    run = nplm_run
    result = next_words(run, "the cat sat", k=4)
    ids = run.tokenizer("the cat sat", add_special_tokens=False).input_ids
    log_p = next_log_probs(run.model, ids)
    expected = sorted(range(len(log_p)), key=lambda i: -float(log_p[i]))[:4]
    assert [t for t, _ in result["model"]] == run.tokenizer.convert_ids_to_tokens(expected)
    assert [p for _, p in result["model"]] == pytest.approx([math.exp(float(log_p[i])) for i in expected])
    # The 3-gram reads the last two tokens.
    kn = run.ngram
    table = kn.log_prob([ids[-2:]] * len(run.tokenizer), list(range(len(run.tokenizer))))
    # (n-gram probabilities tie: the order among equals is free)
    assert [p for _, p in result["ngram"]] == pytest.approx(sorted(map(math.exp, table), reverse=True)[:4])
    assert all(p == pytest.approx(math.exp(table[run.tokenizer.convert_tokens_to_ids(t)]))
               for t, p in result["ngram"])


def test_surprisal_of_a_text_is_what_the_evaluation_says(nplm_run):
    run = nplm_run
    text = "the dog sat on the mat"
    result = text_surprisal(run, text)
    assert result["perplexity"] == pytest.approx(evaluate_lm(run.model, [text], run.tokenizer)["perplexity"],
                                                 rel=1e-5)
    # Token by token: the model asked at each position (the stream starts at the sentence boundary).
    ids = [run.tokenizer.bos_token_id] + run.tokenizer(text, add_special_tokens=False).input_ids
    for t, (token, bits) in enumerate(result["tokens"][: len(ids) - 1]):
        assert token == run.tokenizer.convert_ids_to_tokens(ids[t + 1])
        assert bits == pytest.approx(-float(next_log_probs(run.model, ids[: t + 1])[ids[t + 1]])
                                     / math.log(2), rel=1e-4)
    assert len(result["ngram_tokens"]) == len(result["tokens"]) and result["ngram_perplexity"] > 1


def test_bad_text_gets_a_message_not_a_traceback(nplm_run):
    run = nplm_run
    for empty in ("", "   ", None):
        with pytest.raises(ValueError, match="the prompt is empty"):
            continue_prompt(run, empty)
    with pytest.raises(ValueError, match=f"this page reads at most {MAX_PROMPT_TOKENS:,}"):
        next_words(run, "the cat " * MAX_PROMPT_TOKENS)
    with pytest.raises(ValueError, match=f"this page reads at most {MAX_TEXT_CHARS:,}"):
        text_surprisal(run, "x" * (MAX_TEXT_CHARS + 1))
    with pytest.raises(ValueError, match="a character that is not text at position 4"):
        next_words(run, "the \ud800 cat")
    with pytest.raises(ValueError, match="the top k slider takes a whole number from 1 to 50, got 10000"):
        next_words(run, "the cat", k=10_000)
    with pytest.raises(ValueError, match="not a numeracy LM"):
        next_numeral(run, "the cat")
    with pytest.raises(ValueError, match="no tree-softmax head"):
        tree_path(run, "the", "cat")
    warned = continue_prompt(run, "zebra quagga okapi", search="greedy", max_new_tokens=2)
    assert "3 of the 3 tokens of the prompt are not in the model's vocabulary" in warned["warning"]
    assert continue_prompt(run, "the cat", search="greedy", max_new_tokens=2)["warning"] is None


def test_generation_settings_are_checked_and_named_by_the_pages_controls():
    with pytest.raises(ValueError, match=r"the top-p field must be in \(0, 1\], got 0.0"):
        generation_settings("sample", top_p=0.0)  # the command line's rule, in the page's words
    with pytest.raises(ValueError, match="the hypotheses shown slider at 5 needs sample search or the beams "
                                         "slider >= 5"):
        generation_settings("beam", num_beams=2, num_return_sequences=5)
    with pytest.raises(ValueError, match="search must be greedy, beam or sample"):
        generation_settings("best-first")
    with pytest.raises(ValueError, match="the temperature field: give a number"):
        generation_settings("sample", temperature=None)
    # Settings that cannot be sampled from, and numbers past a slider's end (a client can post them).
    for name, value in (("temperature", 1e-45), ("temperature", 1e300), ("temperature", math.nan),
                        ("temperature", 0.0), ("top_p", math.inf), ("num_beams", 10**6), ("num_beams", 2.5),
                        ("num_return_sequences", -1), ("max_new_tokens", 10**9), ("max_new_tokens", "many")):
        control, low, high, _ = NUMBER_LIMITS[name]
        search = "beam" if name == "num_beams" else "sample"
        with pytest.raises(ValueError, match=f"^{control} takes a (whole )?number from {low:g} to {high:g}"):
            generation_settings(search, **{name: value})
    assert "--" not in str(NUMBER_LIMITS)
    assert generation_settings("greedy", num_beams=7, num_return_sequences=4) == {
        "do_sample": False, "num_beams": 1, "num_return_sequences": 1, "max_new_tokens": 20,
        "max_time": MAX_GENERATION_SECONDS}


@pytest.mark.parametrize(("library", "page"), [
    ("--temperature must be > 0, got 0.0 (for the most likely token, drop --do-sample)",
     "the temperature field must be > 0, got 0.0 (for the most likely token, choose greedy or beam search)"),
    ("--temperature / --top-p need --do-sample (greedy and beam search do not sample)",
     "the temperature field / the top-p field need sample search (greedy and beam search do not sample)"),
    ("temperature must be finite and at least 1e-04, got inf",
     "the temperature field must be finite and at least 1e-04, got inf"),
    ("--temperature 1e-45 is below the floor", "the temperature field at 1e-45 is below the floor"),
    ("the temperature must be finite", "the temperature field must be finite"),
    ("--max-new-tokens must be >= 1, got 0", "the new tokens slider must be >= 1, got 0"),
])
def test_the_command_lines_setting_messages_name_the_pages_controls(library, page):
    assert page_wording(library) == page


def test_suppressed_tokens_are_not_ranked_but_keep_their_probability(nplm_run):
    run = copy.copy(nplm_run)
    run.model = copy.deepcopy(nplm_run.model)
    set_generation_defaults(run.model, run.tokenizer)  # as training saves it: <unk> is never generated
    unk = run.tokenizer.unk_token_id
    with torch.no_grad():  # <unk> the likeliest next token, as on the demo model
        run.model.lm_head.bias[unk] += 10.0
    result = next_words(run, "the cat sat", k=3)
    log_p = next_log_probs(run.model, run.tokenizer("the cat sat", add_special_tokens=False).input_ids)
    assert int(log_p.argmax()) == unk
    expected = [i for i in log_p.argsort(descending=True).tolist() if i != unk][:3]
    assert [t for t, _ in result["model"]] == run.tokenizer.convert_ids_to_tokens(expected)
    assert result["model_not_ranked"] == [("<unk>", pytest.approx(math.exp(float(log_p[unk]))))]
    assert "<unk>" not in dict(result["ngram"]) and [t for t, _ in result["ngram_not_ranked"]] == ["<unk>"]
    # Greedy generation writes the likeliest ranked token, never the one left out.
    greedy = continue_prompt(run, "the cat sat", search="greedy", max_new_tokens=1)["hypotheses"][0]
    assert greedy["tokens"][0][0] == result["model"][0][0]


def test_two_runs_of_the_same_folder_name_get_names_of_their_own(nplm_run, tmp_path):
    names = distinct_names([tmp_path / "a" / "lm", tmp_path / "b" / "lm", tmp_path / "x" / "a" / "lm",
                            tmp_path / "nplm"])
    assert names == [f"{tmp_path.name}/a/lm", "b/lm", "x/a/lm", "nplm"]
    other = copy.deepcopy(nplm_run.model)
    with torch.no_grad():
        other.lm_head.bias.zero_()
        other.lm_head.weight.zero_()  # a uniform next-token distribution: a model unlike the fixture's
    for folder, model in ((tmp_path / "a" / "lm", nplm_run.model), (tmp_path / "b" / "lm", other)):
        save(model, nplm_run.tokenizer, folder)
    runs, problems = load_runs([tmp_path / "a" / "lm", tmp_path / "b" / "lm", tmp_path / "a" / "lm"])
    assert [r.name for r in runs] == ["a/lm", "b/lm"] and problems == [f"{tmp_path / 'a' / 'lm'} is given "
                                                                       "twice: served once"]
    first, second = (next_words(r, "the cat", k=len(r.tokenizer))["model"] for r in runs)
    assert first == next_words(nplm_run, "the cat", k=len(nplm_run.tokenizer))["model"]
    vocab = len(nplm_run.tokenizer)
    # Every token but <unk>, which the model's generation config suppresses (as every model's does).
    assert [p for _, p in second] == pytest.approx([1 / vocab] * (vocab - 1))


@pytest.mark.parametrize(("damage", "named"), [("missing npz", "ngram.npz"),
                                               ("truncated json", "ngram.json")])
def test_a_broken_ngram_model_is_named_and_its_run_served_without_it(nplm_run, tmp_path, damage, named):
    folder = tmp_path / "nplm-broken"
    save(nplm_run.model, nplm_run.tokenizer, folder)
    nplm_run.ngram.save(folder / "kneser-ney-3gram")
    if damage == "missing npz":
        (folder / "kneser-ney-3gram" / "ngram.npz").unlink()
    else:
        config = folder / "kneser-ney-3gram" / "ngram.json"
        config.write_text(config.read_text(encoding="utf-8")[:20], encoding="utf-8")
    runs, problems = load_runs([nplm_run.folder, folder])
    assert [r.name for r in runs] == ["nplm", "nplm-broken"]
    assert runs[0].ngram is not None and runs[1].ngram is None
    (problem,) = problems
    assert (problem.startswith(f"{folder}: served without its n-gram model")
            and str(folder / "kneser-ney-3gram" / named) in problem)
    assert next_words(runs[1], "the cat")["ngram"] is None  # the neural model answers


def test_folders_that_do_not_load_are_named_and_the_rest_served(nplm_run, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    runs, problems = load_runs([nplm_run.folder, tmp_path / "missing", broken])
    assert ([r.name for r in runs] == ["nplm"] and runs[0].kind == {"lm"}
            and runs[0].ngram_name == "kneser-ney-3gram")
    assert (len(problems) == 2 and "missing does not exist" in problems[0]
            and "broken" in problems[1])


# ----------------------------------------------------------------------------- numeracy, tree, story

@pytest.fixture(scope="module")
def numeracy_tokenizer():
    return train_numeracy_tokenizer(NUMERAL_TEXTS, max_vocab_size=30)


@pytest.mark.parametrize("strategy", ["softmax", "mog", "drnn"])
def test_next_numeral_renormalises_the_heads_numerals(tmp_path, numeracy_tokenizer, strategy):
    tok = numeracy_tokenizer
    torch.manual_seed(0)
    config = NumeracyLMConfig(vocab_size=len(tok), embedding_size=8, hidden_size=8, numeral_strategy=strategy,
                              numeral_vocab=tok.numeral_vocab, mog_components=3,
                              bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                              pad_token_id=tok.eos_token_id)
    run = load_page_run(save(NumeracyLMForCausalLM(config), tok, tmp_path / strategy))
    assert "numeracy" in run.kind
    result = next_numeral(run, "the deficit was", k=50)
    log_p = next_log_probs(run.model, tok("the deficit was", add_special_tokens=False).input_ids)
    vocab = tok.numeral_vocab
    p_numeral = float(log_p[list(vocab.values())].exp().sum())
    assert result["p_numeral"] == pytest.approx(p_numeral, rel=1e-5)
    assert dict(result["numerals"]) == pytest.approx({t: math.exp(float(log_p[i])) / p_numeral
                                                      for t, i in vocab.items()})
    assert sum(p for _, p in result["numerals"]) == pytest.approx(1.0)
    assert result["low"] <= result["median"] <= result["high"]
    assert (result["unseen"] is None) == (strategy == "softmax")
    if result["unseen"] is not None:  # one numeral outside the vocabulary: part of <unk_num>'s share
        assert (result["unseen"][0] not in vocab
                and 0 < result["unseen"][1] <= dict(result["numerals"])["<unk_num>"])


def test_tree_path_multiplies_to_the_words_probability(tmp_path, word_tokenizer):
    tok = word_tokenizer
    torch.manual_seed(0)
    config = HLBLConfig(vocab_size=len(tok), context_size=2, hidden_size=4, initializer_range=0.5,
                        **special_ids(tok))
    model = HLBLForCausalLM(config, tree=random_tree(len(tok), seed=1))
    with torch.no_grad():
        model.lm_head.bias.uniform_(-1, 1)
    run = load_page_run(save(model, tok, tmp_path / "hlbl"))
    assert run.kind == {"lm", "tree"}
    result = tree_path(run, "the cat", "sat")
    ids = tok("the cat", add_special_tokens=False).input_ids
    expected = math.exp(float(next_log_probs(run.model, ids)[tok.convert_tokens_to_ids("sat")]))
    assert result["probability"] == pytest.approx(expected, rel=1e-5)
    (code,) = result["codes"]  # a balanced tree: one code per word, the root first
    assert code[0]["node"] == 0 and code[0]["words_below"] == len(tok)
    assert code[-1]["path_probability"] == pytest.approx(math.prod(r["probability"] for r in code))
    assert words_below(run.model.lm_head.tree())[0] == len(tok)
    with pytest.raises(ValueError, match="Type one word of the vocabulary"):
        tree_path(run, "the cat", "sat on")


def test_tell_story_runs_both_stages_and_draws_the_second_ones_attention(tmp_path):
    from hf_nlm.models import StorySeq2SeqConfig, StorySeq2SeqForConditionalGeneration
    from hf_nlm.plots.attention import attention_weights
    from hf_nlm.story.generation import MAX_STORY_TOKENS, generate_story, generate_storyline, story_source

    texts = ["the picnic # rain # went home", "we had a picnic . it rained . we went home ."] * 3
    tok = train_word_level_tokenizer(texts + ["<sep> #"])
    torch.manual_seed(0)
    config = StorySeq2SeqConfig(vocab_size=len(tok), embedding_size=8, hidden_size=8, dropout=0.0,
                                pad_token_id=tok.pad_token_id, bos_token_id=tok.eos_token_id,
                                eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id)
    run = load_page_run(save(StorySeq2SeqForConditionalGeneration(config), tok, tmp_path / "seq2seq"))
    assert run.kind == {"seq2seq"}
    with pytest.raises(ValueError, match="encoder-decoder model: use the Story tab"):
        continue_prompt(run, "the picnic")
    picture = tmp_path / "attention.png"
    story = tell_story(run, run, "the picnic", picture, num_beams=2)
    keywords = generate_storyline(run.model, tok, "the picnic", num_beams=2)
    assert story == {"title": "the picnic", "storyline": keywords,
                     "story": generate_story(run.model, tok, "the picnic", keywords, num_beams=2)}
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The picture's rows are the story shown: its search is the story stage's.
    drawn = attention_weights(run.model, tok, story_source("the picnic", keywords), num_beams=2,
                              max_new_tokens=MAX_STORY_TOKENS)[0]
    assert drawn == story["story"]
    with pytest.raises(ValueError, match="the title is empty"):
        tell_story(run, run, "  ")
    with pytest.raises(ValueError, match=f"The title has {MAX_TITLE_TOKENS + 1} tokens; this page reads at "
                                         f"most {MAX_TITLE_TOKENS}"):
        tell_story(run, run, "picnic " * (MAX_TITLE_TOKENS + 1))
