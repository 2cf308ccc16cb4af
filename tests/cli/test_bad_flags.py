"""No traceback on the command line: every argument of every command's parser (walked from
``build_parser(command)``), given a value it cannot take, ends the command with one line naming the
argument, exit status 2. The values: a wrong type, numbers outside every range (those the flag's help states
must be refused), a path that does not exist or lies in a folder that does not, and text that is not UTF-8.
A value the command can take runs it to the end (exit 0). Commands run in-process against tiny saved
folders made once; ``train`` and ``build-tree`` check every setting and build the model, then skip the
training loop."""

from __future__ import annotations

import argparse
import re
import shutil
import sys

import pytest
import torch

from hf_nlm_cli import COMMANDS, SEPARATE_COMMANDS, build_parser, main

WRONG_TYPE = "many"
NOT_UTF8 = "caf\udce9"  # the bytes b"caf\xe9" (Latin-1) as Python hands them over from a command line
INT_VALUES = ("-1", "0")
FLOAT_VALUES = ("nan", "inf", "-inf", "-1", "0", "1e-45", "1e300")
#: An argument whose name says it is a path: it is given paths that do not exist.
PATHLIKE = re.compile(r"file|dir|path|model$|output|predictions|dest|init_from|resume")
#: A path that is not there, and one in a folder that is not there (each argument's own: an output folder
#: given to one is made).
MISSING = ("missing-{}.txt", "no/such/dir-{}/p.png")
#: Arguments whose value is no file: any text runs the command (a Hub repo name, a commit message, ...).
NOT_PATHS = {"push": {"--repo-id", "--revision", "--commit-message"}}
#: Arguments that choose where the text comes from: given, the others of the group are left out.
SOURCES = {"check-numbers": ("--text", "--file", "--corpus", "--corpus-path", "--train-file",
                             "--validation-file", "--test-file")}


def subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]


def arguments(command: str) -> list[argparse.Action]:
    return [a for a in subparser(command)._actions if not isinstance(a, argparse._HelpAction)]


def kind(action: argparse.Action) -> str:
    """``int``, ``float``, ``choice``, ``switch`` (no value), ``path`` or ``text``."""
    if action.nargs == 0:
        return "switch"
    if action.choices is not None:
        return "choice"
    name = getattr(action.type, "__name__", "")
    if name in ("int", "float"):
        return name
    return "path" if PATHLIKE.search(action.dest) or PATHLIKE.search(str(action.metavar or "")) else "text"


def stated_range(action: argparse.Action) -> str | None:
    """A value outside the range the flag's help states (``> 0``, ``>= 1``, ``in (0, 1]``), or None."""
    text = action.help or ""
    interval = re.search(r"in ([\[(])(-?[\d.e-]+), (-?[\d.e+-]+)([\])])", text)
    if interval:
        low = float(interval.group(2))
        return str(low if interval.group(1) == "(" else low - 1)
    bound = re.search(r"(?:^|[,;] )(>=?) (-?\d+)\b", text)
    if bound:
        return str(int(bound.group(2)) - (bound.group(1) == ">="))
    return None


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_run):
    """Tiny saved folders: a trained word NPLM run (tiny_run, copied: card writes into it), a numeracy LM
    with a mixture-of-Gaussians numeral head, a story_seq2seq model; a text corpus for each."""
    from hf_nlm.models import (
        NumeracyLMConfig,
        NumeracyLMForCausalLM,
        StorySeq2SeqConfig,
        StorySeq2SeqForConditionalGeneration,
    )
    from hf_nlm.tokenization import train_numeracy_tokenizer, train_word_level_tokenizer

    root = tmp_path_factory.mktemp("bad-flags")
    run = shutil.copytree(tiny_run, root / "run")
    numbers = ["in 1990 the deficit was 3.5 billion dollars , up 12 % .",
               "the budget grew 12 % to 1,200 million in 1990 ."] * 4
    (root / "numbers.txt").write_text("\n".join(numbers) + "\n", encoding="utf-8")
    tokenizer = train_numeracy_tokenizer(numbers)
    torch.manual_seed(0)
    model = NumeracyLMForCausalLM(NumeracyLMConfig(
        vocab_size=len(tokenizer), embedding_size=8, hidden_size=8, numeral_strategy="mog",
        numeral_vocab=tokenizer.numeral_vocab))
    model.lm_head.branch.density.initialize_from(torch.tensor([1990.0, 3.5, 12.0, 1200.0]))
    model.save_pretrained(root / "numeracy")
    tokenizer.save_pretrained(root / "numeracy")
    stories = ["the picnic # rain # went home", "we had a picnic . it rained . we went home ."] * 3
    tokenizer = train_word_level_tokenizer([*stories, "<sep> #"])
    eos = tokenizer.eos_token_id
    seq2seq = StorySeq2SeqForConditionalGeneration(StorySeq2SeqConfig(
        vocab_size=len(tokenizer), embedding_size=8, hidden_size=8, dropout=0.0,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=eos, eos_token_id=eos, decoder_start_token_id=eos))
    # An untrained model writes any token: keep the storyline's separators out of its keywords.
    seq2seq.generation_config.suppress_tokens = tokenizer.convert_tokens_to_ids(["<sep>", "#"])
    seq2seq.save_pretrained(root / "seq2seq")
    tokenizer.save_pretrained(root / "seq2seq")
    return {"root": root, "run": run, "text": tiny_run.parent / "train.txt", "numeracy": root / "numeracy",
            "numbers": root / "numbers.txt", "seq2seq": root / "seq2seq"}


