"""Model cards: the reference cards in model_cards/ (generated from benchmarks/results), the card of a
training run (`hf-nlm card`), and the basic card save_pretrained writes. Each is read back with
huggingface_hub's own parsers (ModelCard, model_index_to_eval_results) and its numbers compared with the
results files."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
from huggingface_hub import ModelCard
from huggingface_hub.repocard_data import model_index_to_eval_results

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.models import MODEL_TYPES
from hf_nlm_cli import main

ROOT = Path(__file__).resolve().parents[2]
CARDS = ROOT / "model_cards"
RESULTS = ROOT / "benchmarks" / "results"
SECTIONS = ("## Results", "## Training data", "## Training procedure and hyperparameters",
            "## Intended use and limitations", "## How to load", "## Citation", "```bibtex\n@")


@pytest.fixture(scope="module")
def generate():
    spec = importlib.util.spec_from_file_location("model_cards_generate", CARDS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _row(results_file: str, case: str) -> dict:
    data = json.loads((RESULTS / results_file).read_text())
    rows = data if isinstance(data, list) else data["rows"]
    (row,) = [r for r in rows if r["case"] == case]
    return row


def _metadata(card: ModelCard) -> tuple[dict, dict[str, float]]:
    meta = card.data.to_dict()
    name, evals = model_index_to_eval_results(meta["model-index"])
    assert {(e.task_type, e.metric_type) for e in evals} == {("text-generation", "perplexity")}
    return meta, {e.dataset_split: e.metric_value for e in evals}


def committed_templates() -> set[Path]:
    """The card templates in the repository: one beside each model type's code, one per n-gram
    baseline."""
    return {*(ROOT / "hf_nlm" / "models").glob("*/card.md"),
            *(ROOT / "hf_nlm" / "ngram" / "cards").glob("*.md")}


def test_committed_cards_are_what_generate_writes(generate, tmp_path):
    assert generate.main(["--check"]) == 0
    expected = set(generate.cards())
    committed = {str(p.relative_to(ROOT)) for p in [*CARDS.rglob("*.md"), *committed_templates()]}
    assert committed == expected
    assert {f"hf_nlm/models/{t}/card.md" for t in MODEL_TYPES} <= expected
    assert {"hf_nlm/ngram/cards/kneser_ney.md", "hf_nlm/ngram/cards/interpolated.md"} <= expected


def test_reference_cards_load_and_report_the_results_files(generate):
    folders = sorted(p.parent.name for p in CARDS.glob("*/README.md"))
    assert folders == sorted(ref.name for ref in generate.REFERENCES)
    assert {"nplm-brown-mlp1", "kneser-ney-5gram-brown", "hlbl-brown-adaptive",
            "awd-lstm-ptb"} <= set(folders)
    for ref in generate.REFERENCES:
        card = ModelCard.load(CARDS / ref.name / "README.md")
        meta, perplexities = _metadata(card)
        row = _row(ref.benchmark.results, ref.case)
        assert perplexities == {"validation": row["valid_ppl"], "test": row["value"]}, ref.name
        assert meta["model-index"][0]["name"] == ref.name
        assert meta["license"] == "apache-2.0" and meta["language"] == "en"
        assert meta["pipeline_tag"] == "text-generation" and "hf-nlm" in meta["tags"]
        assert meta["library_name"] == ("hf-nlm" if ref.model_type in ("kneser_ney", "interpolated")
                                        else "transformers")
        if ref.benchmark.corpus == "ptb":
            assert meta["datasets"] == ["ptb_text_only"]
        else:  # Brown: no Hub dataset holds Bengio et al.'s split
            assert "datasets" not in meta
        for section in SECTIONS:
            assert section in card.content, (ref.name, section)
        assert f"{row['value']:.1f}" in card.content  # the results table, as in the benchmark's .md
        if row.get("stop_reason") == "max_time":
            assert "CPU-budget run" in card.content


def test_templates_load(generate):
    templates = committed_templates()
    assert len(templates) == len(MODEL_TYPES) + len(generate.NGRAM_TYPES)
    for path in templates:
        card = ModelCard.load(path)
        model_type = path.parent.name if path.name == "card.md" else path.stem
        assert card.data.license == "apache-2.0" and model_type in card.data.tags
        assert "## Citation" in card.content and "model-index" not in card.data.to_dict()


@pytest.fixture
def run_dir(tiny_run, tmp_path) -> Path:
    """A copy of the shared run folder: these tests rewrite its card."""
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


def test_training_card_has_the_model_index_and_card_command_rewrites_it(run_dir, capsys):
    results = json.loads((run_dir / "results.json").read_text())
    written = (run_dir / "README.md").read_text()
    meta, perplexities = _metadata(ModelCard(written))
    assert perplexities == {s: results[s]["perplexity"] for s in ("validation", "test")}
    assert "datasets" not in meta  # local text files: no Hub dataset (not "text")
    assert meta["library_name"] == "transformers" and meta["tags"][:2] == ["hf-nlm", "nplm"]
    for section in SECTIONS:
        assert section in written, section
    assert json.dumps(results["training_config"]["learning_rate"]) in written

    (run_dir / "README.md").unlink()
    assert main(["card", str(run_dir)]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "README.md")
    assert (run_dir / "README.md").read_text() == written  # the same card, from config.json + results.json

    assert main(["card", str(run_dir), "--dataset", "ptb", "--model-name", "toy"]) == 0
    meta, _ = _metadata(ModelCard.load(run_dir / "README.md"))
    assert meta["datasets"] == ["ptb_text_only"] and meta["model-index"][0]["name"] == "toy"


def test_card_command_refuses_a_folder_without_a_model(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["card", str(tmp_path)])
    assert exit_info.value.code == 2 and "no config.json" in capsys.readouterr().err


def test_save_pretrained_writes_a_card_unless_one_exists(tmp_path):
    model = NPLMForCausalLM(NPLMConfig(vocab_size=12, context_size=2, embedding_size=4, hidden_size=4))
    model.save_pretrained(tmp_path / "a")
    card = ModelCard.load(tmp_path / "a" / "README.md")
    assert card.data.library_name == "transformers" and card.data.tags[:2] == ["hf-nlm", "nplm"]
    assert f"Parameters: {model.num_parameters():,}" in card.content
    assert NPLMForCausalLM.from_pretrained(tmp_path / "a").config.context_size == 2

    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "README.md").write_text("my own card\n")
    model.save_pretrained(tmp_path / "b")
    assert (tmp_path / "b" / "README.md").read_text() == "my own card\n"
