"""transformers' own common model tests over every hf_nlm model type x head x variant.

transformers tests each of its models with the mixins of its repository's ``tests/`` folder
(``ModelTesterMixin``, ``GenerationTesterMixin``, ``ConfigTester``), which the wheel does not ship. This
script takes the sdist of the installed transformers version (``--sdist``, else ``pip download
transformers==VERSION --no-deps --no-binary :all: --no-build-isolation`` into ``--cache-dir``), extracts
the ``tests/*.py`` the mixins live in into ``--work-dir``, copies ``common_tests_module.py`` (one test class
per model type x head x variant, read from the registries: a new model type or head is tested by being
registered) there as ``tests/test_hf_nlm_common.py`` and runs pytest on it.

Prints one JSON line on stdout: ``value`` is the number of failed tests (target 0), with the passed, failed,
skipped and error counts and the failing tests' ids; pytest's output goes to stderr. ``-k`` selects tests as
pytest's ``-k`` does (``-k "Test_nplm_tree or resize"``); ``--quick`` runs one case per kind of head (a minute
or two). transformers' tests need ``parameterized`` (``pip install parameterized``, or a folder holding it on
``PYTHONPATH``). Run it as ``python benchmarks/common_tests.py`` from the repository root."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from importlib.metadata import version
from pathlib import Path

from common import emit_json, log

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODULE = HERE / "common_tests_module.py"
#: What the sdist's top-level ``tests/*.py`` import from the folders it does not ship, as stand-ins: the
#: generation and export mixins empty (``generate()`` has tests of its own in ``tests/test_generation.py``;
#: these models are not exported), and the keyword arguments ``ConfigTester`` sets on a config.
STAND_INS = {
    "__init__.py": "",
    "generation/__init__.py": "",
    "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
    "exporters/__init__.py": "",
    "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
    "utils/__init__.py": "",
    "utils/test_configuration_utils.py": """config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "output_attentions": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "architectures": ["BertModel"],
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}
""",
}
def replaced_tests() -> list[str]:
    """The upstream tests the test module's story seq2seq cases replace (its ``REPLACED_IN_SEQ2SEQ``), read
    from the module's text: it imports transformers' test folder, which is only there once prepared."""
    import ast

    tree = ast.parse(MODULE.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "REPLACED_IN_SEQ2SEQ":
            return list(ast.literal_eval(node.value))
    raise LookupError(f"{MODULE} sets no REPLACED_IN_SEQ2SEQ")


#: ``--quick``: one case of each kind of head.
QUICK = "Test_nplm_softmax or Test_lbl_split or Test_hlbl_tree or Test_numeracy_lm_mog"
#: A failing test in pytest's short summary (``-rfE``): ``FAILED id - message``, ``ERROR id``,
#: ``SUBFAILED[sub] id``.
FAILURE_LINE = re.compile(r"^(FAILED|ERROR|SUBFAILED\S*) (\S+)")
COUNTS = re.compile(r"(\d+) (failed|passed|skipped|errors?|xfailed|xpassed)\b")


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hf_nlm" / "common_tests"


def fetch_sdist(transformers_version: str, cache_dir: Path) -> Path:
    """The sdist of ``transformers_version`` in ``cache_dir``, downloaded there by pip when missing."""
    name = f"transformers-{transformers_version}.tar.gz"
    path = cache_dir / name
    if not path.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        log(f"downloading {name} into {cache_dir}")
        # --no-build-isolation: pip reads the sdist's metadata with the setuptools installed here, rather than
        # fetching build dependencies (from source too, under --no-binary :all:).
        subprocess.run([sys.executable, "-m", "pip", "download", f"transformers=={transformers_version}",
                        "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
                        "--dest", str(cache_dir)],
                       check=True, stdout=sys.stderr)
    if not path.exists():
        sys.exit(f"common_tests: pip gave no {name} in {cache_dir}")
    return path


def extract_tests(sdist: Path, work_dir: Path) -> Path:
    """Extract the top-level ``tests/*.py`` of ``sdist`` into ``work_dir/tests`` (replacing what is there),
    write the :data:`STAND_INS` and copy the harness module in; returns ``work_dir``."""
    tests = work_dir / "tests"
    if tests.exists():
        shutil.rmtree(tests)
    with tarfile.open(sdist) as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) == 3 and parts[1] == "tests" and member.isfile() and member.name.endswith(".py"):
                member.name = str(Path(*parts[1:]))
                members.append(member)
        if not members:
            sys.exit(f"common_tests: {sdist} has no tests/ folder")
        tar.extractall(work_dir, members=members, filter="data")
    for name, text in STAND_INS.items():
        (tests / name).parent.mkdir(exist_ok=True)
        (tests / name).write_text(text)
    shutil.copyfile(MODULE, tests / "test_hf_nlm_common.py")
    return work_dir


def run_pytest(work_dir: Path, select: str | None, extra: list[str]) -> tuple[int, list[str]]:
    """pytest's exit status and output lines (echoed to stderr as they come) on the harness module."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
               "tests/test_hf_nlm_common.py", *(["-k", select] if select else []), *extra]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path,
           "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    log(f"cd {work_dir} && {' '.join(command)}")
    lines = []
    with subprocess.Popen(command, cwd=work_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:
        for line in process.stdout:
            sys.stderr.write(line)
            lines.append(line.rstrip("\n"))
    return process.returncode, lines


def summarize(lines: list[str]) -> dict:
    """The counts of pytest's last summary line and the failing tests' ids (each once, in pytest's order)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    for line in reversed(lines):
        found = COUNTS.findall(line)
        if found and (" in " in line):
            for number, kind in found:
                kind = "errors" if kind.startswith("error") else kind
                if kind in counts:
                    counts[kind] = int(number)
            break
    failing = []
    for line in lines:
        match = FAILURE_LINE.match(line)
        if match:
            kind, test_id = match.groups()
            test_id = f"{test_id} [{kind}]" if kind.startswith("SUB") else test_id
            if test_id not in failing:
                failing.append(test_id)
    return {**counts, "failing": failing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, help="transformers' sdist (.tar.gz) of the installed version")
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                        help="where pip downloads the sdist (default: ~/.cache/hf_nlm/common_tests)")
    parser.add_argument("--work-dir", type=Path,
                        help="where tests/ is extracted and run (default: CACHE_DIR/transformers-VERSION)")
    parser.add_argument("-k", dest="select", help="pytest's -k expression")
    parser.add_argument("--quick", action="store_true", help=f"only -k {QUICK!r}")
    parser.add_argument("--prepare-only", action="store_true",
                        help="extract and write the harness, print the command that runs it, run nothing")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()

    transformers_version = version("transformers")
    sdist = args.sdist or fetch_sdist(transformers_version, args.cache_dir)
    if f"transformers-{transformers_version}" not in sdist.name:
        log(f"warning: {sdist.name} is not the installed transformers {transformers_version}")
    work_dir = extract_tests(sdist, args.work_dir or args.cache_dir / f"transformers-{transformers_version}")
    select = args.select or (QUICK if args.quick else None)
    if args.prepare_only:
        log(f"harness in {work_dir / 'tests' / 'test_hf_nlm_common.py'}")
        return
    start = time.perf_counter()
    returncode, lines = run_pytest(work_dir, select, args.pytest_args)
    summary = summarize(lines)
    if returncode not in (0, 1):  # 1: tests failed; anything else: pytest could not run them
        sys.exit(f"common_tests: pytest stopped with exit status {returncode} (see its output above)")
    failures = summary["failed"] + summary["errors"]
    replaced = replaced_tests()
    mixin = re.compile(r"class (\w+Mixin)")
    stand_ins = [f"{mixin.search(text).group(1)} (tests/{name})" for name, text in STAND_INS.items()
                 if mixin.search(text)]
    emit_json("common_tests", {
        "case": select or "all", "value": failures, "unit": "failed tests", "better": "lower", "target": 0,
        "headline": (f"{summary['passed']:,} passed, {summary['failed']:,} failed, {summary['skipped']:,} "
                     f"skipped, {summary['errors']} errors; the story seq2seq cases replace {len(replaced)} "
                     f"upstream tests with ours ({', '.join(replaced)}); empty stand-ins for "
                     f"{', '.join(stand_ins)} (the sdist does not ship them)"),
        "replaced_upstream_tests": replaced, "empty_stand_ins": stand_ins,
        **summary, "transformers": transformers_version, "seconds": round(time.perf_counter() - start, 1),
        "loadavg": [round(v, 2) for v in os.getloadavg()],
    })


if __name__ == "__main__":
    main()