@pytest.fixture(scope="module")
def no_training_loop():
    """``train`` and ``build-tree`` read the data, check every setting and build the model and the trainer,
    then return before the first update (the loop is what makes a run slow, and no flag is checked there);
    ``build-tree`` builds its tree from the untrained first model."""
    from hf_nlm.training.trainer import LMTrainer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LMTrainer, "train", lambda self: {})
        yield


TRAIN = [["--max-steps", "1"], ["--context-size", "2"], ["--embedding-size", "4"], ["--block-size", "4"],
         ["--batch-size", "2"], ["--no-progress-bar"], ["--no-eval-test"]]


def command_line(command: str, folders: dict, flag: str) -> tuple[list[str], list[str]]:
    """(the positional arguments, the options) of a command line of ``command`` that runs to the end, without
    ``flag`` (and without the options it stands in for), which the test then gives."""
    run, text, numbers, s2s = (str(folders[k]) for k in ("run", "text", "numbers", "seq2seq"))
    out = str(folders["root"] / f"out-{command}-{flag.strip('-')}")
    numeracy = str(folders["numeracy"])
    positional, options = {
        "train": ([], [["--train-file", text], ["--output-dir", out], ["--overwrite-output-dir"], *TRAIN]),
        "build-tree": ([], [["--train-file", text], ["--output-dir", out], ["--overwrite-output-dir"],
                            *TRAIN]),
        "evaluate": ([run], [["--test-file", text]]),
        "predict-numbers": ([numeracy], [["--test-file", numbers], ["--predictions", out + ".jsonl"]]),
        "check-numbers": ([numeracy], [["--text", "we spent 3.5 billion in 1990 ."]]),
        "generate": ([run, "the cat"], [["--do-sample"], ["--max-new-tokens", "2"]]),
        "story": (["the picnic"], [["--storyline-model", s2s], ["--story-model", s2s], ["--do-sample"]]),
        "plot-attention": ([s2s, "the picnic"], [["--output", out + ".png"], ["--max-new-tokens", "3"]]),
        "card": ([run], []),
        "plot-numerals": ([numeracy], [["--output", out + ".png"], ["--which", "input"]]),
        "push": ([run], [["--repo-id", "someone/model"]]),
        "download": (["brown"], [["--dest", str(folders["root"] / "corpora")]]),
        "recipes": ([], [["--model", "nplm"]]),
    }[command]
    if flag in SOURCES.get(command, ()):
        options = [o for o in options if o[0] not in SOURCES[command]]
    if flag == "--value":
        options.append(["--density-after", "the deficit was"])
    return positional, [a for o in options if o[0] != flag for a in o]


def one_line_error(argv: list[str], capsys) -> str | None:
    """The error line of ``argv`` (exit 2), or None when it runs to the end (exit 0)."""
    capsys.readouterr()
    try:
        status = main(argv)
    except SystemExit as exit_info:
        status = exit_info.code
    except Exception as err:  # noqa: BLE001 - the traceback a user would see
        raise AssertionError(f"{type(err).__name__}: {err}") from err
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    assert status in (0, 2), (status, err)
    if status == 0:
        return None
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(f"hf-nlm {argv[0]}: error: "), err
    return lines[-1]


def cases(command: str) -> list[tuple[argparse.Action, str, bool]]:
    """(the argument, a value, whether it must be refused) for every argument of ``command``."""
    found = []
    for action in arguments(command):
        what = kind(action)
        if what == "switch":
            continue
        found.append((action, NOT_UTF8, True))
        if what in ("int", "float"):
            found.append((action, WRONG_TYPE, True))
            found += [(action, v, False) for v in (INT_VALUES if what == "int" else FLOAT_VALUES)]
            outside = stated_range(action)
            if outside is not None:
                found.append((action, outside, True))
        elif what == "choice":
            found.append((action, "no-such-choice", True))
        elif what == "path" and action.dest not in NOT_PATHS.get(command, ()):
            found += [(action, path.format(action.dest), False) for path in MISSING]
    return found


