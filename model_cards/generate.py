"""Write the model cards of the repository: the card template of each model type and the cards of the
reference models this repository trains, generated from the benchmark results.

    python model_cards/generate.py            # rewrite every card
    python model_cards/generate.py --check    # exit 1 if a committed card differs from what this writes

* ``hf_nlm/models/<model_type>/card.md``: the card every model of that type starts from (what
  ``save_pretrained`` writes, with the type's default configuration; a trained run's card adds results and
  training settings), in the model type's folder beside the card text it is written from (``card.toml``);
  ``hf_nlm/ngram/cards/<model_type>.md`` likewise for the n-gram baselines;
* ``model_cards/<name>/README.md``: one card per reference model, from its row of
  ``benchmarks/results/*.json``. The numbers are copied from those files; what was measured, and under which
  budget, is said in each card.

The weights of these runs are not published with the repository: each card says how to train the model.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

from hf_nlm.data.registry import CORPORA  # noqa: E402
from hf_nlm.hub.model_card import CardText, render_card, render_model_card  # noqa: E402
from hf_nlm.models import MODEL_TYPES  # noqa: E402
from hf_nlm.ngram import cards as ngram_cards  # noqa: E402

#: The n-gram model types (their card texts are declared with the n-gram package).
NGRAM_TYPES = tuple(ngram_cards.CARD_TEXTS)


def card_text(model_type: str) -> CardText:
    """What the cards say about ``model_type``: its config's ``card_text``, or an n-gram baseline's."""
    if model_type in NGRAM_TYPES:
        return ngram_cards.CARD_TEXTS[model_type]
    return MODEL_TYPES[model_type].config_class.card_text


def template_path(model_type: str) -> Path:
    """Where the card template of ``model_type`` lives: beside the declaration of its card text."""
    if model_type in NGRAM_TYPES:
        return Path(ngram_cards.__file__).parent / f"{model_type}.md"
    return Path(inspect.getfile(MODEL_TYPES[model_type].config_class)).parent / "card.md"


@dataclass(frozen=True)
class Benchmark:
    """A results file and how its rows were produced (the command line the documentation quotes)."""

    results: str  # file name in benchmarks/results
    command: str
    corpus: str
    recipe: str  # the training recipe the benchmark script applies to every row


BROWN = Benchmark(
    "brown_table.json",
    "python benchmarks/brown_table.py --recipes paper --batch-size 8 --time-budget 540", "brown",
    "Bengio et al.'s recipe for every MLP: plain SGD with eps_0 = 1e-3 per example (scaled by the targets "
    "per update) and the schedule eps_t = eps_0 / (1 + r t), r = 1e-8, weight decay 1e-4, early stopping on "
    "validation perplexity, a fixed time budget per row. Vocabulary: words seen at least 4 times in the "
    "whole corpus (the paper's rule). The n-gram rows are counted on the training split (the interpolated "
    "trigram's weights fitted by EM on the validation split).",
)
HLBL = Benchmark(
    "hlbl_trees.json", "python benchmarks/hlbl_trees.py --threads 1", "brown",
    "Every row trained the same way: Adam, learning rate 1e-3, batches of 32 blocks of 64 targets, up to 8 "
    "epochs, early stopping with patience 1. Vocabulary: training words seen at least 4 times. The "
    "data-built trees (balanced, adaptive) come from the random-tree HLBL's predicted word vectors, split by "
    "recursive two-component EM (Mnih & Hinton 2008, sec. 4); each is a fresh HLBL trained on its tree.",
)
PTB = Benchmark(
    "ptb_awd.json", "python benchmarks/ptb_awd.py --threads 2 --reg-scale 0.25 --ar-scale 0", "ptb",
    "Merity et al.'s training loop: 20 stream columns, variable BPTT around 70, SGD with learning rate 30, "
    "gradient clipping 0.25, weight decay 1.2e-6, tied embeddings, NT-ASGD with n = 5; a CPU-sized network "
    "and a fixed time budget per row (20 minutes, stopping in the middle of an epoch when it is spent; the "
    "best validated weights kept). Perplexities recomputed after training with the state carried over the "
    "whole split (batch 1, exact).",
)


@dataclass(frozen=True)
class Reference:
    name: str  # folder and model-index name
    benchmark: Benchmark
    case: str  # the row's "case"
    model_type: str
    title: str
    settings: tuple[str, ...]  # keys of the row shown as hyperparameters
    note: str = ""
    recipe_name: str = ""  # the named recipe of the row (`hf-nlm train --recipe NAME`), where it has one


NPLM_SETTINGS = ("n", "h", "m", "direct", "vocab_size", "num_parameters", "epochs", "stop_reason",
                 "train_time_s", "threads")
NGRAM_SETTINGS = ("order", "vocab_size", "train_time_s", "threads")
HLBL_SETTINGS = ("dim", "context_size", "diagonal_context", "vocab_size", "num_parameters", "epochs",
                 "stop_reason", "train_time_s", "tokens_per_s", "threads", "tree_max_depth",
                 "tree_expected_code_length", "tree_max_codes", "tree_words_with_several_codes")
AWD_SETTINGS = ("config", "num_hidden_layers", "embedding_size", "hidden_size", "vocab_size",
                "num_parameters", "epochs", "global_step", "stop_reason", "averaging_since_step",
                "time_budget_s", "train_time_s", "tokens_per_s", "threads")

REFERENCES: tuple[Reference, ...] = (
    *(Reference(f"nplm-brown-{row.lower()}", BROWN, row, "nplm",
                f"NPLM {row} (Bengio et al. 2003, Table 1) on Brown", NPLM_SETTINGS)
      for row in ("MLP1", "MLP3", "MLP5", "MLP7", "MLP9")),
    Reference("interpolated-trigram-brown", BROWN, "Del. Int. (trigram)", "interpolated",
              "Interpolated trigram (deleted interpolation) on Brown", NGRAM_SETTINGS),
    *(Reference(f"kneser-ney-{n}gram-brown", BROWN, f"Kneser-Ney {n}-gram", "kneser_ney",
                f"Kneser-Ney {n}-gram on Brown", NGRAM_SETTINGS) for n in (3, 4, 5)),
    Reference("lbl-brown", HLBL, "LBL", "lbl", "LBL (full softmax) on Brown", HLBL_SETTINGS[:10],
              recipe_name="brown-lbl-softmax"),
    *(Reference(f"hlbl-brown-{slug}", HLBL, case, "hlbl", f"HLBL, {tree} tree, on Brown", HLBL_SETTINGS,
                recipe_name=f"brown-hlbl-{slug}")
      for slug, case, tree in (("random", "HLBL random", "random"), ("huffman", "HLBL huffman", "Huffman"),
                               ("balanced", "HLBL balanced", "balanced (EM)"),
                               ("adaptive", "HLBL adaptive", "adaptive (EM)"),
                               ("adaptive-eps0.25", "HLBL adaptive(0.25)", "adaptive(eps = 0.25) (EM)"))),
    Reference("awd-lstm-ptb", PTB, "AWD-LSTM", "awd_lstm", "AWD-LSTM (CPU-sized) on Penn Treebank",
              AWD_SETTINGS,
              note="Regularisation scaled to the CPU-sized network and budget (chosen by the sweep in "
                   "`benchmarks/results/ptb_awd_sweep/`): the paper's dropouts and weight drop x 0.25 "
                   "(output 0.1, between layers 0.0625, input 0.1, embedding 0.025, weight drop 0.125), AR "
                   "and TAR off."),
    Reference("lstm-ptb-plain", PTB, "LSTM (plain)", "awd_lstm",
              "LSTM without regularisation (AWD-LSTM network, every regulariser off) on Penn Treebank",
              AWD_SETTINGS,
              note="The same `AWDLSTMForCausalLM` network as `awd-lstm-ptb` with weight drop, every dropout, "
                   "AR, TAR and NT-ASGD off (plain SGD): the benchmark's control row."),
)


def benchmark_rows(benchmark: Benchmark) -> list[dict]:
    data = json.loads((RESULTS / benchmark.results).read_text(encoding="utf-8"))
    return data if isinstance(data, list) else data["rows"]


def find_row(ref: Reference) -> dict:
    rows = [r for r in benchmark_rows(ref.benchmark) if r["case"] == ref.case]
    if len(rows) != 1:
        raise ValueError(f"{ref.benchmark.results}: {len(rows)} rows named {ref.case!r}")
    return rows[0]


def _budget_note(ref: Reference, row: dict) -> str:
    threads = row.get("threads")
    cpu = f"on a CPU ({threads} thread{'s' if threads != 1 else ''})" if threads else "on a CPU"
    if row.get("stop_reason") == "max_time":
        return (f"A CPU-budget run: trained {cpu} until the time budget ended it (`stop_reason: max_time`) "
                f"after {row.get('epochs')} epoch(s), far from convergence; the paper's models trained much "
                "longer.")
    if ref.model_type in NGRAM_TYPES:
        return f"Counted {cpu} in {row.get('train_time_s')} s."
    return (f"Trained {cpu}; training stopped by `{row.get('stop_reason')}` after {row.get('epochs')} "
            "epoch(s).")


def render_reference(ref: Reference) -> str:
    row = find_row(ref)
    corpus = CORPORA[ref.benchmark.corpus].card
    perplexities = {"validation": row["valid_ppl"], "test": row["value"]}
    source = f"benchmarks/results/{ref.benchmark.results}"
    results = ["| split | perplexity |" + (" paper's test perplexity |" if "paper_test_ppl" in row else ""),
               "|---|---|" + ("---|" if "paper_test_ppl" in row else "")]
    results += [f"| validation | {row['valid_ppl']:.1f} |" + (" |" if "paper_test_ppl" in row else ""),
                f"| test | {row['value']:.1f} |"
                + (f" {row['paper_test_ppl']} |" if "paper_test_ppl" in row else "")]
    results += ["", f"Measured by `{ref.benchmark.command.split()[1]}` (row `{ref.case}` of `{source}`): "
                "perplexity per token of the split, every token predicted (sentence ends `<eos>` and `<unk>` "
                "included), as `hf_nlm.evaluation.evaluate_lm` computes it. " + _budget_note(ref, row)]
    if "paper_test_ppl" in row:
        results += ["", "The paper's number is a reference point, not the same measurement: Bengio et al.'s "
                    "copy of the corpus was tokenised differently and did not predict sentence ends."]
    if ref.case == "MLP9":
        mix = next(r for r in benchmark_rows(BROWN) if r["case"] == "MLP10")
        results += ["", f"Mixed with the interpolated trigram (weight {mix['mix_weight']}, the paper's "
                    f"MLP10) it scores {mix['valid_ppl']:.1f} on validation and {mix['value']:.1f} on test "
                    f"(paper: {mix['paper_test_ppl']})."]
    settings = {k: row[k] for k in ref.settings if k in row}
    training = [ref.benchmark.recipe, "", "This row's settings, as recorded in the results file:", "",
                "```json", json.dumps(settings, indent=2), "```", "",
                f"Reproduce: `hf-nlm train --recipe {ref.recipe_name} --output-dir runs/{ref.recipe_name}` "
                f"(the whole table: `{ref.benchmark.command}`)." if ref.recipe_name else
                f"Reproduce: `{ref.benchmark.command}`."]
    made = ("Its counts are not published with the repository; rebuild them with the command under "
            "*Training procedure* (or `from_texts` and `save` in `hf_nlm.ngram`) and load the folder as "
            "shown below."
            if ref.model_type in NGRAM_TYPES else
            "Its weights are not published with the repository; train it with the command under *Training "
            "procedure* and load the run folder as shown below.")
    about = [f"A reference model of hf-nlm: {card_text(ref.model_type).title}, from the benchmark table in "
             f"`{source}`. {made}"]
    if ref.note:
        about += ["", ref.note]
    library = "hf-nlm" if ref.model_type in NGRAM_TYPES else "transformers"
    return render_card(
        model_type=ref.model_type, card_text=card_text(ref.model_type), model_name=ref.name, title=ref.title,
        perplexities=perplexities, corpus=corpus, about=about, results=results, training=training,
        load_from="path/to/run_folder", library_name=library,
    )


def render_template(model_type: str) -> str:
    """The card a model of ``model_type`` starts from: ``save_pretrained``'s with the default
    configuration."""
    if model_type in MODEL_TYPES:
        return render_model_card(MODEL_TYPES[model_type].config_class())
    text = card_text(model_type)
    return render_card(model_type=model_type, card_text=text, model_name=model_type,
                       title=f"{text.title} language model", library_name="hf-nlm")


def cards() -> dict[str, str]:
    """Every card this script writes: path relative to the repository -> text."""
    out = {str(template_path(t).relative_to(ROOT)): render_template(t) for t in (*MODEL_TYPES, *NGRAM_TYPES)}
    out.update({f"{HERE.name}/{ref.name}/README.md": render_reference(ref) for ref in REFERENCES})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed cards instead of writing")
    parser.add_argument("--output-dir", default=str(ROOT),
                        help="the repository to write into (default: this one)")
    args = parser.parse_args(argv)
    out, stale = Path(args.output_dir), []
    for rel, text in cards().items():
        path = out / rel
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if stale:
        print("out of date (run python model_cards/generate.py):", *stale, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
