"""``hf-nlm evaluate`` (perplexity, optionally with a neural cache) and ``hf-nlm predict-numbers``."""

from __future__ import annotations

import argparse
import json
import sys

from .arguments import add_data_arguments, add_folder_command, fail
from .recipes import load_corpus, load_saved_model

#: ``--numeral-chunk-size``'s default (hf_nlm.evaluation.numeracy.DEFAULT_NUMERAL_CHUNK_SIZE; the parser
#: is built without importing torch).
DEFAULT_NUMERAL_CHUNK_SIZE = 256

#: Neural cache settings (Grave et al. 2017) when their flags are not given.
CACHE_DEFAULTS = {"cache_window": 500, "cache_theta": 1.0, "cache_lambda": 0.1}


def add_evaluate_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    evaluate = add_folder_command(sub, "evaluate", help_text, "a saved model folder (e.g. a training run's --output-dir)")
    add_data_arguments(evaluate)
    evaluate.add_argument("--split", default="test", help="split to evaluate (default: test)")
    evaluate.add_argument("--block-size", type=int, default=256, help="targets per evaluation block (default: 256)")
    evaluate.add_argument("--batch-size", type=int, default=32, help="blocks per batch (default: 32)")
    cache = evaluate.add_argument_group(
        "neural cache (Grave, Joulin & Usunier 2017; recurrent models only, e.g. AWD-LSTM)",
        "p(w) = (1 - lambda) p_model(w) + lambda p_cache(w), p_cache(w) proportional to the sum of "
        "exp(theta h_t . h_i) over the last WINDOW positions i followed by w. The split is read as one stream, "
        "batch 1, the state carried over blocks of --block-size tokens (--batch-size is unused).",
    )
    cache.add_argument("--neural-cache", action="store_true", help="evaluate with the neural cache pointer")
    cache.add_argument("--cache-window", type=int, default=None,
                       help=f"previous positions in the cache (default: {CACHE_DEFAULTS['cache_window']})")
    cache.add_argument("--cache-theta", type=float, default=None,
                       help=f"inverse temperature theta of the cache's softmax (default: {CACHE_DEFAULTS['cache_theta']})")
    cache.add_argument("--cache-lambda", type=float, default=None,
                       help=f"cache weight lambda in [0, 1] (default: {CACHE_DEFAULTS['cache_lambda']})")
    return evaluate


def add_predict_numbers_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    predict = add_folder_command(sub, "predict-numbers", help_text, "a saved model folder trained with the numeracy tokenizer")
    add_data_arguments(predict)
    predict.add_argument("--split", default="test", help="split to predict (default: test)")
    predict.add_argument("--statistic", choices=("mean", "median", "mode"), default="median",
                         help="point estimate of the predicted distribution (default: median)")
    predict.add_argument("--interval", type=float, default=0.8,
                         help="probability mass of the interval written with each prediction (default: 0.8)")
    predict.add_argument("--predictions", default=None, metavar="FILE",
                         help="also write one JSON line per numeral: index, value, prediction, low, high")
    predict.add_argument("--block-size", type=int, default=256, help="tokens per chunk (default: 256)")
    predict.add_argument("--numeral-chunk-size", type=int, default=DEFAULT_NUMERAL_CHUNK_SIZE, metavar="N",
                         help="numerals scored at once against every candidate numeral (the vocabulary's, or their "
                              "digit strings): memory grows with N, not with the split; results do not depend on it "
                              f"(default: {DEFAULT_NUMERAL_CHUNK_SIZE})")
    return predict


def _load_model_and_corpus(args: argparse.Namespace):
    """``(model, tokenizer, corpus)`` of a command that scores a saved model on ``--split`` of a corpus."""
    model, tokenizer = load_saved_model(args.parser, args.model_dir)
    try:
        datasets = load_corpus(args)
    except (ValueError, FileNotFoundError) as err:
        fail(args.parser, str(err))
    if args.split not in datasets:
        fail(args.parser, f"the corpus has no {args.split!r} split (it has {', '.join(datasets)})")
    return model, tokenizer, datasets


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..evaluation import evaluate_lm

    for name, default in CACHE_DEFAULTS.items():
        flag = "--" + name.replace("_", "-")
        if getattr(args, name) is None:
            setattr(args, name, default)
        elif not args.neural_cache:
            fail(args.parser, f"{flag} needs --neural-cache")
    model, tokenizer, datasets = _load_model_and_corpus(args)
    if args.neural_cache:
        from ..evaluation.neural_cache import evaluate_with_neural_cache

        # Grave et al. (2017): one stream, batch 1, the state carried over blocks of --block-size tokens.
        try:
            result = evaluate_with_neural_cache(
                model, datasets[args.split], tokenizer, window=args.cache_window, theta=args.cache_theta,
                lambda_=args.cache_lambda, bptt=args.block_size, show_progress=sys.stderr.isatty(),
            )
        except (ValueError, FloatingPointError) as err:
            fail(args.parser, f"{args.model_dir}: {err}" if isinstance(err, FloatingPointError) else str(err))
    else:
        try:
            result = evaluate_lm(model, datasets[args.split], tokenizer, block_size=args.block_size,
                                 batch_size=args.batch_size, show_progress=sys.stderr.isatty())
        except FloatingPointError as err:
            fail(args.parser, f"{args.model_dir}: {err}")
    print(json.dumps({"split": args.split, **result}))
    return 0


def cmd_predict_numbers(args: argparse.Namespace) -> int:
    from ..evaluation.number_prediction import evaluate_number_prediction, predict_numbers

    model, tokenizer, datasets = _load_model_and_corpus(args)
    try:
        if args.predictions:
            with open(args.predictions, "w", encoding="utf-8") as f:
                for row in predict_numbers(model, tokenizer, datasets[args.split], args.statistic,
                                           interval=args.interval, block_size=args.block_size,
                                           numeral_chunk_size=args.numeral_chunk_size):
                    f.write(json.dumps(row) + "\n")
        train = datasets["train"] if "train" in datasets else None
        report = evaluate_number_prediction(model, tokenizer, datasets[args.split], train, args.statistic,
                                            block_size=args.block_size, numeral_chunk_size=args.numeral_chunk_size)
    except ValueError as err:
        fail(args.parser, str(err))
    print(json.dumps({"split": args.split, **report}))
    return 0
