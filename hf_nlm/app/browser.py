"""The web demo in a real browser: headless Chromium driven by Selenium, to test the page end to end and to
take the README's screenshots of its tabs (``examples/app_screenshots.py``).

Chromium and its driver are Debian's packages (``chromium``, ``chromium-driver``: ``make browser``); Selenium
comes from PyPI (a dev dependency). Nothing here reaches the network: the page is served on 127.0.0.1 and
Chromium's own background traffic is switched off.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import socket
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

#: Headless, and none of Chromium's own network traffic (update checks, sync), which a machine without
#: network refuses noisily at every start.
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def missing_browser() -> str | None:
    """Why headless Chromium cannot be driven here, or None when it can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        return ("no chromium / chromedriver on PATH (Debian's packages chromium and chromium-driver: "
                "make browser)")
    return None


def headless_chromium(width: int = 1200, height: int = 900):
    """A Selenium driver of headless Chromium with a fresh profile; ``RuntimeError`` saying what is
    missing."""
    problem = missing_browser()
    if problem is not None:
        raise RuntimeError(problem)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (*CHROMIUM_FLAGS, f"--window-size={width},{height}",
                 f"--user-data-dir={tempfile.mkdtemp(prefix='hf_nlm_chromium_')}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(app):
    """Serve the Gradio ``app`` on 127.0.0.1 at a free port for the ``with`` block; yields its address."""
    port = free_port()
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        # Gradio says it closes on stdout, which a benchmark's JSON owns
        with contextlib.redirect_stdout(sys.stderr):
            app.close()


def whole_page_screenshot(browser, path: str | Path) -> None:
    """Save the whole page (not only the window) as a PNG, once its pictures have loaded: Chromium's own
    capture beyond the viewport (DevTools' ``Page.captureScreenshot``)."""
    for _ in range(100):  # a picture that is still loading would grow the page after the shot
        if browser.execute_script("return [...document.images].every(i => i.complete"
                                  " && i.naturalHeight > 0)"):
            break
        time.sleep(0.1)
    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = browser.execute_cdp_cmd("Page.captureScreenshot",
                                   {"format": "png", "captureBeyondViewport": True, "clip": clip})
    Path(path).write_bytes(base64.b64decode(shot["data"]))


__all__ = ["CHROMIUM_FLAGS", "free_port", "headless_chromium", "missing_browser", "served",
           "whole_page_screenshot"]
