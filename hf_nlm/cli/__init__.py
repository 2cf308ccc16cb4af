"""The ``hf-nlm`` command: train, evaluate and sample from the package's language models.

    hf-nlm train --corpus brown --output-dir runs/mlp1 --context-size 4 --hidden-size 50 --embedding-size 60
    hf-nlm train --train-file train.txt --validation-file valid.txt --test-file test.txt --output-dir runs/toy
    hf-nlm train --corpus brown --model lbl --embedding-size 100 --output-dir runs/lbl
    hf-nlm train --corpus brown --model hlbl --tree huffman --output-dir runs/hlbl-huffman
    hf-nlm train --corpus mimic-iii --corpus-path NOTEEVENTS.csv.gz --output-dir runs/notes
    hf-nlm build-tree --corpus brown --tree-mode adaptive --eps 0.25 --output-dir runs/hlbl-adaptive
    hf-nlm evaluate runs/mlp1 --corpus brown --split test
    hf-nlm generate runs/mlp1 "the president said" --num-beams 5 --max-new-tokens 20
    hf-nlm card runs/mlp1
    hf-nlm push runs/mlp1 --repo-id your-name/nplm-brown
    hf-nlm download brown ptb sotu
    hf-nlm download drop

Modules: :mod:`~hf_nlm.cli.arguments` (flag groups; the model and training flags generated from the config
classes), :mod:`~hf_nlm.cli.recipes` (the library calls, one per step: ``examples/train_lm.py`` reuses them),
one module per command group (:mod:`~hf_nlm.cli.train`, :mod:`~hf_nlm.cli.evaluate`,
:mod:`~hf_nlm.cli.generate`, :mod:`~hf_nlm.cli.hub`, :mod:`~hf_nlm.cli.download`) and :mod:`~hf_nlm.cli.main`
(the parser and :func:`main`). The corpora ``--corpus`` offers are those of :mod:`hf_nlm.data.registry`.
Bad input (unknown corpus, missing file, bad hyperparameter) ends with an argparse error (exit 2).
"""

from .arguments import (
    DERIVED_FIELDS,
    FILE_CORPORA,
    NAMED_CORPORA,
    TOKENIZERS,
    TREE_CHOICES,
    add_build_tree_arguments,
    add_data_arguments,
    add_generation_arguments,
    add_model_arguments,
    add_tokenizer_arguments,
    add_train_arguments,
    add_training_arguments,
    model_flags,
)
from .generate import SAMPLING_DEFAULTS, check_generation_arguments, generation_settings
from .main import build_parser, main
from .recipes import (
    build_config,
    build_model,
    build_tokenizer,
    build_tree,
    corpus_name,
    load_corpus,
    load_model_folder,
    prepare_training,
    report_interrupt,
    resume_checkpoint,
    resume_command,
    run_settings,
    training_config,
    training_corpus,
)

__all__ = [
    "DERIVED_FIELDS",
    "FILE_CORPORA",
    "NAMED_CORPORA",
    "SAMPLING_DEFAULTS",
    "TOKENIZERS",
    "TREE_CHOICES",
    "add_build_tree_arguments",
    "add_data_arguments",
    "add_generation_arguments",
    "add_model_arguments",
    "add_tokenizer_arguments",
    "add_train_arguments",
    "add_training_arguments",
    "build_config",
    "build_model",
    "build_parser",
    "build_tokenizer",
    "build_tree",
    "check_generation_arguments",
    "corpus_name",
    "generation_settings",
    "load_corpus",
    "load_model_folder",
    "main",
    "model_flags",
    "prepare_training",
    "report_interrupt",
    "resume_checkpoint",
    "resume_command",
    "run_settings",
    "training_config",
    "training_corpus",
]
