"""The documentation: the mkdocs site under docs/ builds with every warning an error, every page is in its
navigation, and README.md stays short, linking into the site with links that resolve."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def nav_pages(nav) -> list[str]:
    """The page paths of an mkdocs ``nav`` (nested lists of ``{title: page or list}``)."""
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (the dev extra)")
def test_the_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (site / "index.html").is_file() and (site / "training" / "index.html").is_file()


def test_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True and config["docs_dir"] == "docs"
    in_nav = nav_pages(config["nav"])
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(in_nav) == on_disk
    assert len(in_nav) == len(set(in_nav))


def test_readme_is_short():
    assert len(README.read_text().splitlines()) < 300


def test_readme_links_into_the_docs_resolve():
    targets = re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)\s]*)?\)", README.read_text())
    assert targets, "README.md links into docs/"
    assert [t for t in targets if not (ROOT / t).is_file()] == []
