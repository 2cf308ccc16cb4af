"""A web demo of saved models, the Hugging Face way (a Gradio app, as a Space runs it):
``hf-nlm app RUN_DIR``.

:mod:`~hf_nlm.app.explore` computes what the page shows (plain functions, no Gradio);
:mod:`~hf_nlm.app.page` lays it out and serves it (``gradio`` is imported there only).
"""

from __future__ import annotations

from .explore import (
    MAX_PROMPT_TOKENS,
    Run,
    capabilities,
    continue_prompt,
    load_page_run,
    load_runs,
    next_numeral,
    next_words,
    text_surprisal,
    tree_path,
)


def main(argv: list[str] | None = None) -> int:
    """``hf-nlm app``: :func:`hf_nlm.app.page.main`."""
    from .page import main as serve

    return serve(argv)


__all__ = ["MAX_PROMPT_TOKENS", "Run", "capabilities", "continue_prompt", "load_page_run", "load_runs",
           "main", "next_numeral", "next_words", "text_surprisal", "tree_path"]
