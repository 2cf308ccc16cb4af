"""The Makefile's suites never change the machine: only `make browser` and `make compiler` install system
packages (apt-get), and CI (.ci/run) calls them before `make test` and `make test-latest`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from required_data import missing

ROOT = Path(__file__).resolve().parents[1]


def needs_make() -> None:
    if shutil.which("make") is None:
        missing("make is not installed")


@pytest.mark.parametrize("target", ["test", "test-latest", "test-oldest"])
def test_a_suite_target_installs_no_system_package(target, tmp_path):
    needs_make()
    # -n prints every command the target would run, prerequisites included, and runs none (a fresh VENV
    # makes it list the set-up too).
    shown = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    assert "pytest" in shown
    assert not re.search(r"\b(apt-get|apt|sudo|dpkg)\b", shown), shown


@pytest.mark.parametrize("target", ["test", "test-latest", "test-oldest"])
def test_a_suite_target_lets_nothing_missing_pass(target, tmp_path):
    """The corpora fetched with retries and no way past a failure, KenLM built, and the tests run under
    HF_NLM_REQUIRE_DATA=1 (a missing corpus or tool fails its test)."""
    needs_make()
    shown = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    fetch = next(line for line in shown.splitlines() if "hf-nlm download brown ptb sotu" in line)
    assert "for pause in 10 30 90 none" in fetch and "sleep" in fetch and fetch.endswith("exit 1")
    assert "WARNING" not in fetch
    assert re.search(r"pip install --quiet \"kenlm==", shown)
    pytest_line = next(line for line in shown.splitlines() if "-m pytest" in line)
    assert "HF_NLM_REQUIRE_DATA=1" in pytest_line


def test_make_compiler_installs_gcc():
    needs_make()
    shown = subprocess.run(["make", "-n", "compiler"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout
    assert "apt-get" in shown and "g++" in shown


def test_make_browser_installs_chromium():
    needs_make()
    shown = subprocess.run(["make", "-n", "browser"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout
    assert "apt-get" in shown and "chromium-driver" in shown


def test_ci_installs_the_browser_then_runs_both_suites():
    steps = re.findall(r"^(?:make (\S+)|run \"[^\"]+\" (\S+))", (ROOT / ".ci" / "run").read_text(), re.M)
    assert ["".join(step) for step in steps] == ["browser", "compiler", "test", "test-latest"]
