"""A Hugging Face Space serving hf-nlm's web demo (``hf_nlm.app``) over saved models.

The models come from ``HF_NLM_RUNS``: a comma-separated list of local run folders or Hub repository ids
(``user/nplm-brown``: a folder that ``hf-nlm push`` uploaded), downloaded once when the Space starts.
Run it here as a Space would: ``python examples/space/app.py demo-output/nplm-brown`` (folders given on the
command line replace ``HF_NLM_RUNS``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hf_nlm.app.explore import load_runs
from hf_nlm.app.page import build_app

DEFAULT_RUNS = "demo-output/nplm-brown"


def local_folder(name: str) -> str:
    """``name`` itself if it is a folder here, else the snapshot of the Hub repository of that id."""
    if Path(name).is_dir():
        return name
    from huggingface_hub import snapshot_download

    return snapshot_download(name)


def build(names: list[str]):
    runs, problems = load_runs([local_folder(name) for name in names])
    if not runs:
        raise SystemExit("no model loaded:\n" + "\n".join(problems))
    return build_app(runs, problems)


names = sys.argv[1:] or [n.strip() for n in os.environ.get("HF_NLM_RUNS", DEFAULT_RUNS).split(",")
                         if n.strip()]
if __name__ == "__main__":
    build(names).launch()
