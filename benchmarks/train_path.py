"""How many of the repository's files one ``hf-nlm train`` run goes through:
the files of ``hf_nlm`` and the console script whose functions the command calls, traced with
``sys.setprofile``. What runs while a module is imported (registration decorators, tables built at import)
does not count: a reader follows the run, not the imports.

    python benchmarks/train_path.py                  # hf-nlm train --model nplm --train-file x.txt, 3 updates
    python benchmarks/train_path.py --list           # the files too (stderr)

Prints one JSON line; ``value`` is the number of files whose functions ran.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def traced_files(argv: list[str]) -> tuple[set[str], set[str]]:
    """(files whose functions ran, files only imported) while ``hf-nlm`` runs ``argv``."""
    sys.path.insert(0, str(ROOT))
    import hf_nlm_cli

    ran, imported = set(), set()

    def during_import(frame) -> bool:
        while frame is not None and frame.f_code is not traced_files.__code__:
            if frame.f_code.co_name == "<module>":
                return True
            frame = frame.f_back
        return False

    def profile(frame, event, arg):
        if event != "call":
            return
        path = frame.f_code.co_filename
        if path.startswith(str(ROOT)) and "/.venv" not in path and "/benchmarks/" not in path:
            (imported if during_import(frame) else ran).add(os.path.relpath(path, ROOT))

    sys.setprofile(profile)
    try:
        code = hf_nlm_cli.main(argv)
    finally:
        sys.setprofile(None)
    if code != 0:
        raise SystemExit(f"hf-nlm {' '.join(argv)} exited with {code}")
    return ran, imported - ran


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the files on stderr")
    parser.add_argument("--quick", action="store_true", help="the same run (it takes seconds)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "x.txt"
        text.write_text("the cat sat on the mat\na dog saw the cat\nthe mat was red\n" * 50, encoding="utf-8")
        argv = ["train", "--model", "nplm", "--train-file", str(text), "--output-dir", str(Path(tmp) / "run"),
                "--max-steps", "3", "--no-progress-bar"]
        ran, imported = traced_files(argv)
    if args.list:
        print("\n".join(sorted(ran)), file=sys.stderr)
    print(json.dumps({"benchmark": "train_path", "case": "hf-nlm train --model nplm --train-file x.txt",
                      "value": len(ran), "unit": "files", "better": "lower", "imported_only": len(imported)}))


if __name__ == "__main__":
    main()