CHECKED = [c for c in COMMANDS if c not in SEPARATE_COMMANDS]


@pytest.mark.parametrize("command", [c for c in CHECKED if c not in ("push", "download")])  # the network
def test_each_command_line_the_values_go_into_runs(command, folders, no_training_loop, capsys):
    positional, options = command_line(command, folders, "")
    assert one_line_error([command, *positional, *options], capsys) is None


@pytest.mark.parametrize("command", CHECKED)
def test_every_argument_refuses_what_it_cannot_take_in_one_line(command, folders, no_training_loop,
                                                                capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the relative paths given would be made
    failures = []
    for action, value, refused in cases(command):
        name = action.option_strings[0] if action.option_strings else None
        if name in NOT_PATHS.get(command, ()) and value != NOT_UTF8:
            continue
        positional, options = command_line(command, folders, name or "")
        if name is None:  # a positional argument: put the value in its place
            index = [a.dest for a in arguments(command) if not a.option_strings].index(action.dest)
            positional = [*positional[:index], value, *positional[index + 1:]]
            given = []
        else:
            nargs = action.nargs if isinstance(action.nargs, int) else 1
            given = [name, *[value] * nargs]
        if command in ("push", "download") and value != NOT_UTF8 and name is not None:
            continue  # they would reach the network
        argv = [command, *positional, *given, *options]
        try:
            line = one_line_error(argv, capsys)
        except AssertionError as err:
            failures.append(f"{ascii([command, *given])}: {str(err).splitlines()[0][:300]}")
            continue
        shown = name or (value if value != NOT_UTF8 else "caf\\xe9")
        if line is None:
            if refused:
                failures.append(f"{ascii([command, *given])}: accepted")
        elif shown not in line:
            failures.append(f"{ascii([command, *positional, *given])}: {line!r} does not name {shown}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("temperature", [1e-30, 1e30])
def test_sampling_works_at_both_ends_of_the_temperatures_taken(folders, temperature):
    from hf_nlm.generation import check_generation_settings
    from hf_nlm.training import load_run

    check_generation_settings(do_sample=True, temperature=temperature)
    model, tokenizer = load_run(folders["run"])
    ids = tokenizer("the cat", return_tensors="pt").input_ids
    torch.manual_seed(0)
    sampled = model.generate(ids, do_sample=True, temperature=temperature, top_k=0, max_new_tokens=3,
                             min_new_tokens=3, pad_token_id=tokenizer.pad_token_id)
    greedy = model.generate(ids, do_sample=False, max_new_tokens=3, min_new_tokens=3,
                            pad_token_id=tokenizer.pad_token_id)
    if temperature < 1:  # the one-hot of the most likely token: greedy search
        assert sampled.tolist() == greedy.tolist()
    with pytest.raises(ValueError, match="^temperature must be a number from 1e-30 to 1e\\+30"):
        beyond = temperature * (1e-16 if temperature < 1 else 1e16)
        check_generation_settings(do_sample=True, temperature=beyond)


def test_a_prompt_that_is_not_utf8_is_named(folders, capsys):
    line = one_line_error(["generate", str(folders["run"]), NOT_UTF8 + " paid"], capsys)
    assert line == ("hf-nlm generate: error: the argument 'caf\\xe9 paid' is not UTF-8 text (byte 0xe9): "
                    "give it in UTF-8 (a terminal or file in another encoding, such as Latin-1, passes other "
                    "bytes)")


@pytest.mark.parametrize("argv", [["app", "--help"], ["app", "RUN"]])
def test_the_app_without_gradio_names_the_extra_to_install(argv, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gradio", None)  # as if `pip install hf-nlm` without [app]
    line = one_line_error(argv, capsys)
    assert line == ("hf-nlm app: error: the web page needs Gradio, which is not installed: "
                    "pip install 'hf-nlm[app]'")


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_the_app_refuses_a_port_outside_the_tcp_range_before_loading_anything(port, folders, capsys):
    line = one_line_error(["app", str(folders["run"]), "--port", port], capsys)
    assert line == f"hf-nlm app: error: --port {port}: a TCP port is a number from 1 to 65535"


def test_the_app_says_when_its_port_is_taken(folders, capsys):
    """A port another program holds ends in one line naming the address, not gradio's traceback."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        line = one_line_error(["app", str(folders["run"]), "--port", str(port)], capsys)
    assert line.startswith(f"hf-nlm app: error: cannot serve on 127.0.0.1:{port}: ")
