"""``python -m hf_nlm.cli``: the ``hf-nlm`` command."""

import sys

from .main import main

sys.exit(main())
