"""A saved folder loads in a Python process that never imports hf_nlm, as tools that load by path or Hub
id (``lm_eval --model hf``) do: ``config.json``'s and ``tokenizer_config.json``'s ``auto_map`` name the
classes in small code files saved beside the weights (:mod:`hf_nlm.remote_code`), which transformers runs with
``trust_remote_code=True``.

Each check of loading runs in a fresh interpreter (:func:`run_fresh`), with a modules cache of its own (where
transformers copies the code files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import torch
from test_model_contract import V, batch, inputs, tiny

from hf_nlm.hub.push import run_files
from hf_nlm.models import MODEL_TYPES
from hf_nlm.remote_code import CODE_FILES, MODEL_CODE_FILE, TOKENIZER_CODE_FILE
from hf_nlm.tokenization import NLMTokenizerFast, train_numeracy_tokenizer, train_word_level_tokenizer
from hf_nlm.training import load_run

# Numerals and words: V ids with the special tokens, as test_model_contract's models read.
WORDS = ["1", "12", "3.5", "-0.25", *(f"w{i}" for i in range(V))]


def tokenizer_for(model_type: str):
    """The kind of tokenizer a run trains for ``model_type``, over :data:`WORDS`, cut to V ids."""
    train = train_numeracy_tokenizer if model_type == "numeracy_lm" else train_word_level_tokenizer
    return train([" ".join(WORDS)], max_vocab_size=V)


def run_fresh(script: str, tmp_path, argument=None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``script`` in a new interpreter of this environment (hf_nlm installed, not imported), offline, with
    ``argument`` as JSON in ``sys.argv[1]``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"),
           "TRANSFORMERS_VERBOSITY": "error"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), json.dumps(argument)],
                          capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def last_json(done: subprocess.CompletedProcess):
    return json.loads(done.stdout.splitlines()[-1])


# Loads each folder of sys.argv[1] ({folder: ids}) through the Auto classes and prints what it got.
LOAD_FOLDERS = """
    import json, sys
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    assert "hf_nlm" not in sys.modules
    found = {}
    for folder, ids in json.loads(sys.argv[1]).items():
        config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
        auto = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM
        model = auto.from_pretrained(folder, trust_remote_code=True).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        ids = torch.tensor(ids)
        decoder = {}
        if config.is_encoder_decoder:  # the source read as the target too, as test_model_contract.inputs does
            start = torch.full_like(ids[:, :1], config.decoder_start_token_id)
            decoder["decoder_input_ids"] = torch.cat([start, ids[:, :-1]], dim=1)
        with torch.no_grad():
            logits = model(ids, **decoder).logits
        found[folder] = {"config": type(config).__name__, "model": type(model).__name__,
                         "tokenizer": type(tokenizer).__name__, "tokens": tokenizer.tokenize("w0 12 w1"),
                         "logits": logits.tolist()}
    print(json.dumps(found))
"""


def test_every_model_type_loads_without_import_hf_nlm(tmp_path):
    """Each model type's folder (model and tokenizer saved with save_pretrained) loads through AutoConfig,
    AutoModelForCausalLM (AutoModelForSeq2SeqLM for the encoder-decoder) and AutoTokenizer in a process that
    never imports hf_nlm, as the package's classes, and gives the logits of the model that saved it."""
    expected, folders = {}, {}
    for name in MODEL_TYPES:
        model, folder = tiny(name).eval(), tmp_path / name
        model.save_pretrained(folder)
        tokenizer_for(name).save_pretrained(folder)
        ids = batch()
        with torch.no_grad():
            expected[str(folder)] = (MODEL_TYPES[name], model(**inputs(model, ids)).logits)
        folders[str(folder)] = ids.tolist()
    found = last_json(run_fresh(LOAD_FOLDERS, tmp_path, folders))
    for folder, (model_type, logits) in expected.items():
        got = found[folder]
        assert got["config"] == model_type.config_class.__name__
        assert got["model"] == model_type.lm_class.__name__
        assert got["tokenizer"] == (model_type.tokenizer_class or NLMTokenizerFast).__name__
        assert got["tokens"] == ["w0", "12", "w1"]
        torch.testing.assert_close(torch.tensor(got["logits"]), logits)


