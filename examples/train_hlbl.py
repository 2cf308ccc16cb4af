"""Train an HLBL on a data-built word tree (the same run as `hf-nlm build-tree` and
`hf-nlm train --model hlbl --tree-mode MODE`).

A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008, sec. 4:

    1. train an HLBL with a random tree;
    2. represent each word by the average predicted vector r_hat over the contexts it occurs in;
    3. build a tree by recursive two-component spherical-Gaussian EM (BALANCED / ADAPTIVE / ADAPTIVE(eps));
    4. train a fresh HLBL on the new tree.

The flags make a `RunSpec` whose `tree_mode` / `tree_eps` / `first_stage_epochs` ask for the data-built tree,
and `hf_nlm.training.train(spec)` runs all four steps:

    python examples/train_hlbl.py --recipe brown-hlbl-adaptive-eps0.25 --output-dir runs/hlbl-adaptive
    python examples/train_hlbl.py --train-file train.txt --validation-file valid.txt --test-file test.txt \
        --output-dir runs/toy --tree-mode balanced --embedding-size 50 --num-epochs 3

Writes OUTPUT_DIR/random_tree (step 1), OUTPUT_DIR/word_tree.json (step 3) and the final model in
OUTPUT_DIR (loadable with transformers.AutoModelForCausalLM after `import hf_nlm`). Arguments: `--help`.
"""

from __future__ import annotations

import argparse

from hf_nlm.training import train
from hf_nlm.training.arguments import add_build_tree_arguments, build_tree_spec_from_arguments


def main() -> None:
    parser = add_build_tree_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    args = parser.parse_args()
    try:
        spec = build_tree_spec_from_arguments(args)  # the flags given over the HLBL's recipe
        result = train(spec)
    except (ValueError, TypeError, FileNotFoundError) as err:
        parser.error(str(err))
    metrics = result.metrics
    if not metrics:  # another process of a multi-process run: the main one reports
        return
    tree = metrics["tree"]
    print(f"{tree['mode']} tree (eps {tree['eps']}): depth {tree['max_depth']}, {tree['num_nodes']:,} nodes, "
          f"{tree['words_with_several_codes']:,} words with several codes, built in {tree['build_s']:.1f} s")
    for name, figures in (("random tree", metrics["random_tree"]), (f"{tree['mode']} tree", metrics)):
        if "test" in figures:
            print(f"{name}: test perplexity {figures['test']['perplexity']:.2f}")


if __name__ == "__main__":
    main()
