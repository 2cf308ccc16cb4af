"""The real DROP passages, where `hf-nlm download drop` (or a hand-made copy) put them: the count
`load_drop_passages` gives against the 6,107 distinct passages it documents.

Not part of the test suite: `hf-nlm download drop` fetches the sdist ``bigbench==1.0.0`` from PyPI, which
PyPI's index does not list, so no test run can fetch it. Prints one JSON line, e.g.
{"benchmark": "drop_passages", "value": 6107, "expected": 6107, "ok": true, "path": "..."}; exits 1 when
the count differs and 2 when the passages are not there.

    python benchmarks/drop_passages.py [--path FOLDER_OR_passages.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hf_nlm.data import load_drop_passages
from hf_nlm.data.corpora.drop import DROP_FILE, DROP_PASSAGE_COUNT
from hf_nlm.data.reading import data_home


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", type=Path, default=None,
                        help=f"the drop folder or its {DROP_FILE} (default: <data home>/drop)")
    args = parser.parse_args(argv)
    path = args.path if args.path is not None else data_home(create=False) / "drop"
    file = path / DROP_FILE if path.is_dir() else path
    row = {"benchmark": "drop_passages", "expected": DROP_PASSAGE_COUNT, "path": str(file)}
    if not file.is_file():
        print(json.dumps({**row, "value": None, "ok": False,
                          "error": f"{file} does not exist (run `hf-nlm download drop`)"}), flush=True)
        return 2
    corpus = load_drop_passages(path=path)
    count = sum(len(split) for split in corpus.values())
    print(json.dumps({**row, "value": count, "ok": count == DROP_PASSAGE_COUNT}), flush=True)
    return 0 if count == DROP_PASSAGE_COUNT else 1


if __name__ == "__main__":
    sys.exit(main())
