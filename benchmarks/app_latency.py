"""How fast the web demo answers (``hf-nlm app``): target, under a second for the demo's NPLM on this
machine.

Loads the run folder once (as the app does), then times each of the page's questions ``--runs`` times:
the function alone (``hf_nlm.app``), and the whole round trip through the served page (a Gradio client
posting to the app on 127.0.0.1, queue and HTTP included). Prints one JSON line per question and path, e.g.
{"benchmark": "app_latency", "case": "continue (beam 5, 3 shown, 15 tokens) via the page", "value": 0.41, ...}

    make demo && python benchmarks/app_latency.py demo-output/nplm-brown \
        >> benchmarks/results/app_latency.jsonl
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from common import add_run_arguments, emit_json, log, machine

from hf_nlm.app.browser import served
from hf_nlm.app.explore import continue_prompt, load_run, next_words, text_surprisal
from hf_nlm.app.page import build_app

BENCHMARK = "app_latency"
TARGET_S = 1.0
PROMPT = "the president of the united states"
TEXT = "the committee said on monday that the new law would take effect next year ."
#: (case, the function's call, the page's endpoint and its inputs), the page's default settings.
CASES = (
    ("continue (beam 5, 3 shown, 15 tokens)",
     lambda run: continue_prompt(run, PROMPT, search="beam", num_beams=5, num_return_sequences=3,
                                 max_new_tokens=15),
     "/continue", lambda run: [run.name, PROMPT, "beam", 5, 3, 15, 1.0, 0.9]),
    ("next word (top 10)", lambda run: next_words(run, PROMPT, 10), "/next_word",
     lambda run: [run.name, f"{run.name} / {run.ngram_name}" if run.ngram else "(none)", PROMPT, 10]),
    ("surprisal of a 15-token text", lambda run: text_surprisal(run, TEXT), "/surprisal",
     lambda run: [run.name, TEXT]),
)


def timed(call, runs: int) -> list[float]:
    call()  # the first call warms the caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", default="demo-output/nplm-brown")
    parser.add_argument("--runs", type=int, default=20)
    add_run_arguments(parser, output_dir=False)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    run = load_run(args.run_dir)
    common = {"run": run.name, "model_type": run.model.config.model_type, "runs": args.runs, "cpu": machine(),
              "threads": torch.get_num_threads()}
    from gradio_client import Client

    with served(build_app([run])) as address:
        client = Client(address, verbose=False)
        for case, call, endpoint, inputs in CASES:
            for path, fn in (("function", lambda c=call: c(run)),
                             ("via the page",
                              lambda e=endpoint, i=inputs: client.predict(*i(run), api_name=e))):
                times = timed(fn, args.runs)
                median = statistics.median(times)
                log(f"{case} ({path}): median {median:.3f} s, max {max(times):.3f} s")
                emit_json(BENCHMARK, {"case": f"{case} {path}", "value": round(median, 4), "unit": "s",
                                      "better": "lower", "max_s": round(max(times), 4), "target": TARGET_S,
                                      "met": median <= TARGET_S, **common})


if __name__ == "__main__":
    main()
