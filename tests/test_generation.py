"""The generation settings a trained model is saved with (:mod:`hf_nlm.generation`), and the doors to a
continuation: ``model.generate(ids)`` + decoding, ``pipeline("text-generation")`` and ``hf-nlm generate``.
They read the same saved settings, so the same prompt gives the same text through each, for every model
type."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    GenerationConfig,
    pipeline,
)

from hf_nlm.generation import (
    first_step_suppressed_ids,
    is_punctuation,
    punctuation_token_ids,
    set_generation_defaults,
)
from hf_nlm.tokenization import train_bpe_tokenizer, train_word_level_tokenizer
from hf_nlm.tokenization.decoding import decode_generated
from hf_nlm_cli import main

LINES = [
    "the president said that the budget was 35 billion dollars .",
    "we will cut the deficit by 12 % , and the rest was 4.5 billion .",
    "in the last year , the nation grew by 3 % .",
    "`` we will not wait , '' the president said .",
    "the congress spent 7 billion on 12 programs in 1990 .",
] * 4
PROMPT = "the president said"
TINY = ["--embedding-size", "8", "--block-size", "6", "--batch-size", "2", "--max-steps", "3",
        "--no-progress-bar"]

#: model type -> its flags; the numeracy LM with a closed (softmax) and an open-vocabulary (d-RNN) strategy.
MODELS = {
    "nplm": ["--model", "nplm", "--context-size", "3", "--hidden-size", "8"],
    "lbl": ["--model", "lbl", "--context-size", "3"],
    "hlbl": ["--model", "hlbl", "--context-size", "3"],
    "awd_lstm": ["--model", "awd_lstm", "--hidden-size", "8", "--num-hidden-layers", "1"],
    "numeracy_softmax": ["--model", "numeracy_lm", "--hidden-size", "8", "--numeral-strategy", "softmax"],
    "numeracy_drnn": ["--model", "numeracy_lm", "--hidden-size", "8", "--numeral-strategy", "drnn"],
}
SEARCHES = {"greedy": ({}, []), "beam": ({"num_beams": 3}, ["--num-beams", "3"])}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    for split in ("train", "valid", "test"):
        (folder / f"{split}.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return ["--train-file", str(folder / "train.txt"), "--validation-file", str(folder / "valid.txt"),
            "--test-file", str(folder / "test.txt")]


@pytest.fixture(scope="module", params=list(MODELS))
def run(request, corpus, tmp_path_factory):
    """A run folder of ``hf-nlm train`` (3 updates of a tiny model), as a user gets it."""
    out = tmp_path_factory.mktemp(request.param) / "run"
    assert main(["train", *corpus, "--output-dir", str(out), *TINY, *MODELS[request.param]]) == 0
    return out


def cli_continuation(capsys, run, prompt: str, *flags: str) -> str:
    capsys.readouterr()
    assert main(["generate", str(run), prompt, "--json", *flags]) == 0
    (text,) = json.loads(capsys.readouterr().out)["generations"]
    return text


@pytest.mark.parametrize("search", list(SEARCHES))
def test_every_door_gives_the_same_continuation(run, search, capsys):
    kwargs, flags = SEARCHES[search]
    model, tokenizer = AutoModelForCausalLM.from_pretrained(run).eval(), AutoTokenizer.from_pretrained(run)
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, **kwargs)
    new = out[0, ids.shape[1]:]
    assert len(new) > 1  # a continuation that can differ
    by_generate = decode_generated(tokenizer, new)
    generator = pipeline("text-generation", model=model, tokenizer=tokenizer)
    by_pipeline = generator(PROMPT, **kwargs)[0]["generated_text"]
    by_cli = cli_continuation(capsys, run, PROMPT, *flags)
    # the continuation after the prompt: a space before a word, none before "," (which may start one)
    assert by_pipeline == decode_generated(tokenizer, new, prompt=PROMPT)
    assert by_pipeline.startswith(PROMPT) and by_pipeline[len(PROMPT):].lstrip() == by_generate
    # An open-vocabulary numeral strategy writes out each <unk_num> it generates; the ids carry <unk_num>
    # only, so model.generate's ids and pipeline show <unk_num>, and hf-nlm generate the numeral written.
    with torch.no_grad():
        written = model.generate(ids, **kwargs, return_dict_in_generate=True)
    assert torch.equal(written.sequences, out)
    numerals = {t - ids.shape[1]: text for t, text in getattr(written, "numerals", [{}])[0].items()}
    assert by_cli == decode_generated(tokenizer, new, numerals)


def test_an_open_numeral_strategy_writes_the_numeral_it_scored(corpus, tmp_path, capsys):
    """The d-RNN model made to write a numeral: only hf-nlm generate (and decode_generated with the numerals
    generate() returns) show it; model.generate's ids and pipeline show <unk_num> at the same place."""
    out = tmp_path / "run"
    assert main(["train", *corpus, "--output-dir", str(out), *TINY, *MODELS["numeracy_drnn"]]) == 0
    model, tokenizer = AutoModelForCausalLM.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out)
    unk_num = tokenizer.unk_num_token_id
    with torch.no_grad():  # p(class | h): the numeral class far likelier than the word class
        model.lm_head.class_bias.copy_(torch.tensor([-50.0, 50.0]))
    model.save_pretrained(out)
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        written = model.generate(ids, return_dict_in_generate=True)
    new = written.sequences[0, ids.shape[1]:]
    assert unk_num in new.tolist()
    numerals = {t - ids.shape[1]: text for t, text in written.numerals[0].items()}
    shown = decode_generated(tokenizer, new, numerals)
    assert cli_continuation(capsys, out, PROMPT) == shown and "<unk_num>" not in shown
    by_pipeline = pipeline("text-generation", model=model, tokenizer=tokenizer)(PROMPT)[0]["generated_text"]
    assert by_pipeline == decode_generated(tokenizer, new, prompt=PROMPT) and "<unk_num>" in by_pipeline


