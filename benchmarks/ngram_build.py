"""Build time and perplexities of the count-based n-gram baselines (``hf_nlm.ngram``) on Brown and PTB.

Prints one JSON object per line on stdout (progress on stderr):
- ``kn5_brown_build``: seconds to count and smooth a 5-gram KN model of Brown train (best of 3).
- ``brown_kn{3,4,5}_{valid,test}``, ``brown_interp3_{valid,test}``: perplexities with Bengio et al.
  (2003)'s split and vocabulary rule (words seen <= 3 times -> ``<unk>``; lowercased), every word and
  sentence end predicted once, as ``hf_nlm.evaluation.evaluate_lm`` counts them. ``paper`` is the
  figure Bengio et al. report for their copy of the corpus (Table 1).
- ``ptb_kn{3,4,5}_{valid,test}``: Mikolov's PTB (``paper``: KN5 141.2, Mikolov et al. 2011).
- ``arpa_roundtrip_*``: ARPA export and import of the Brown KN3 model, and the largest difference in
  test log-probabilities between the model and its ARPA copy.
- ``ptb_kn5_text_to_arpa``: seconds from PTB train text (a list of lines in memory) to a KN5 ARPA
  file (tokenizer training, ids, counts, estimation, ``to_arpa``), what KenLM's ``lmplz -o 5`` does,
  estimated as ``lmplz`` estimates (``per_sentence=True``: the same job, the same n-grams); median of
  5. The target is ``lmplz``'s time on the same machine (ratio <= 1): with ``--lmplz PATH`` the binary
  runs on the same text (``<unk>`` renamed to a plain word, which ``lmplz`` requires), alternating with
  ours, and ``lmplz_s`` is its median; without it, ``lmplz_s`` is the figure measured that way on the
  machine of the stored figures (``lmplz_measured: false``).
- ``ptb_kn5_arpa_import``: seconds of ``ArpaLM.from_arpa`` reading the KN5 file (``lmplz``'s own file
  with ``--lmplz``, else ours) into a queryable model, in a fresh process; with ``--kenlm-python PATH``
  (a Python that imports KenLM's module) ``kenlm.Model`` loads the same file in a process of its own,
  alternating with ours, 5 each; target: ratio <= 1.5. ``ptb_kn5_arpa_import_memory``: that load's
  peak resident memory above the process's resident memory after its imports (the peak reset first;
  ``/proc/self/status``), in MB, against the file's size (target <= 2x), with the memory still held
  after the load (``retained_mb``) and KenLM's figures beside it. Without ``--kenlm-python`` KenLM's
  figures are the stored ones (``kenlm_measured: false``). Linux only (``/proc``).
- ``ptb_kn5_test_per_sentence``: test perplexity with KenLM's ``query`` convention (every sentence from
  ``<s>`` alone) instead of the running stream. ``ptb_kn5_test_lmplz_style``: the same scoring of a
  model estimated as ``lmplz`` does (``KneserNeyLM(per_sentence=True)``: every sentence counted alone,
  raw counts for ``<s>`` n-grams); ``lmplz_query`` is what ``lmplz -o 5`` + ``query`` gave on the same
  machine (KenLM built from its PyPI source, ``<unk>`` renamed to a plain word in train and test since
  ``lmplz`` refuses it).

Every timed row carries ``loadavg``, the machine's 1-minute load average before and after its runs (the
machine is shared: the ratios, measured alternately, are what compares).

``--quick`` runs the same cases on the first 20% of every split (a few seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from common import log, machine

from hf_nlm.data import load_brown, load_ptb
from hf_nlm.data.lm import tokenize_corpus
from hf_nlm.ngram import ArpaLM, InterpolatedLM, KneserNeyLM
from hf_nlm.tokenization import train_word_level_tokenizer

BENCHMARK = "ngram_build"
BROWN_PAPER = {"kn3": 323, "kn4": 321, "kn5": 321, "interp3": 336}  # Bengio et al. 2003, Table 1 (test)
PTB_PAPER = {"kn5": 141.2}  # Mikolov et al. 2011, "Empirical evaluation and combination ...", test
# KenLM lmplz -o 5 + query -v summary on PTB test, same machine (see the docstring)
LMPLZ_PTB_KN5_TEST = 141.186207
# lmplz -o 5 -S 1G on PTB train, text -> ARPA, same machine: median of 5 (--lmplz run of the stored figures)
LMPLZ_PTB_KN5_S = 2.481
# kenlm.Model loading lmplz's PTB KN5 file (--kenlm-python run of the stored figures): seconds, peak and
# retained MB above the import
KENLM_PTB_KN5_LOAD = {"seconds": 1.732, "peak_mb": 50.1, "retained_mb": 49.3}
TEXT_TO_ARPA_REPEATS = 5
IMPORT_REPEATS = 5
# Run in a process of its own: load an ARPA file (ours: ArpaLM; kenlm: kenlm.Model) and print the seconds,
# and the peak and retained resident memory above the process's memory after its imports.
LOAD_CHILD = r"""
import json, sys, time
def resident():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {key: int(fields[key].split()[0]) * 1024 for key in ("VmRSS", "VmHWM")}
which, path = sys.argv[1], sys.argv[2]
if which == "kenlm":
    import kenlm
    load = kenlm.Model
