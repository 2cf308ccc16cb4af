"""``hf-nlm evaluate`` (perplexity, optionally with a neural cache), ``hf-nlm predict-numbers`` and
``hf-nlm check-numbers``."""

from __future__ import annotations

import argparse
import json
import sys

from ..training.arguments import add_data_arguments, data_spec_from_arguments
from .arguments import add_folder_command, fail, load_saved_run, output_file

#: ``--numeral-chunk-size``'s default (hf_nlm.evaluation.numeracy.DEFAULT_NUMERAL_CHUNK_SIZE; the parser
#: is built without importing torch).
DEFAULT_NUMERAL_CHUNK_SIZE = 256

#: Neural cache settings (Grave et al. 2017) when their flags are not given.
CACHE_DEFAULTS = {"cache_window": 500, "cache_theta": 1.0, "cache_lambda": 0.1}


def add_evaluate_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    evaluate = add_folder_command(sub, "evaluate", help_text,
                                  "a saved model folder (e.g. a training run's --output-dir)")
    add_data_arguments(evaluate)
    evaluate.add_argument("--split", default="test", help="split to evaluate (default: test)")
    evaluate.add_argument("--block-size", type=int, default=256,
                          help="targets per evaluation block (default: 256)")
    evaluate.add_argument("--batch-size", type=int, default=32, help="blocks per batch (default: 32)")
    cache = evaluate.add_argument_group(
        "neural cache (Grave, Joulin & Usunier 2017; recurrent models only, e.g. AWD-LSTM)",
        "p(w) = (1 - lambda) p_model(w) + lambda p_cache(w), p_cache(w) proportional to the sum of "
        "exp(theta h_t . h_i) over the last WINDOW positions i followed by w. The split is read as one "
        "stream, batch 1, the state carried over blocks of --block-size tokens (--batch-size is unused).",
    )
    cache.add_argument("--neural-cache", action="store_true", help="evaluate with the neural cache pointer")
    cache.add_argument("--cache-window", type=int, default=None,
                       help=f"previous positions in the cache (default: {CACHE_DEFAULTS['cache_window']})")
    cache.add_argument("--cache-theta", type=float, default=None,
                       help="inverse temperature theta of the cache's softmax "
                            f"(default: {CACHE_DEFAULTS['cache_theta']})")
    cache.add_argument("--cache-lambda", type=float, default=None,
                       help=f"cache weight lambda in [0, 1] (default: {CACHE_DEFAULTS['cache_lambda']})")
    return evaluate


def add_numeral_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    """``--block-size`` and ``--numeral-chunk-size``: how the commands that score every numeral of a text
    read it."""
    parser.add_argument("--block-size", type=int, default=256, help="tokens per chunk (default: 256)")
    parser.add_argument("--numeral-chunk-size", type=int, default=DEFAULT_NUMERAL_CHUNK_SIZE, metavar="N",
                        help="numerals scored at once against every candidate numeral (the vocabulary's, or "
                             "their digit strings): memory grows with N, not with the text; results do not "
                             f"depend on it (default: {DEFAULT_NUMERAL_CHUNK_SIZE})")


def add_predict_numbers_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    predict = add_folder_command(sub, "predict-numbers", help_text,
                                 "a saved model folder trained with the numeracy tokenizer")
    add_data_arguments(predict)
    predict.add_argument("--split", default="test", help="split to predict (default: test)")
    predict.add_argument("--statistic", choices=("mean", "median", "mode"), default="median",
                         help="point estimate of the predicted distribution (default: median)")
    predict.add_argument("--interval", type=float, default=0.8,
                         help="probability mass of the interval written with each prediction (default: 0.8)")
    predict.add_argument("--predictions", type=output_file, default=None, metavar="FILE",
                         help="also write one JSON line per numeral: index, value, prediction, low, high")
    add_numeral_scoring_arguments(predict)
    return predict