def test_the_story_seq2seq_gives_the_same_continuation_through_generate_and_the_cli(tmp_path, capsys):
    """transformers 5 has no text2text-generation pipeline: the seq2seq's doors are generate() and hf-nlm
    generate.
    A source reads as in training: its tokens, then <eos>."""
    from hf_nlm.models import StorySeq2SeqConfig, StorySeq2SeqForConditionalGeneration

    tokenizer = train_word_level_tokenizer(LINES)
    eos = tokenizer.eos_token_id
    torch.manual_seed(0)
    model = StorySeq2SeqForConditionalGeneration(StorySeq2SeqConfig(
        vocab_size=len(tokenizer), embedding_size=8, hidden_size=8, pad_token_id=eos, bos_token_id=eos,
        eos_token_id=eos, decoder_start_token_id=eos)).eval()
    set_generation_defaults(model, tokenizer)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    source = torch.tensor([tokenizer(PROMPT).input_ids + [eos]])
    for kwargs, flags in SEARCHES.values():
        with torch.no_grad():
            out = model.generate(source, **kwargs)[0]
        assert len(out) > 2
        assert cli_continuation(capsys, tmp_path, PROMPT, *flags) == decode_generated(tokenizer, out)


def test_a_trained_model_is_saved_with_the_defaults_and_generate_arguments_override_them(corpus, tmp_path):
    out = tmp_path / "run"
    assert main(["train", *corpus, "--output-dir", str(out), *TINY, *MODELS["nplm"]]) == 0
    tokenizer = AutoTokenizer.from_pretrained(out)
    saved = json.loads((out / "generation_config.json").read_text())
    # the marks of LINES but the comma
    punctuation = sorted(tokenizer.convert_tokens_to_ids([".", "%", "``", "''"]))
    assert {k: saved[k] for k in ("do_sample", "max_new_tokens", "min_new_tokens", "no_repeat_ngram_size",
                                  "suppress_tokens", "begin_suppress_tokens")} == {
        "do_sample": False, "max_new_tokens": 20, "min_new_tokens": 1, "no_repeat_ngram_size": 3,
        "suppress_tokens": [tokenizer.unk_token_id], "begin_suppress_tokens": punctuation}
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    full_stop, eos = tokenizer.convert_tokens_to_ids("."), tokenizer.eos_token_id
    with torch.no_grad():  # the end of the text far the likeliest token after every context, "." next
        model.lm_head.bias[eos] += 60.0
        model.lm_head.bias[full_stop] += 50.0
        ids = tokenizer(PROMPT, return_tensors="pt").input_ids
        new = model.generate(ids)[0, ids.shape[1]:].tolist()
        assert new[0] not in punctuation + [eos] and new[1:] == [eos]  # a word, then the end
        lifted = model.generate(ids, begin_suppress_tokens=None)[0, ids.shape[1]:].tolist()
        assert lifted == [full_stop, eos]  # what the saved settings keep out: "." and the end of the text
        ended = model.generate(ids, begin_suppress_tokens=None, min_new_tokens=0)
        assert ended[0, ids.shape[1]:].tolist() == [eos]
        model.lm_head.bias[eos] -= 100.0
        assert len(model.generate(ids)[0]) == ids.shape[1] + 20  # max_new_tokens
        assert len(model.generate(ids, max_new_tokens=4)[0]) == ids.shape[1] + 4


