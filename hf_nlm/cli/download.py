"""``hf-nlm download``: :func:`hf_nlm.data.download.main`, which has its own parser."""

from __future__ import annotations

import argparse


def add_download_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    """Listed for the top-level ``--help`` only: :func:`hf_nlm.cli.main.main` hands ``download`` its arguments."""
    return sub.add_parser("download", help=help_text, add_help=False)


def cmd_download(argv: list[str]) -> int:
    from ..data.download import main as download_main

    return download_main(argv)
