"""Train the numeracy LM of Spithourakis & Riedel (ACL 2018) and report perplexity and adjusted
perplexity over words and numerals, then draw its numeral embeddings.

The run is `hf-nlm train --model numeracy_lm` with the paper's settings as defaults (SOTU, the
numeracy tokenizer's top 5,000 tokens, a 1 x 50 LSTM with dropout 0.1, Adam 1e-3); every flag of
`hf-nlm train` works (`--help`). Runs as a plain script or under `accelerate launch` / torchrun:

    python examples/train_numeracy.py --numeral-strategy hsoftmax --output-dir runs/numeracy-h
    accelerate launch examples/train_numeracy.py --numeral-strategy softmax_digits \
        --output-dir runs/numeracy-d
    python examples/train_numeracy.py --corpus text --train-file notes_train.txt \
        --validation-file notes_valid.txt --test-file notes_test.txt --vocab-size 1000 --output-dir runs/notes

Writes what `hf-nlm train` writes (checkpoints, the model with its tokenizer, results.json, README.md)
plus `numeral_embeddings.png` into the output folder.
"""

from __future__ import annotations

import argparse
import os
import sys

from hf_nlm.plots.numerals import plot_numeral_embeddings
from hf_nlm.training import train
from hf_nlm.training.arguments import add_train_arguments, spec_from_arguments
from hf_nlm.training.run import report_interrupt, resume_command

PAPER_DEFAULTS = dict(model_type="numeracy_lm", corpus="sotu", vocab_size=5000, split_punctuation=True,
                      optimizer="adam", learning_rate=1e-3, num_epochs=10, block_size=50, batch_size=32,
                      max_grad_norm=1.0)
FIGURES = ("perplexity", "adjusted_perplexity")


def main() -> None:
    parser = add_train_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    dests = {action.dest for action in parser._actions}
    parser.set_defaults(**{k: v for k, v in PAPER_DEFAULTS.items() if k in dests})
    args = parser.parse_args()
    main_process = int(os.environ.get("RANK", "0")) == 0
    try:
        result = train(spec_from_arguments(args))
    except KeyboardInterrupt:
        resume = resume_command(sys.argv[1:], program=("python", sys.argv[0]))
        sys.exit(report_interrupt(args.output_dir, resume) if main_process else 130)
    except (ValueError, TypeError, FileNotFoundError, FloatingPointError) as err:
        parser.error(str(err))
    model, tokenizer, results = result.model, result.tokenizer, result.metrics
    if not main_process:
        return
    for split in ("validation", "test"):
        if split in results:
            r = results[split]
            print(f"{split}: " + "; ".join(
                f"{name.replace('_', ' ')} all {r[name]:.2f}, words {r[name + '_words']:.2f}, "
                f"numerals {r[name + '_numerals']:.2f}"
                for name in FIGURES if r.get(name + "_numerals") is not None))
    print(f"{result.spec.data.name}: vocabulary {len(tokenizer):,} "
          f"({len(tokenizer.numeral_vocab) - 1:,} numerals); "
          f"numeral strategy {model.config.numeral_strategy}; {model.num_parameters():,} parameters")
    picture = result.output_dir / "numeral_embeddings.png"
    plot_numeral_embeddings(model, tokenizer, picture)
    print(f"numeral embeddings: {picture}")


if __name__ == "__main__":
    main()