def test_the_auto_map_names_the_code_files_classes(tmp_path):
    tiny("story_seq2seq").save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert auto_map == {"AutoConfig": "hf_nlm_model.StorySeq2SeqConfig",
                        "AutoModel": "hf_nlm_model.StorySeq2SeqModel",
                        "AutoModelForSeq2SeqLM": "hf_nlm_model.StorySeq2SeqForConditionalGeneration"}
    code = (tmp_path / MODEL_CODE_FILE).read_text()
    assert "from hf_nlm.models.story_seq2seq.configuration_story_seq2seq import StorySeq2SeqConfig" in code


def test_a_training_run_loads_without_import_hf_nlm_and_pushes_its_code_files(tiny_run, tmp_path):
    """The folders a run writes (the run's top, best_model/, each checkpoint) carry the code files and the
    auto_map; the run's model loads in a fresh process with the logits ``load_run`` gives, and ``hf-nlm push``
    uploads the code files with the model."""
    folders = [tiny_run, tiny_run / "best_model", *sorted((tiny_run / "checkpoints").glob("checkpoint-*"))]
    assert len(folders) >= 3
    for folder in folders:
        assert {MODEL_CODE_FILE, TOKENIZER_CODE_FILE} <= {p.name for p in folder.iterdir()}, folder
        assert "AutoModelForCausalLM" in json.loads((folder / "config.json").read_text())["auto_map"]
    assert set(CODE_FILES) <= {p.name for p in run_files(tiny_run)}
    model, tokenizer = load_run(tiny_run)
    ids = tokenizer("the cat sat on the mat", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model.eval()(ids).logits
    got = last_json(run_fresh(LOAD_FOLDERS, tmp_path, {str(tiny_run): ids.tolist()}))[str(tiny_run)]
    assert (got["model"], got["tokenizer"]) == ("NPLMForCausalLM", "NLMTokenizerFast")
    torch.testing.assert_close(torch.tensor(got["logits"]), logits)


def test_a_model_loaded_as_remote_code_saves_the_same_folder(tmp_path):
    """transformers registers a class it loaded as remote code for saving its module's source too; ours save
    this package's auto_map and code files instead, so the folder saved again loads again."""
    model = tiny("awd_lstm")
    model.save_pretrained(tmp_path / "first")
    tokenizer_for("awd_lstm").save_pretrained(tmp_path / "first")
    script = """
        import json, sys
        from transformers import AutoModelForCausalLM, AutoTokenizer
        first, again = json.loads(sys.argv[1])
        AutoModelForCausalLM.from_pretrained(first, trust_remote_code=True).save_pretrained(again)
        AutoTokenizer.from_pretrained(first, trust_remote_code=True).save_pretrained(again)
    """
    run_fresh(script, tmp_path, [str(tmp_path / "first"), str(tmp_path / "again")])
    names = {folder: sorted(p.name for p in (tmp_path / folder).iterdir()) for folder in ("first", "again")}
    assert names["again"] == names["first"]
    for name in ("config.json", "tokenizer_config.json"):
        first, again = (json.loads((tmp_path / folder / name).read_text()) for folder in ("first", "again"))
        assert again["auto_map"] == first["auto_map"]
    for name in CODE_FILES:
        assert (tmp_path / "again" / name).read_text() == (tmp_path / "first" / name).read_text()


def test_without_the_package_or_without_trust_remote_code_the_error_says_what_to_do(tmp_path):
    tiny("nplm").save_pretrained(tmp_path / "model")
    script = """
        import json, sys
        from transformers import AutoModelForCausalLM
        folder, hide = json.loads(sys.argv[1])
        if hide:
            sys.modules["hf_nlm"] = None  # as if it were not installed
        AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=hide or None)
    """
    missing = run_fresh(script, tmp_path, [str(tmp_path / "model"), True], check=False)
    assert missing.returncode == 1
    assert ("ImportError: this model folder was saved by hf-nlm, which is not installed: pip install hf-nlm"
            in missing.stderr)
    untrusted = run_fresh(script, tmp_path, [str(tmp_path / "model"), False], check=False)
    assert untrusted.returncode == 1
    assert "Please pass the argument `trust_remote_code=True`" in untrusted.stderr


def test_after_import_hf_nlm_the_package_classes_load_with_or_without_trust_remote_code(tmp_path):
    from transformers import AutoModelForCausalLM

    model = tiny("lbl")
    model.save_pretrained(tmp_path)
    for trust in (None, True):
        assert type(AutoModelForCausalLM.from_pretrained(tmp_path, trust_remote_code=trust)) is type(model)
