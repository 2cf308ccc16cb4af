"""The documentation: the mkdocs site under docs/ builds with every warning an error, every page is in its
navigation, and README.md stays short, linking into the site with links that resolve."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import yaml
from required_data import missing
from transformers import AutoTokenizer

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


def test_the_site_builds_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        missing("mkdocs is not installed (the dev extra)")
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


def python_block(text: str, heading: str) -> str:
    """The first ```python block after ``heading`` in ``text``."""
    after = text[text.index(heading):]
    return after[after.index("```python\n") + len("```python\n"):
                 after.index("\n```", after.index("```python"))]


def test_the_readme_python_quickstart_trains_evaluates_and_generates(tmp_path):
    """The README's Python quickstart, run as written but for its budget (three updates here)."""
    code = python_block(README.read_text(), "### Train from Python")
    assert "num_epochs=3" in code
    code = code.replace("num_epochs=3", "max_steps=3, progress_bar=False")
    words = "the president said that the nation would pay the cost of the war and the peace".split()
    for name, shift in (("train.txt", 0), ("valid.txt", 3), ("test.txt", 5)):
        lines = [" ".join(words[(i + shift) % 9:] + words[:(i + shift) % 9]) for i in range(60)]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    recipe, perplexity, text = (line.strip() for line in result.stdout.strip().splitlines())
    assert recipe.startswith("recipe default of nplm")
    # Better than a uniform guess over the vocabulary (whose perplexity is its size), which the untrained
    # model is close to: three updates of Adam at the recipe's rate learn the 15 words' frequencies.
    vocabulary = len(AutoTokenizer.from_pretrained(tmp_path / "runs" / "my-lm"))
    assert 1 < float(perplexity) < vocabulary
    assert text.startswith("the president said") and len(text.split()) > 3
    assert (tmp_path / "runs" / "my-lm" / "README.md").is_file()