else:
    from hf_nlm.ngram import ArpaLM
    load = ArpaLM.from_arpa
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from the current resident memory
before = resident()["VmRSS"]
start = time.perf_counter()
model = load(path)
seconds = time.perf_counter() - start
after = resident()
print(json.dumps({"seconds": seconds, "peak": after["VmHWM"] - before, "retained": after["VmRSS"] - before}))
"""


def emit(case: str, value: float, unit: str, better: str, **context) -> None:
    print(
        json.dumps(
            {
                "benchmark": BENCHMARK,
                "case": case,
                "value": float(f"{value:.6g}"),
                "unit": unit,
                "better": better,
                **context,
            }
        ),
        flush=True,
    )


def streams(ds, min_frequency: int, fraction: float):
    """Word-level tokenizer trained on train, and every split as one id stream."""
    texts = {split: ds[split]["text"] for split in ds}
    if fraction < 1:
        texts = {split: t[: max(1, int(len(t) * fraction))] for split, t in texts.items()}
    tokenizer = train_word_level_tokenizer(texts["train"], min_frequency=min_frequency)
    ids = {split: tokenize_corpus(t, tokenizer)[0].numpy() for split, t in texts.items()}
    return tokenizer, ids


def ppl(lm, ids: np.ndarray) -> float:
    total, count = lm.score_stream(ids)
    return float(np.exp(total / count))


def run_lmplz(binary: str, text: str, arpa: str) -> float:
    """Seconds ``lmplz -o 5`` takes from ``text`` to the ARPA file ``arpa``."""
    with open(text, "rb") as src, open(arpa, "wb") as dst:
        start = time.perf_counter()
        subprocess.run([binary, "-o", "5", "-S", "1G"], stdin=src, stdout=dst, stderr=subprocess.DEVNULL,
                       check=True)
        return time.perf_counter() - start


def load_in_child(python: str, which: str, path: str) -> dict:
    """``LOAD_CHILD`` run by ``python``: seconds, peak and retained bytes of loading ``path``."""
    out = subprocess.run([python, "-c", LOAD_CHILD, which, path], capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"loading {path} with {python} ({which}) failed:\n{out.stderr}")
    return json.loads(out.stdout)


def load_summary(runs: list[dict]) -> dict | None:
    """The medians of ``load_in_child`` runs: seconds, peak and retained MB (``None``: no runs)."""
    if not runs:
        return None
    return {"seconds": round(statistics.median(r["seconds"] for r in runs), 3),
            **{f"{key}_mb": round(statistics.median(r[key] for r in runs) / 2**20, 1)
               for key in ("peak", "retained")}}


def load1() -> float:
    """The machine's load average over the last minute."""
    return round(os.getloadavg()[0], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="use the first 20%% of every split")
    parser.add_argument(
        "--lmplz",
        metavar="PATH",
        help="KenLM's lmplz binary: time it on the same text, alternating with ours "
             "(default: quote the stored figure)",
    )
    parser.add_argument(
        "--kenlm-python",
        metavar="PATH",
        help="a Python that imports KenLM's module: time kenlm.Model loading the same ARPA file, "
             "alternating with ours (default: quote the stored figures)",
    )
    args = parser.parse_args()
    if args.lmplz and not os.access(args.lmplz, os.X_OK):
        parser.error(f"--lmplz {args.lmplz}: not an executable file")
    if args.kenlm_python and subprocess.run([args.kenlm_python, "-c", "import kenlm"],
                                            capture_output=True, check=False).returncode:
        parser.error(f"--kenlm-python {args.kenlm_python}: cannot import kenlm")
    fraction = 0.2 if args.quick else 1.0
    info = {"quick": args.quick, "cpus": os.cpu_count(), "machine": machine()}

    log("Brown: loading and tokenizing")
    tokenizer, ids = streams(load_brown(), min_frequency=4, fraction=fraction)
    sizes = {"vocab_size": len(tokenizer), "train_tokens": int(ids["train"].size)}
    times = []
    for _ in range(3):
        start = time.perf_counter()
        kn5 = KneserNeyLM.from_ids(ids["train"], 5, len(tokenizer))
        times.append(time.perf_counter() - start)
    grams = sum(int(k.size) for k in kn5.gram_keys[2:]) + len(tokenizer)
    emit("kn5_brown_build", min(times), "s", "lower", target=60, ngrams=grams, **sizes, **info)

    for n in (3, 4, 5):
        log(f"Brown: KN{n}")
        lm = kn5 if n == 5 else KneserNeyLM.from_ids(ids["train"], n, len(tokenizer))
        emit(f"brown_kn{n}_valid", ppl(lm, ids["validation"]), "ppl", "lower", **sizes, **info)
        emit(
            f"brown_kn{n}_test",
            ppl(lm, ids["test"]),
            "ppl",
            "lower",
            paper=BROWN_PAPER[f"kn{n}"],
            **sizes,
            **info,
        )
        if n == 3:
            kn3 = lm
    log("Brown: interpolated trigram (weights by EM on validation)")
    interp = InterpolatedLM.from_ids(ids["train"], 3, len(tokenizer), valid_ids=ids["validation"])
    emit(
        "brown_interp3_valid",
        ppl(interp, ids["validation"]),
        "ppl",
        "lower",
        weights_fitted_on="validation",
        **sizes,
        **info,
    )
    emit(
        "brown_interp3_test",
        ppl(interp, ids["test"]),
        "ppl",
        "lower",
        paper=BROWN_PAPER["interp3"],
        **sizes,
        **info,
    )

    log("Brown: ARPA round trip of KN3")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kn3.arpa")
        start = time.perf_counter()
        kn3.to_arpa(path, vocab=tokenizer)
        export_s = time.perf_counter() - start
        megabytes = os.path.getsize(path) / 2**20
        start = time.perf_counter()
        arpa = ArpaLM.from_arpa(path, vocab=tokenizer)
        import_s = time.perf_counter() - start
    test = np.concatenate([np.full(2, kn3.bos_id), ids["test"]])
    windows = np.lib.stride_tricks.sliding_window_view(test, 3)
    diff = np.abs(
        kn3.log_prob(windows[:, :2], windows[:, 2]) - arpa.log_prob(windows[:, :2], windows[:, 2])
    ).max()
    emit("arpa_roundtrip_export", export_s, "s", "lower", file_mb=round(megabytes, 1), **info)
    emit("arpa_roundtrip_import", import_s, "s", "lower", file_mb=round(megabytes, 1), **info)
    emit("arpa_roundtrip_max_abs_logprob_diff", float(diff), "nats", "lower", **info)

    log("PTB: loading and tokenizing")
    tokenizer, ids = streams(load_ptb(), min_frequency=1, fraction=fraction)
    sizes = {"vocab_size": len(tokenizer), "train_tokens": int(ids["train"].size)}
    for n in (3, 4, 5):
        log(f"PTB: KN{n}")
        lm = KneserNeyLM.from_ids(ids["train"], n, len(tokenizer))
        emit(f"ptb_kn{n}_valid", ppl(lm, ids["validation"]), "ppl", "lower", **sizes, **info)
        extra = {"paper": PTB_PAPER[f"kn{n}"]} if f"kn{n}" in PTB_PAPER else {}
        emit(f"ptb_kn{n}_test", ppl(lm, ids["test"]), "ppl", "lower", **extra, **sizes, **info)
    kn5 = lm
    total, count = kn5.score_stream(ids["test"], per_sentence=True)
    emit("ptb_kn5_test_per_sentence", float(np.exp(total / count)), "ppl", "lower", **sizes, **info)
    log("PTB: KN5 estimated per sentence, as lmplz does")
    lmplz_style = KneserNeyLM.from_ids(ids["train"], 5, len(tokenizer), per_sentence=True)
    total, count = lmplz_style.score_stream(ids["test"], per_sentence=True)
    emit(
        "ptb_kn5_test_lmplz_style",
        float(np.exp(total / count)),
        "ppl",
        "lower",
        lmplz_query=None if args.quick else LMPLZ_PTB_KN5_TEST,
        **sizes,
        **info,
    )

    log("PTB: text -> KN5 ARPA (what lmplz does), and the ARPA import")
    # The corpus as a list of str before the clock starts, as lmplz's text file is on disk: iterating a
    # datasets Column (what train_word_level_tokenizer does with one) costs 0.45 s per pass on PTB train.
    texts = load_ptb()["train"]["text"][:]
    if fraction < 1:
        texts = texts[: int(len(texts) * fraction)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kn5.arpa")
        lmplz_text = os.path.join(tmp, "train.txt")
        with open(lmplz_text, "w", encoding="utf-8") as f:  # lmplz refuses <unk> in its input
            f.writelines(line.replace("<unk>", "UNKWORD") + "\n" for line in texts)
        ours, theirs = [], []
        loadavg = [load1()]
        for _ in range(TEXT_TO_ARPA_REPEATS):  # alternating: the machine's load hits both alike
            start = time.perf_counter()
            tokenizer = train_word_level_tokenizer(texts)
            KneserNeyLM.from_texts(texts, tokenizer, order=5,
                                   per_sentence=True).to_arpa(path, vocab=tokenizer)
            ours.append(time.perf_counter() - start)
            if args.lmplz:
                theirs.append(run_lmplz(args.lmplz, lmplz_text, os.path.join(tmp, "lmplz.arpa")))
        loadavg.append(load1())
        build_s = statistics.median(ours)
        megabytes = round(os.path.getsize(path) / 2**20, 1)
        lmplz_s = statistics.median(theirs) if theirs else (None if args.quick else LMPLZ_PTB_KN5_S)
        emit(
            "ptb_kn5_text_to_arpa",
            build_s,
            "s",
            "lower",
            estimation="per_sentence",
            runs=[round(t, 3) for t in ours],
            lmplz_s=None if lmplz_s is None else round(lmplz_s, 3),
            lmplz_runs=[round(t, 3) for t in theirs] or None,
            lmplz_measured=bool(theirs),
            ratio=None if lmplz_s is None else round(build_s / lmplz_s, 3),
            target_ratio=1,
            file_mb=megabytes,
            loadavg=loadavg,
            **info,
        )

        log("PTB: loading the KN5 ARPA file (ours and KenLM's, each in a process of its own)")
        loaded = os.path.join(tmp, "lmplz.arpa") if args.lmplz else path  # lmplz's file where there is one
        file_mb = round(os.path.getsize(loaded) / 2**20, 1)
        runs: dict[str, list[dict]] = {"ours": [], "kenlm": []}
        loadavg = [load1()]
        for _ in range(IMPORT_REPEATS):
            runs["ours"].append(load_in_child(sys.executable, "ours", loaded))
            if args.kenlm_python:
                runs["kenlm"].append(load_in_child(args.kenlm_python, "kenlm", loaded))
        loadavg.append(load1())

        ours_load = load_summary(runs["ours"])
        kenlm_load = load_summary(runs["kenlm"]) or (None if args.quick else KENLM_PTB_KN5_LOAD)
        kenlm_s = kenlm_load and kenlm_load["seconds"]
        common = {"file": "lmplz" if args.lmplz else "ours", "file_mb": file_mb,
                  "kenlm_measured": bool(runs["kenlm"]), "loadavg": loadavg, **info}
        emit(
            "ptb_kn5_arpa_import",
            ours_load["seconds"],
            "s",
            "lower",
            runs=[round(r["seconds"], 3) for r in runs["ours"]],
            kenlm_s=kenlm_s,
            kenlm_runs=[round(r["seconds"], 3) for r in runs["kenlm"]] or None,
            ratio=round(ours_load["seconds"] / kenlm_s, 3) if kenlm_s else None,
            target_ratio=1.5,
            **common,
        )
        emit(
            "ptb_kn5_arpa_import_memory",
            ours_load["peak_mb"],
            "MB",
            "lower",
            retained_mb=ours_load["retained_mb"],
            ratio_to_file=round(ours_load["peak_mb"] / file_mb, 3),
            target_ratio_to_file=2,
            kenlm_peak_mb=kenlm_load and kenlm_load["peak_mb"],
            kenlm_retained_mb=kenlm_load and kenlm_load["retained_mb"],
            **common,
        )


if __name__ == "__main__":
    main()
