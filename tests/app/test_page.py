"""The web demo's page (hf_nlm.app.page): its tabs follow the loaded runs, a bad input becomes a message in
the page, and, where Chromium is installed, a real browser types a prompt and reads the answer back."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

gr = pytest.importorskip("gradio", reason="the web demo needs gradio (pip install 'hf-nlm[app]')")

import torch  # noqa: E402
from required_data import missing  # noqa: E402

from hf_nlm.app import continue_prompt  # noqa: E402
from hf_nlm.app.browser import headless_chromium, missing_browser, served, whole_page_screenshot  # noqa: E402
from hf_nlm.app.explore import MAX_TEXT_CHARS, saved_search  # noqa: E402
from hf_nlm.app.page import answers, build_app, main, message, story_stages  # noqa: E402
from hf_nlm.evaluation import decode_generated  # noqa: E402

SPACE = Path(__file__).resolve().parents[2] / "examples" / "space"


def tab_labels(app) -> list[str]:
    return [block.label for block in app.blocks.values() if isinstance(block, gr.Tab)]


def test_tabs_appear_only_where_a_run_supports_them(nplm_run):
    assert tab_labels(build_app([nplm_run])) == ["Continue a prompt", "Next word"]


def test_the_story_tab_starts_with_the_runs_named_for_each_stage():
    assert story_stages(["story-story", "story-storyline"]) == ("story-storyline", "story-story")
    assert story_stages(["a", "b"]) == ("a", "b")
    assert story_stages(["only"]) == ("only", "only")


def test_a_bad_input_is_a_message_in_the_page_and_the_server_goes_on():
    @answers(3)
    def handler(kind):
        if kind == "value":
            raise ValueError("Type a prompt first: the prompt is empty.")
        if kind == "bug":
            raise RuntimeError("index out of range")
        return "text", "<table></table>", ""

    assert handler("value") == (None, None, "**Error:** Type a prompt first: the prompt is empty.")
    assert handler("bug") == (None, None,
                              "**Error:** the model failed on this input (RuntimeError: index out of range)")
    assert handler("fine") == ("text", "<table></table>", "")
    assert message("2 of the 2 tokens read as <unk>") == "**Note:** 2 of the 2 tokens read as &lt;unk&gt;"


def test_the_command_refuses_when_no_folder_loads(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "missing")])
    assert stop.value.code == 2
    assert "no run folder loaded" in capsys.readouterr().err


def test_hf_nlm_app_is_a_command_of_the_launcher(tmp_path, capsys):
    import hf_nlm_cli

    with pytest.raises(SystemExit):
        hf_nlm_cli.main(["--help"])
    assert "explore saved models in a web page" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        hf_nlm_cli.main(["app", str(tmp_path / "missing")])
    assert stop.value.code == 2 and "missing does not exist" in capsys.readouterr().err


def test_the_space_serves_the_folders_it_is_given(nplm_run, monkeypatch):
    spec = importlib.util.spec_from_file_location("space_app", SPACE / "app.py")
    space = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "argv", ["app.py", str(nplm_run.folder)])
    spec.loader.exec_module(space)  # as a Space starts it, without launching
    assert space.names == [str(nplm_run.folder)]
    assert tab_labels(space.build(space.names)) == ["Continue a prompt", "Next word"]
    front = (SPACE / "README.md").read_text(encoding="utf-8").split("---")[1]
    assert "sdk: gradio" in front and "app_file: app.py" in front
    assert "sdk_version: 6." in front  # the gradio major version pyproject.toml asks for


def test_oversized_and_pathological_inputs_to_every_tab_are_refused_and_the_server_answers_after(
        every_kind_of_run, tmp_path):
    from gradio_client import Client

    nplm, numeracy, hlbl, story = (run.name for run in every_kind_of_run)
    book = "the cat sat on the mat . " * 2000  # 14,000 tokens
    # Refused: too long, empty, not text; answered or refused (never "the model failed"): odd but small.
    refused = (book, "x" * (MAX_TEXT_CHARS + 1), "\ud800 cat", "", None)
    odd = ("\x00" * 100, "cat" * 20_000, "<script>alert(1)</script>", "١٢٣ ٤٥")
    asked = []
    for texts, must_refuse in ((refused, True), (odd, False)):
        asked += [("/continue", [nplm, text, "beam", 5, 3, 10, 1.0, 0.9], must_refuse) for text in texts]
        asked += [("/next_word", [nplm, f"{nplm} / kneser-ney-3gram", text, 10], must_refuse)
                  for text in texts]
        asked += [("/surprisal", [nplm, text], must_refuse) for text in texts]
        asked += [("/next_number", [numeracy, text], must_refuse) for text in texts]
        asked += [("/story", [story, story, text], must_refuse) for text in texts]
        asked += [("/tree_path", [hlbl, text, "cat"], must_refuse) for text in texts]
        asked += [("/tree_path", [hlbl, "the cat", text], must_refuse) for text in texts]
    asked.append(("/story", [story, story, "the picnic " * 10_000], True))
    for setting, value in ((3, 10**6), (4, 10**6), (5, 10**9), (3, -1), (6, 1e-45), (6, 1e300), (7, 2.0)):
        inputs = [nplm, "the cat", "sample" if setting in (6, 7) else "beam", 5, 3, 10, 1.0, 0.9]
        inputs[setting] = value
        asked.append(("/continue", inputs, True))
    asked += [("/next_word", [nplm, "(none)", "the cat", 10**6], True),
              ("/next_word", [nplm, "no such", "the", 5], True)]
    with served(build_app(every_kind_of_run, workdir=str(tmp_path))) as address:
        client = Client(address, verbose=False)
        for endpoint, inputs, must_refuse in asked:
            try:
                shown = client.predict(*inputs, api_name=endpoint)[-1]
            except Exception as err:  # noqa: BLE001 -- gradio's own refusal of a value outside a control
                assert "Traceback" not in str(err) and must_refuse, (endpoint, str(inputs)[:200], err)
                continue
            assert "failed on this input" not in shown and "--" not in shown, (endpoint, shown)
            assert len(shown) < 300, (endpoint, shown)  # the input is not echoed back
            assert shown.startswith("**Error:**") or not must_refuse, (endpoint, str(inputs)[:200], shown)
        # The server still answers, each tab with a result.
        assert client.predict(nplm, "the cat", "greedy", 5, 3, 3, 1.0, 0.9, api_name="/continue")[0]
        assert "next-first" in client.predict(nplm, "(none)", "the cat", 5, api_name="/next_word")[0]
        assert client.predict(story, story, "the picnic", api_name="/story")[0].startswith("**storyline:**")
        assert "p(" in client.predict(hlbl, "the cat", "sat", api_name="/tree_path")[0]
        assert "median" in client.predict(numeracy, "the deficit was", api_name="/next_number")[0]


@pytest.mark.browser
def test_a_browser_types_a_prompt_and_reads_the_continuation_and_the_n_best_table(nplm_run, tmp_path):
    problem = missing_browser()
    if problem is not None:
        missing(problem)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser = headless_chromium()
    try:
        with served(build_app([nplm_run], workdir=str(tmp_path))) as address:
            browser.get(address)
            wait = WebDriverWait(browser, 60)
            box = wait.until(lambda b: b.find_element(By.CSS_SELECTOR, "#prompt textarea"))
            box.clear()
            box.send_keys("the dog")
            browser.find_element(By.ID, "continue").click()
            shown = wait.until(lambda b: b.find_element(By.CSS_SELECTOR, "#continuation textarea")
                               .get_attribute("value"))
            rows = [row.text
                    for row in wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#nbest tbody tr"))]
            whole_page_screenshot(browser, tmp_path / "continue.png")
    finally:
        browser.quit()
    # The page's defaults: the model's saved search (greedy, 20 new tokens), as model.generate's.
    saved = saved_search(nplm_run)
    assert saved == {"search": "greedy", "num_beams": 1, "max_new_tokens": 20}
    expected = continue_prompt(nplm_run, "the dog", **saved, num_return_sequences=3)
    ids = nplm_run.tokenizer("the dog", return_tensors="pt", add_special_tokens=False).input_ids
    by_generate = nplm_run.model.generate(ids, attention_mask=torch.ones_like(ids))[0, ids.shape[1]:]
    assert shown == expected["hypotheses"][0]["full_text"]
    assert shown == decode_generated(nplm_run.tokenizer, by_generate, prompt="the dog")
    assert len(rows) == 1
    for rank, (row, hypothesis) in enumerate(zip(rows, expected["hypotheses"], strict=True), 1):
        assert row.startswith(f"{rank} {hypothesis['text']} {hypothesis['log_prob']:.2f}")
    assert (tmp_path / "continue.png").read_bytes()[:4] == b"\x89PNG"
