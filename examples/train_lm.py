"""Train a neural LM with hf_nlm, step by step (the same run as `hf-nlm train`).

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

from hf_nlm.cli import (
    add_train_arguments,
    corpus_name,
    prepare_training,
    report_interrupt,
    resume_command,
    run_settings,
)
from hf_nlm.training import train_lm


def main() -> None:
    # The argument builder of `hf-nlm train`: corpus, tokenizer, model and TrainingConfig flags.
    parser = add_train_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    args = parser.parse_args()
    args.parser, args.argv = parser, sys.argv[1:]  # --resume compares the flags given with the run's

    # 1. corpus (DatasetDict with train / validation / test), 2. tokenizer trained on train,
    # 3. a fresh model sized for it (or both read from the checkpoint with --resume), 4. TrainingConfig.
    try:
        datasets, tokenizer, model, config = prepare_training(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        parser.error(str(err))
    if int(os.environ.get("RANK", "0")) == 0:  # one line, not one per process
        print(f"{corpus_name(args)}: {', '.join(f'{k} {len(v):,} lines' for k, v in datasets.items())}; "
              f"vocabulary {len(tokenizer):,}; {sum(p.numel() for p in model.parameters()):,} parameters")

    # 5. train: checkpoints, log.jsonl, curves.png, the best model, README.md and results.json in output_dir.
    try:
        results = train_lm(model, tokenizer, datasets, config, dataset_name=corpus_name(args),
                           run_settings=run_settings(args))
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the checkpoint and the command that goes on, exit 130
        resume = resume_command(sys.argv[1:], program=("python", sys.argv[0]))
        sys.exit(report_interrupt(config.output_dir, resume) if int(os.environ.get("RANK", "0")) == 0 else 130)
    for split in ("validation", "test"):
        if split in results:
            print(f"{split} perplexity {results[split]['perplexity']:.2f}")


if __name__ == "__main__":
    main()