def add_check_numbers_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    check = add_folder_command(sub, "check-numbers", help_text,
                               "a saved model folder trained with the numeracy tokenizer")
    text = check.add_argument_group("the text (one of --text, --file, or a corpus split)")
    text.add_argument("--text", action="append", default=None, metavar="TEXT",
                      help="a text to check (repeat the flag for several; each is read as one line)")
    text.add_argument("--file", default=None, metavar="PATH", help="a text file to check, one text per line")
    add_data_arguments(check)
    check.add_argument("--split", default="test", help="with a corpus: the split to check (default: test)")
    check.add_argument("--top", type=int, default=None, metavar="N",
                       help="show the N most surprising numerals only")
    add_numeral_scoring_arguments(check)
    check.add_argument("--json", action="store_true",
                       help="one JSON line per numeral, most surprising first (index, text_index, start, "
                            "end, numeral, context, value, in_vocabulary, surprisal, branch_surprisal, "
                            "rank, expected)")
    return check


#: The (source, target) columns of the CSV files an encoder-decoder model is evaluated on (TrainingConfig's).
SEQ2SEQ_COLUMNS = ("source", "target")


def _corpus_with_split(args: argparse.Namespace, pair_columns: tuple[str, str] | None = None):
    """The corpus the arguments name, which must have ``--split``; a usage error otherwise. ``pair_columns``:
    an encoder-decoder model's (source, target) columns."""
    try:
        datasets = data_spec_from_arguments(args).load(pair_columns=pair_columns)
    except (ValueError, FileNotFoundError) as err:
        fail(args.parser, str(err))
    if args.split not in datasets:
        fail(args.parser, f"the corpus has no {args.split!r} split (it has {', '.join(datasets)})")
    return datasets


def _load_model_and_corpus(args: argparse.Namespace):
    """``(model, tokenizer, corpus)`` of a command that scores a saved model on ``--split`` of a corpus."""
    model, tokenizer = load_saved_run(args.parser, args.model_dir)
    pairs = SEQ2SEQ_COLUMNS if model.config.is_encoder_decoder else None
    return model, tokenizer, _corpus_with_split(args, pairs)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Perplexity of a saved model on a split of a corpus or of text files, printed as one JSON line (an
    encoder-decoder model is scored on the split's source -> target pairs). With --neural-cache, a recurrent
    model's perplexity with the cache pointer of Grave, Joulin & Usunier (2017)."""
    from ..evaluation import evaluate_lm, evaluate_seq2seq

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
            if model.config.is_encoder_decoder:
                result = evaluate_seq2seq(model, datasets[args.split], tokenizer, *SEQ2SEQ_COLUMNS,
                                          batch_size=args.batch_size, show_progress=sys.stderr.isatty(),
                                          split=args.split)
            else:
                result = evaluate_lm(model, datasets[args.split], tokenizer, block_size=args.block_size,
                                     batch_size=args.batch_size, show_progress=sys.stderr.isatty())
        except FloatingPointError as err:
            fail(args.parser, f"{args.model_dir}: {err}")
    print(json.dumps({"split": args.split, **result}))
    return 0


def cmd_predict_numbers(args: argparse.Namespace) -> int:
    """Predict every number of a corpus split with a saved numeracy model (Spithourakis & Riedel 2018): the
    --statistic of its distribution over the next number at each numeral, scored by the mean and median
    absolute percentage errors (MAPE, MdAPE), printed as one JSON line."""
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
                                            block_size=args.block_size,
                                            numeral_chunk_size=args.numeral_chunk_size)
    except ValueError as err:
        fail(args.parser, str(err))
    print(json.dumps({"split": args.split, **report}))
    return 0


