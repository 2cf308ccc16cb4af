"""The web demo's page: a Gradio app over saved run folders (``hf-nlm app RUN_DIR [RUN_DIR ...]``).

Tabs, each shown only where a loaded run supports it (:func:`hf_nlm.app.explore.capabilities`):

1. **Continue a prompt**: greedy search, beam search (the n best with each one's log-probability and its
   tokens as a probability strip) or sampling (temperature, top-p);
2. **Next word**: the top-k next tokens of a model and, beside them, of a second one (the n-gram model
   saved in the run folder, or another run), and the surprisal of a pasted text token by token;
3. **Numeracy** (a numeracy LM): the likeliest next numerals, the median and interval of the next number,
   the mixture-of-Gaussians density or the combination's strategy weights as a picture;
4. **Story** (encoder-decoder runs): title -> storyline -> story, with the attention of the second stage;
5. **Tree** (a tree-softmax head): the path of a word through the tree, with each node's probability.

Each run is loaded once, when the app starts. Whatever the user types, the page answers with a result or
a message in the page (``ValueError``'s text); an unexpected error is reported there too, and the server
goes on serving.
"""

from __future__ import annotations

import argparse
import functools
import html
import sys
import tempfile
import traceback
from pathlib import Path

import gradio as gr

from ..plots import plot_numeral_density, plot_strategy_weights
from ..tokenization.numerals import UNK_NUM_TOKEN
from .explore import (
    NUMBER_LIMITS,
    Run,
    continue_prompt,
    hypotheses_html,
    load_runs,
    next_numeral,
    next_words,
    saved_search,
    surprisal_html,
    table_html,
    tell_story,
    text_surprisal,
    tree_path,
)

#: What ``hf-nlm app`` serves without a folder: the model ``make demo`` trains.
DEFAULT_RUN = "demo-output/nplm-brown"
NO_SECOND = "(none)"
#: Questions waiting for the model at most; a client posting more is told the queue is full. One question is
#: answered at a time (every tab's event shares one concurrency group), so that the memory one question may
#: take (docs/app.md) bounds the server's.
MAX_QUEUE = 20
#: What the Next word tab says of a token that generation never writes.
NOT_RANKED = "(not ranked: generation never writes it)"
UNK_ROW = "(any word outside the vocabulary; not ranked: generation never writes it)"


def message(text: str | None, error: bool = False) -> str:
    """A line for the page's message box (Markdown)."""
    if not text:
        return ""
    # Escaped: the text may quote the user's input or name "<unk>", which Markdown would take for HTML.
    return f"**{'Error' if error else 'Note'}:** {html.escape(text)}"


def answers(count: int):
    """Wrap a handler returning ``count`` outputs, the last the message box: a ``ValueError`` becomes its
    message with the other outputs empty, anything else a message naming the error (its traceback goes to
    the server's log), so that the page never shows a stack trace and the server keeps serving."""

    def wrap(handler):
        @functools.wraps(handler)
        def wrapped(*args):
            try:
                return handler(*args)
            except ValueError as err:
                return (*[None] * (count - 1), message(str(err), error=True))
            except Exception as err:  # noqa: BLE001 -- the page reports it; the server must go on
                traceback.print_exc(file=sys.stderr)
                return (*[None] * (count - 1),
                        message(f"the model failed on this input ({type(err).__name__}: {err})", error=True))

        return wrapped

    return wrap


def button_and_message(label: str, elem_id: str, primary: bool = True,
                       message_id: str | None = None) -> tuple[gr.Button, gr.Markdown]:
    """A tab's button and, under it, the message box its handler's last output fills (see :func:`answers`)."""
    button = gr.Button(label, variant="primary" if primary else "secondary", elem_id=elem_id)
    return button, gr.Markdown(elem_id=message_id)


def story_stages(names: list[str]) -> tuple[str, str]:
    """The runs the Story tab starts with: the first whose name says "storyline" for the first stage (else the
    first run), and for the second the first other one whose name says "story" (else the last run)."""
    first = next((n for n in names if "storyline" in n), names[0])
    second = next((n for n in names if "story" in n.replace("storyline", "") and n != first), names[-1])
    return first, second


