"""Screenshots of the web demo's tabs (``hf-nlm app``) for the README, taken in headless Chromium.

Starts ``hf_nlm.app`` over the run folders given, on 127.0.0.1, types an example into each tab, presses its
button, waits for the answer and saves the whole page, one PNG per tab, scaled to ``--width`` pixels:

    python examples/app_screenshots.py demo-output/nplm-brown runs/numeracy-mog runs/hlbl-brown \\
        runs/story-storyline runs/story-story --output-dir docs/images

Needs Debian's chromium and chromium-driver (``make browser``) and selenium (a dev dependency).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from PIL import Image
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from hf_nlm.app.browser import headless_chromium, served, whole_page_screenshot
from hf_nlm.app.explore import load_runs
from hf_nlm.app.page import build_app

#: Each tab: its label, the (input element, text) pairs typed, the button pressed, the element awaited.
TABS = {
    "continue": ("Continue a prompt", [("#prompt textarea", "the president of the united states")],
                 "continue", "#nbest tbody tr"),
    "next-word": ("Next word", [("#next-prompt textarea", "he said that the")], "next",
                  "#next-first tbody tr"),
    "numeracy": ("Numeracy", [("#numeral-context textarea", "the population was")], "next-number",
                 "#numeral-picture img"),
    "story": ("Story", [("#story-title textarea", "Snow Day")], "write-story", "#attention img"),
    "tree": ("Tree", [], "follow-path", "#path-1 tbody tr"),
}


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", help="saved model folders, as for hf-nlm app")
    parser.add_argument("--output-dir", default="docs/images")
    parser.add_argument("--width", type=int, default=800, help="width of the saved PNGs in pixels")
    args = parser.parse_args(argv)
    runs, problems = load_runs(args.run_dirs)
    if problems:
        parser.error("; ".join(problems))
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    app = build_app(runs)
    written = []
    browser = headless_chromium()
    try:
        with served(app) as address:
            for name, (label, typed, button, answer) in TABS.items():
                browser.get(address)
                wait = WebDriverWait(browser, 120)
                tabs = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "button[role='tab']"))
                tab = next((t for t in tabs if t.text.strip() == label), None)
                if tab is None:
                    print(f"{name}: no {label!r} tab for these runs")
                    continue
                tab.click()
                for selector, text in typed:
                    box = wait.until(lambda b, s=selector: b.find_element(By.CSS_SELECTOR, s))
                    box.clear()
                    box.send_keys(text)
                wait.until(lambda b, i=button: b.find_element(By.ID, i)).click()
                wait.until(lambda b, a=answer: b.find_elements(By.CSS_SELECTOR, a))
                path = out / f"app_{name.replace('-', '_')}.png"
                whole_page_screenshot(browser, path)
                image = Image.open(path).convert("RGB")
                image = image.resize((args.width, round(image.height * args.width / image.width)),
                                     Image.LANCZOS)
                # 256 colours: a page of flat colours keeps its look at a third of the bytes.
                image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
                written.append(path)
                print(f"wrote {path}")
    finally:
        browser.quit()
    return written


if __name__ == "__main__":
    main()
