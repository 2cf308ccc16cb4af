"""The one decision for a test whose corpus or external tool is missing: skip, or fail.

A developer's plain ``pytest`` skips such a test and says why. ``make test`` (and ``make test-latest`` /
``make test-oldest``, hence CI) sets ``HF_NLM_REQUIRE_DATA=1``: there the same reason fails the test, so
that a corpus that was not fetched or a tool that was not installed cannot let the suite pass quietly.

Tests import it by name (``from required_data import missing``): pytest puts ``tests/`` on ``sys.path``
for ``tests/conftest.py``.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

from hf_nlm.data.reading import data_home

#: The switch: set (to anything but ``""`` or ``"0"``), a missing corpus or tool fails the test.
REQUIRE_DATA = "HF_NLM_REQUIRE_DATA"


def data_required() -> bool:
    return os.environ.get(REQUIRE_DATA, "") not in ("", "0")


def missing(reason: str) -> NoReturn:
    """Skip the running test with ``reason``; under ``HF_NLM_REQUIRE_DATA=1`` fail it with the same reason."""
    if data_required():
        pytest.fail(f"{reason} [{REQUIRE_DATA}=1 makes this a failure, not a skip]", pytrace=False)
    skipped = pytest.skip.Exception(reason)
    skipped._use_item_location = True  # pytest's -rs summary then names the test, not this helper
    raise skipped


def require_corpus(name: str) -> None:
    """Go on when ``hf-nlm download NAME`` has left ``<data home>/NAME/``; else :func:`missing`.

    Only the folder's absence counts as missing: a loader that raises on a folder that is there fails the
    test like any other error."""
    home = data_home(create=False)
    if not (home / name).is_dir():
        missing(f"the {name} corpus is not downloaded in {home} (run `hf-nlm download {name}`)")
