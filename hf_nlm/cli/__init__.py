"""The ``hf-nlm`` command: translates arguments into the library's calls, nothing more.

    hf-nlm train --corpus brown --output-dir runs/mlp1 --context-size 4 --hidden-size 50 --embedding-size 60
    hf-nlm train --train-file train.txt --validation-file valid.txt --test-file test.txt --output-dir runs/toy
    hf-nlm train --corpus brown --model hlbl --tree huffman --output-dir runs/hlbl-huffman
    hf-nlm build-tree --corpus brown --tree-mode adaptive --eps 0.25 --output-dir runs/hlbl-adaptive
    hf-nlm evaluate runs/mlp1 --corpus brown --split test
    hf-nlm generate runs/mlp1 "the president said" --num-beams 5 --max-new-tokens 20
    hf-nlm card runs/mlp1
    hf-nlm push runs/mlp1 --repo-id your-name/nplm-brown
    hf-nlm download brown ptb sotu

The console script is ``hf_nlm_cli.main`` (outside this package: ``hf-nlm --help`` answers without importing
torch). ``train`` and ``build-tree`` parse the library's run flags (:mod:`hf_nlm.training.arguments`) into a
:class:`~hf_nlm.training.RunSpec` and call :func:`hf_nlm.training.train`; the other commands load a saved run
with :func:`hf_nlm.training.load_run` and call one library function each. One module per command group
(:mod:`~hf_nlm.cli.train`, :mod:`~hf_nlm.cli.evaluate`, :mod:`~hf_nlm.cli.generate`, :mod:`~hf_nlm.cli.hub`,
:mod:`~hf_nlm.cli.download`); the console script holds the table of commands. Bad input ends with a usage
error (exit 2) naming what is wrong.
"""
