"""``import hf_nlm`` registers the models and loads no data library: a user who only loads a model does not
pay for datasets, pandas or pyarrow (hundreds of modules, seconds on a busy machine)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("datasets", "pandas", "pyarrow")


def test_import_hf_nlm_loads_no_data_library():
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c",
         "import hf_nlm; from transformers import AutoConfig; AutoConfig.for_model('awd_lstm')"],
        capture_output=True, text=True, env=env, check=True,
    )
    # importtime writes one line per module: "import time: self | cumulative | <indent>name".
    loaded = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
              if line.startswith("import time:")}
    heavy = sorted(name for name in loaded if name.split(".")[0] in HEAVY)
    assert not heavy, f"import hf_nlm loads {len(heavy)} modules of {', '.join(HEAVY)}: {heavy[:5]} ..."