def build_app(runs: list[Run], problems: list[str] | None = None, workdir: str | None = None) -> gr.Blocks:
    """The page over ``runs`` (from :func:`hf_nlm.app.explore.load_runs`); ``problems``, the folders that did
    not load, are listed at the top. Pictures are written under ``workdir`` (a temporary folder by
    default)."""
    by_name = {run.name: run for run in runs}
    if len(by_name) < len(runs):
        raise ValueError("two runs share a name: load them with load_runs, which tells them apart")
    pictures = Path(workdir or tempfile.mkdtemp(prefix="hf_nlm_app_"))
    picture_name = {run.name: i for i, run in enumerate(runs)}  # a name may hold "/" (a/lm, b/lm)
    one_at_a_time = {"concurrency_limit": 1, "concurrency_id": "model"}
    lm_runs = [r.name for r in runs if "lm" in r.kind]
    numeracy_runs = [r.name for r in runs if "numeracy" in r.kind]
    seq2seq_runs = [r.name for r in runs if "seq2seq" in r.kind]
    tree_runs = [r.name for r in runs if "tree" in r.kind]
    # The Next word tab's second column: a run's n-gram model ("nplm / kneser-ney-5gram") or another run.
    seconds = {f"{r.name} / {r.ngram_name}": (r.name, "ngram") for r in runs if r.ngram is not None}
    seconds.update({name: (name, "model") for name in lm_runs})

    def run_of(name: str) -> Run:
        if name not in by_name:
            raise ValueError("Choose a model first.")
        return by_name[name]

    # No telemetry and no release check: nothing at run time touches the network.
    with gr.Blocks(title="hf-nlm: classic neural language models", analytics_enabled=False) as app:
        gr.Markdown("# hf-nlm: classic neural language models\n"
                    "Loaded: " + (", ".join(f"`{r.name}` ({r.model.config.model_type})" for r in runs)
                                  or "nothing"))
        if problems:
            gr.Markdown("\n".join(message(p, error=True) for p in problems))
        if lm_runs:
            with gr.Tab("Continue a prompt"):
                # The first model's saved search: the page answers as model.generate and hf-nlm generate do.
                saved = saved_search(run_of(lm_runs[0]))
                with gr.Row():
                    model = gr.Dropdown(lm_runs, value=lm_runs[0], label="model")
                    search = gr.Radio(["greedy", "beam", "sample"], value=saved["search"], label="search")
                prompt = gr.Textbox(label="prompt", value="the president of the united states",
                                    elem_id="prompt")
                with gr.Row():
                    beams = gr.Slider(*slider_range("num_beams"), value=max(saved["num_beams"], 5)
                                      if saved["search"] != "beam" else saved["num_beams"], step=1,
                                      label="beams (beam search)")
                    returned = gr.Slider(*slider_range("num_return_sequences"), value=3, step=1,
                                         label="hypotheses shown")
                    length = gr.Slider(*slider_range("max_new_tokens"), step=1, label="new tokens",
                                       value=min(saved["max_new_tokens"], NUMBER_LIMITS["max_new_tokens"][2]))
                    temperature = gr.Number(value=1.0, label="temperature (sampling)")
                    top_p = gr.Number(value=0.9, label="top-p (sampling)")
                go, status = button_and_message("Continue", "continue", message_id="continue-message")
                best = gr.Textbox(label="continuation", elem_id="continuation", interactive=False)
                table = gr.HTML(elem_id="nbest-table")

                @answers(3)
                def on_continue(name, prompt_text, how, n_beams, n_returned, n_new, temp, nucleus):
                    result = continue_prompt(run_of(name), prompt_text, search=how, num_beams=n_beams,
                                             num_return_sequences=n_returned, max_new_tokens=n_new,
                                             temperature=temp, top_p=nucleus)
                    note = message(result["warning"]) or f"answered in {result['seconds']:.2f} s"
                    return result["hypotheses"][0]["full_text"], hypotheses_html(result), note

                go.click(on_continue, [model, prompt, search, beams, returned, length, temperature, top_p],
                         [best, table, status], api_name="continue", **one_at_a_time)

            with gr.Tab("Next word"):
                with gr.Row():
                    first = gr.Dropdown(lm_runs, value=lm_runs[0], label="model")
                    second = gr.Dropdown([NO_SECOND, *seconds], value=next(iter(seconds), NO_SECOND),
                                         label="beside it")
                context = gr.Textbox(label="prompt", value="the president of the", elem_id="next-prompt")
                k = gr.Slider(*slider_range("k"), value=10, step=1, label="top k")
                ask, next_status = button_and_message("Next word", "next")
                with gr.Row():
                    left, right = gr.HTML(), gr.HTML()
                text = gr.Textbox(label="a text to score", lines=3,
                                  value="the committee said the new law would take effect next year .")
                score, surprisal_status = button_and_message("Surprisal of each token", "score",
                                                             primary=False)
                strips = gr.HTML(elem_id="surprisal")

                def next_table(title: str, run: Run, result: dict, which: str, element_id: str) -> str:
                    """The ranked tokens, then those generation never writes, labelled and not ranked."""
                    rows = [(t, f"{p:.4f}") for t, p in result[which]]
                    for t, p in result[f"{which}_not_ranked"]:
                        label = UNK_ROW if t == run.tokenizer.unk_token else NOT_RANKED
                        rows.append((f"{t} {label}", f"{p:.4f}"))
                    return f"<b>{html.escape(title)}</b>" + table_html(rows, ("token", "p"), element_id)

                @answers(3)
                def on_next(name, other, prompt_text, top):
                    run = run_of(name)
                    result = next_words(run, prompt_text, top)
                    side = ""
                    if other != NO_SECOND:
                        if other not in seconds:
                            raise ValueError("Choose a second model, or (none).")
                        second_run, which = run_of(seconds[other][0]), seconds[other][1]
                        found = result if second_run is run else next_words(second_run, prompt_text, top)
                        side = next_table(other, second_run, found, which, "next-second")
                    return (next_table(name, run, result, "model", "next-first"), side,
                            message(result["warning"]))

                ask.click(on_next, [first, second, context, k], [left, right, next_status],
                          api_name="next_word", **one_at_a_time)

                @answers(2)
                def on_score(name, text_value):
                    result = text_surprisal(run_of(name), text_value)
                    parts = [surprisal_html(result["tokens"], result["perplexity"], name)]
                    if result["ngram_tokens"] is not None:
                        parts.append(surprisal_html(result["ngram_tokens"], result["ngram_perplexity"],
                                                    f"{name} / {run_of(name).ngram_name}"))
                    return "".join(parts), message(result["warning"])

                score.click(on_score, [first, text], [strips, surprisal_status], api_name="surprisal",
                            **one_at_a_time)

        if numeracy_runs:
            with gr.Tab("Numeracy"):
                numeracy_model = gr.Dropdown(numeracy_runs, value=numeracy_runs[0], label="numeracy model")
                numeral_context = gr.Textbox(label="context (the next token is a number)",
                                             value="the population was", elem_id="numeral-context")
                predict, numeral_status = button_and_message("Next number", "next-number")
                numeral_table = gr.HTML(elem_id="numeral-table")
                numeral_picture = gr.Image(type="filepath", label="the model's picture",
                                           elem_id="numeral-picture")

                @answers(3)
                def on_numeral(name, context_text):
                    run = run_of(name)
                    result = next_numeral(run, context_text)
                    rows = [(f"{t} (every numeral outside the vocabulary)" if t == UNK_NUM_TOKEN else t,
                             f"{p:.4f}") for t, p in result["numerals"]]
                    if result["unseen"] is not None:
                        rows.append((f"{result['unseen'][0]} (the likeliest outside the vocabulary)",
                                     f"{result['unseen'][1]:.4g}"))
                    summary = (f"<p>p(a numeral comes next) = {result['p_numeral']:.3f}; "
                               f"median {result['median']:,.6g}, {result['interval']:.0%} interval "
                               f"[{result['low']:,.6g}, {result['high']:,.6g}]</p>")
                    picture = None
                    head = run.model.lm_head
                    if hasattr(head, "mixture"):
                        picture = str(pictures / f"density-{picture_name[name]}.png")
                        plot_numeral_density(run.model, run.tokenizer, context_text, picture)
                    elif hasattr(head, "strategy_log_weights"):
                        picture = str(pictures / f"weights-{picture_name[name]}.png")
                        plot_strategy_weights(run.model, run.tokenizer, context_text, picture)
                    table_part = table_html(rows, ("next numeral", "p(numeral | a numeral comes)"),
                                            "numerals")
                    return summary + table_part, picture, message(result["warning"])

                predict.click(on_numeral, [numeracy_model, numeral_context],
                              [numeral_table, numeral_picture, numeral_status], api_name="next_number",
                              **one_at_a_time)

        if seq2seq_runs:
            with gr.Tab("Story"):
                with gr.Row():
                    first_stage, second_stage = story_stages(seq2seq_runs)
                    storyline_model = gr.Dropdown(seq2seq_runs, value=first_stage, label="storyline model")
                    story_model = gr.Dropdown(seq2seq_runs, value=second_stage, label="story model")
                title = gr.Textbox(label="title", value="the picnic", elem_id="story-title")
                write, story_status = button_and_message("Write a story", "write-story")
                story_text = gr.Markdown(elem_id="story-text")
                attention = gr.Image(type="filepath", label="attention of the story stage",
                                     elem_id="attention")

                @answers(3)
                def on_story(first_name, second_name, title_text):
                    picture = str(pictures / "attention.png")
                    story = tell_story(run_of(first_name), run_of(second_name), title_text, picture)
                    # Escaped: a model's "<unk>" would read as an HTML tag and vanish from the page.
                    storyline_text, story_body = (html.escape(" # ".join(story["storyline"])),
                                                  html.escape(story["story"]))
                    empty = [name for name, part in (("storyline", story["storyline"]),
                                                     ("story", story["story"])) if not part]
                    note = (message(f"the model wrote no {' and no '.join(empty)} for this title")
                            if empty else "")
                    return f"**storyline:** {storyline_text}\n\n**story:** {story_body}", picture, note

                write.click(on_story, [storyline_model, story_model, title],
                            [story_text, attention, story_status], api_name="story", **one_at_a_time)

        if tree_runs:
            with gr.Tab("Tree"):
                tree_model = gr.Dropdown(tree_runs, value=tree_runs[0], label="tree-softmax model")
                with gr.Row():
                    tree_context = gr.Textbox(label="context", value="the president of the")
                    word = gr.Textbox(label="word", value="united")
                follow, tree_status = button_and_message("Path of the word", "follow-path")
                path_table = gr.HTML(elem_id="path-table")

                @answers(2)
                def on_tree(name, context_text, word_text):
                    result = tree_path(run_of(name), context_text, word_text)
                    parts = [f"<p>p({html.escape(result['word'])} | context) = "
                             f"{result['probability']:.4g}</p>"]
                    for i, code in enumerate(result["codes"], 1):
                        rows = [(r["node"], "right" if r["bit"] else "left", f"{r['probability']:.4f}",
                                 f"{r['path_probability']:.4g}", r["words_below"]) for r in code]
                        parts.append(f"<p>code {i}</p>" + table_html(
                            rows, ("node", "branch", "p(branch)", "p(path so far)", "words below"),
                            f"path-{i}"))
                    return "".join(parts), ""

                follow.click(on_tree, [tree_model, tree_context, word], [path_table, tree_status],
                             api_name="tree_path", **one_at_a_time)
    return app.queue(max_size=MAX_QUEUE)