def _texts_to_check(args: argparse.Namespace) -> list[str]:
    """The texts ``check-numbers`` reads: ``--text``, ``--file`` or a corpus split, exactly one of them."""
    corpus = any(hasattr(args, name) for name in ("corpus", "corpus_path", "train_file", "validation_file",
                                                  "test_file"))
    given = [name for name, present in (("--text", args.text), ("--file", args.file), ("--corpus", corpus))
             if present]
    if len(given) != 1:
        fail(args.parser,
             "give the text to check with one of --text TEXT, --file PATH or --corpus NAME --split SPLIT"
             + (f", not {' and '.join(given)}" if given else ""))
    if hasattr(args, "corpus_path") and not hasattr(args, "corpus"):
        fail(args.parser, f"--corpus-path {args.corpus_path} needs --corpus NAME: the corpus read from it")
    if args.text:
        return list(args.text)
    if args.file:
        try:
            lines = open(args.file, encoding="utf-8").read().splitlines()
        except FileNotFoundError:
            fail(args.parser, f"--file {args.file}: no such file")
        except IsADirectoryError:
            fail(args.parser, f"--file {args.file} is a folder, not a text file")
        except UnicodeDecodeError as err:
            fail(args.parser, f"--file {args.file} is not UTF-8 text ({err.reason} at byte {err.start})")
        except OSError as err:
            fail(args.parser, f"--file {args.file}: {err.strerror or err}")
        texts = [line for line in lines if line.strip()]
        if not texts:
            fail(args.parser, f"--file {args.file} is empty: no text to check")
        return texts
    return _corpus_with_split(args)[args.split]


def cmd_check_numbers(args: argparse.Namespace) -> int:
    """Every numeral of a text scored by a numeracy LM (Spithourakis & Riedel 2018), most surprising first:
    its surprisal -log p(numeral | the text before it) in nats, its rank among the vocabulary's numerals
    there (1: the model's favourite) and the model's expected value there (the median of its distribution).
    Read the text from --text, --file (one text per line) or a corpus split (--corpus NAME --split SPLIT)."""
    from ..evaluation.anomaly import check_numeracy_model, find_unlikely_numbers

    texts = _texts_to_check(args)  # a missing text is reported before the model loads
    model, tokenizer = load_saved_run(args.parser, args.model_dir)
    try:
        check_numeracy_model(model, tokenizer, "check-numbers")
    except ValueError as err:
        fail(args.parser, f"{args.model_dir}: {err}")
    try:
        rows = find_unlikely_numbers(model, tokenizer, texts, block_size=args.block_size,
                                     numeral_chunk_size=args.numeral_chunk_size)
    except ValueError as err:
        fail(args.parser, str(err))
    rows = sorted(rows, key=lambda row: -row["surprisal"])[: args.top]  # stable: ties keep the text's order
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print(format_numeral_table(rows, open_head=getattr(model.lm_head, "open_numeral_vocabulary", False)))
    return 0


def format_numeral_table(rows: list[dict], open_head: bool = False, width: int = 40) -> str:
    """:func:`find_unlikely_numbers`' rows as a table: surprisal (nats), rank, the numeral, the model's
    expected value, and the context before the numeral (its last ``width`` characters). A numeral outside
    the vocabulary is marked, with a note on what scored it (``open_head``: the numeral branch itself)."""
    header = ("surprisal", "rank", "numeral", "expected", "context")
    table = [header] + [(f"{r['surprisal']:.2f}", str(r["rank"]) + ("" if r["in_vocabulary"] else "*"),
                         r["numeral"], f"{r['expected']:.6g}",
                         ("..." + r["context"][-width:]) if len(r["context"]) > width
                         else r["context"]) for r in rows]
    sizes = [max(len(row[c]) for row in table) for c in range(4)]
    lines = ["  ".join([row[0].rjust(sizes[0]), row[1].rjust(sizes[1]), row[2].rjust(sizes[2]),
                        row[3].rjust(sizes[3]), row[4]]).rstrip() for row in table]
    if any(not r["in_vocabulary"] for r in rows):
        lines.append("* not one of the vocabulary's numerals: " + (
            "scored by the open numeral branch, ranked among the vocabulary's numerals" if open_head else
            "the model only knows it as <unk_num>, whose probability it gets"))
    return "\n".join(lines)
