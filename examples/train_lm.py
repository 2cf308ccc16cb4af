"""Train a neural LM with hf_nlm: the command line's flags into a RunSpec, then `train(spec)` (the same run as
`hf-nlm train`).

Runs as a plain script, under `accelerate launch`, or with several processes under torchrun:

    python examples/train_lm.py --corpus brown --min-frequency 4 --output-dir runs/mlp1
    accelerate launch examples/train_lm.py --corpus ptb --output-dir runs/ptb
    torchrun --nproc_per_node 2 examples/train_lm.py --train-file train.txt --validation-file valid.txt \
        --test-file test.txt --output-dir runs/toy --batch-size 16

With P processes each takes --batch-size blocks of every global batch (P x batch-size blocks), so
the result equals one process with P times the batch size. `accelerate launch --cpu --num_processes 2`
starts a single process; on CPUs use torchrun for two processes. Arguments: `--help`.
"""

from __future__ import annotations

import argparse
import os
import sys

from hf_nlm.training import train
from hf_nlm.training.arguments import add_train_arguments, spec_from_arguments
from hf_nlm.training.run import report_interrupt, resume_command


def main() -> None:
    # The flags of `hf-nlm train`: corpus, tokenizer, model and TrainingConfig; those given win over the
    # recipe.
    parser = add_train_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    args = parser.parse_args()
    main_process = int(os.environ.get("RANK", "0")) == 0
    try:
        # The corpus, tokenizer and model settings, the recipe resolved (or the run's, with --resume).
        spec = spec_from_arguments(args)
        # Corpus -> tokenizer trained on train -> a fresh model sized for it -> the loop; checkpoints,
        # log.jsonl, curves.png, the best model, README.md and results.json in the output folder.
        result = train(spec)
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the checkpoint and the command that goes on, exit 130
        resume = resume_command(sys.argv[1:], program=("python", sys.argv[0]))
        sys.exit(report_interrupt(args.output_dir, resume) if main_process else 130)
    except (ValueError, TypeError, FileNotFoundError, FloatingPointError) as err:
        parser.error(str(err))
    if main_process:
        model, tokenizer = result.model, result.tokenizer
        print(f"{result.spec.data.name}: vocabulary {len(tokenizer):,}; "
              f"{model.num_parameters():,} parameters")
        for split in ("validation", "test"):
            if split in result.metrics:
                print(f"{split} perplexity {result.metrics[split]['perplexity']:.2f}")


if __name__ == "__main__":
    main()
