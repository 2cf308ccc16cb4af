"""Train an HLBL on a data-built word tree, step by step (the same run as `hf-nlm build-tree`).

A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008, sec. 4:

    1. train an HLBL with a random tree;
    2. represent each word by the average predicted vector r_hat over the contexts it occurs in;
    3. build a tree by recursive two-component spherical-Gaussian EM (BALANCED / ADAPTIVE / ADAPTIVE(eps));
    4. train a fresh HLBL on the new tree.

    python examples/train_hlbl.py --corpus brown --min-frequency 4 --output-dir runs/hlbl-adaptive \
        --tree-mode adaptive --eps 0.25 --optimizer adam --learning-rate 1e-3 --lr-scheduler constant
    python examples/train_hlbl.py --train-file train.txt --validation-file valid.txt --test-file test.txt \
        --output-dir runs/toy --embedding-size 50 --num-epochs 3

Writes OUTPUT_DIR/random_tree (step 1), OUTPUT_DIR/word_tree.json (step 3) and the final model in
OUTPUT_DIR (loadable with transformers.AutoModelForCausalLM after `import hf_nlm`). Arguments: `--help`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from hf_nlm.training import train_lm
from hf_nlm.training.arguments import add_build_tree_arguments, spec_from_arguments
from hf_nlm.training.run import build_config, train_tokenizer
from hf_nlm.training.run_folder import prepare_output_dir
from hf_nlm.training.tree_recipe import build_data_tree, hlbl_on_tree, tree_summary
from hf_nlm.trees import random_tree


def main() -> None:
    parser = add_build_tree_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    args = parser.parse_args()
    try:
        spec = spec_from_arguments(args, default_model="hlbl")  # the flags given over the HLBL's recipe
        training = spec.training
        datasets = spec.data.load()
        spec, tokenizer = train_tokenizer(spec, datasets["train"]["text"])
        config = build_config(spec, tokenizer)  # an HLBLConfig: LBL body, tree head
    except (ValueError, TypeError, FileNotFoundError, KeyError) as err:
        parser.error(str(err))
    out, name = training.output_dir, spec.data.name
    print(f"{name}: vocabulary {len(tokenizer):,}; D = {config.hidden_size}, n - 1 = {config.context_size}")
    try:  # the folder is checked and claimed before step 1 writes into it (random_tree/, word_tree.json)
        prepare_output_dir(out, resuming=False, overwrite=training.overwrite_output_dir,
                           main_process=int(os.environ.get("RANK", "0")) == 0)
    except ValueError as err:
        parser.error(str(err))

    # 1. An HLBL on a random tree (a balanced tree with the words at random leaves), made as `train` makes
    # a model: its training memory checked, seeded, with the generation defaults it is saved with.
    try:
        model = hlbl_on_tree(config, random_tree(config.vocab_size, seed=spec.tree_seed), tokenizer, training)
    except ValueError as err:
        parser.error(str(err))
    stage1 = dataclasses.replace(training, output_dir=os.path.join(out, "random_tree"))
    if args.first_stage_epochs is not None:
        stage1 = dataclasses.replace(stage1, num_epochs=args.first_stage_epochs)
    first = train_lm(model, tokenizer, datasets, stage1, dataset_name=name)
    print(f"random tree: test perplexity {first['test']['perplexity']:.2f}" if "test" in first
          else "random tree done")

    # 2-3. Each word's average predicted vector r_hat, then the recursive EM tree over those vectors.
    tree = build_data_tree(model, datasets["train"]["text"], tokenizer, mode=args.tree_mode, eps=args.eps,
                           block_size=training.block_size, batch_size=training.eval_batch_size,
                           seed=spec.tree_seed)
    os.makedirs(out, exist_ok=True)
    tree.save(os.path.join(out, "word_tree.json"))
    print(f"{args.tree_mode} tree (eps {args.eps}): {tree_summary(tree)}")

    # 4. A fresh HLBL on the data-built tree.
    model = hlbl_on_tree(config, tree, tokenizer, training)
    final = train_lm(model, tokenizer, datasets, training, dataset_name=name)
    if "test" in final:
        print(f"{args.tree_mode} tree: test perplexity {final['test']['perplexity']:.2f}")


if __name__ == "__main__":
    main()