def test_the_cli_reads_the_saved_defaults_and_its_flags_override_them(tiny_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(run).eval(), AutoTokenizer.from_pretrained(run)
    eos = tokenizer.eos_token_id
    with torch.no_grad():
        model.lm_head.bias[eos] -= 100.0  # never the end of the text: every continuation runs to its maximum
    model.save_pretrained(run)
    assert len(cli_continuation(capsys, run, "the cat").split()) == 20
    assert len(cli_continuation(capsys, run, "the cat", "--max-new-tokens", "5").split()) == 5
    with pytest.raises(SystemExit):  # greedy search, as saved: one continuation
        main(["generate", str(run), "the cat", "--num-return-sequences", "2"])
    assert "--num-return-sequences 2 needs --do-sample or --num-beams >= 2" in capsys.readouterr().err
    config = GenerationConfig.from_pretrained(run)
    config.max_new_tokens, config.num_beams = 7, 3
    config.save_pretrained(run)
    assert len(cli_continuation(capsys, run, "the cat").split()) == 7
    # 3 beams, as saved
    assert main(["generate", str(run), "the cat", "--num-return-sequences", "3", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["generations"]) == 3
    with pytest.raises(SystemExit):  # checked against the saved maximum
        main(["generate", str(run), "the cat", "--min-new-tokens", "8"])
    assert "--min-new-tokens must be between 0 and --max-new-tokens (7), got 8" in capsys.readouterr().err


def test_a_model_saved_without_the_defaults_still_generates(tiny_run, tmp_path, capsys):
    """A generation config with none of the fields: generate() keeps transformers' defaults (20 new tokens,
    with a warning that it chose them); hf-nlm generate adds the library's 20 new tokens, at least 1."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    saved = json.loads((run / "generation_config.json").read_text())
    old = {k: v for k, v in saved.items() if k not in ("do_sample", "max_new_tokens", "min_new_tokens",
                                                       "begin_suppress_tokens")}
    (run / "generation_config.json").write_text(json.dumps(old))
    model, tokenizer = AutoModelForCausalLM.from_pretrained(run).eval(), AutoTokenizer.from_pretrained(run)
    config = model.generation_config
    assert config.max_new_tokens is None and config.begin_suppress_tokens is None
    ids = tokenizer("the cat", return_tensors="pt").input_ids
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=20, min_new_tokens=1)[0, ids.shape[1]:]
        with pytest.warns(UserWarning, match="default `max_length`"):
            assert model.generate(ids).shape[1] <= ids.shape[1] + 20
    assert cli_continuation(capsys, run, "the cat") == decode_generated(tokenizer, expected)


def test_punctuation_tokens_are_read_through_the_tokenizer():
    word = train_word_level_tokenizer(["he said , `` it 's $ 5 -- or 5.5 ! '' U.S. ..."])
    marks = [",", "``", "--", "!", "''", "..."]
    assert sorted(word.convert_ids_to_tokens(punctuation_token_ids(word))) == sorted(marks)
    # a continuation may start with a comma, which goes on with the sentence, and with no other mark
    assert sorted(word.convert_ids_to_tokens(first_step_suppressed_ids(word))) == sorted(marks[1:])
    assert "<eos>" in word.get_vocab() and not is_punctuation("<eos>") and not is_punctuation("")
    # a BPE token carries its space as "▁": read through decoding, "▁," is a comma
    lines = ["he said , it is . she said , no . they said , yes ."] * 20
    bpe = train_bpe_tokenizer(lines, vocab_size=300, show_progress=False)
    marks = {bpe.decode([i]).strip() for i in punctuation_token_ids(bpe)}
    assert marks == {",", "."} and any(bpe.convert_ids_to_tokens(i) != bpe.decode([i]).strip()
                                       for i in punctuation_token_ids(bpe))