def slider_range(name: str) -> tuple[int, int]:
    """A slider's ends: the page's limits of that number (:data:`hf_nlm.app.explore.NUMBER_LIMITS`)."""
    _, low, high, _ = NUMBER_LIMITS[name]
    return low, high


def main(argv: list[str] | None = None) -> int:
    """``hf-nlm app [RUN_DIR ...] [--host H] [--port P]``: load the runs and serve the page until
    interrupted."""
    parser = argparse.ArgumentParser(prog="hf-nlm app",
                                     description="explore saved models in a web page (Gradio)")
    parser.add_argument("run_dirs", nargs="*", default=[DEFAULT_RUN],
                        help=f"saved model folders (default: {DEFAULT_RUN}, which `make demo` writes)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to serve on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=7860, help="port (default: 7860)")
    args = parser.parse_args(argv)
    if not 1 <= args.port <= 65535:
        parser.error(f"--port {args.port}: a TCP port is a number from 1 to 65535")
    runs, problems = load_runs(args.run_dirs)
    if not runs:
        parser.exit(2, "hf-nlm app: error: no run folder loaded:\n"
                    + "\n".join(f"  {p}" for p in problems) + "\n")
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    try:
        build_app(runs, problems).launch(server_name=args.host, server_port=args.port)
    except OSError as err:  # the port taken, or the address not this machine's
        parser.exit(2, f"hf-nlm app: error: cannot serve on {args.host}:{args.port}: {err}\n")
    return 0


__all__ = ["DEFAULT_RUN", "build_app", "main"]
