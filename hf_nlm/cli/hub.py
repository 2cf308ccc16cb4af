"""``hf-nlm card`` and ``hf-nlm push``: a run folder's model card, and its upload to the Hub."""

from __future__ import annotations

import argparse
import json

from ..data.registry import CORPORA, corpus_card
from .arguments import add_folder_command, fail

#: The folder card and push read.
RUN_DIR = "a training run's --output-dir"


def add_card_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    card = add_folder_command(sub, "card", help_text, RUN_DIR, dest="run_dir")
    card.add_argument("--dataset", default=None,
                      help=f"corpus name for the card ({', '.join(CORPORA)}; "
                           "default: the one results.json records)")
    card.add_argument("--model-name", default=None,
                      help="name in the model-index (default: MODEL_TYPE-CORPUS)")
    return card


def add_push_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    push = add_folder_command(sub, "push", help_text, RUN_DIR, dest="run_dir")
    push.add_argument("--repo-id", required=True, help="the Hub repo, e.g. your-name/nplm-brown")
    push.add_argument("--private", action="store_true", default=None, help="create the repo private")
    push.add_argument("--revision", default=None,
                      help="branch to commit to (created if needed; default: main)")
    push.add_argument("--commit-message", default=None,
                      help="commit message (default: 'Upload model with hf-nlm')")
    return push


def cmd_card(args: argparse.Namespace) -> int:
    """Write RUN_DIR/README.md from its config.json and results.json: Hub metadata with a model-index of the
    measured perplexities, results, training settings, how to load, citation."""
    from ..hub.model_card import write_run_card

    try:
        path = write_run_card(args.run_dir, dataset=args.dataset, model_name=args.model_name,
                              corpus_card=corpus_card)
    except (ValueError, FileNotFoundError, OSError) as err:
        fail(args.parser, str(err))
    print(path)
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    """Upload RUN_DIR's model, tokenizer, generation config, card (written first if missing), results.json
    and curves.png to the Hub repo REPO_ID (created if needed). Needs a token: `hf auth login`
    (`huggingface-cli login`) or HF_TOKEN."""
    from ..hub import HubError, push_run

    try:
        info = push_run(args.run_dir, args.repo_id, private=args.private, revision=args.revision,
                        commit_message=args.commit_message, corpus_card=corpus_card)
    except (HubError, FileNotFoundError, ValueError) as err:
        fail(args.parser, str(err))
    print(json.dumps({"repo_id": args.repo_id, "commit_url": info.commit_url, "oid": info.oid}))
    return 0
