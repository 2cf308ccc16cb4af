"""The repository's import graph points one way: no Python file of the repository (the package, the console
script ``hf_nlm_cli.py``, the examples, the benchmarks, the reference cards' generator, the tests) imports,
directly or through others, a module that imports it back, and each module of the package imports only its own
layer and those below. Imports inside functions count as much as those at the top of a file (they are how
circles hide), and so does a module path written as a string (``"hf_nlm.data.corpora:load_brown"``, a registry
entry imported when used), so the graph is read from the source with ``ast``, not from ``sys.modules``.

Imports of other packages inside functions are allowed only for the optional or heavy dependencies of
:data:`DEFERRED_DEPENDENCIES`, each with the reason it is deferred."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_nlm"
#: The folders of scripts beside the package; a script imports its neighbours by their bare name.
SCRIPT_FOLDERS = ("examples", "benchmarks", "model_cards", "tests")
CONSOLE_SCRIPT = "hf_nlm_cli"

#: The other packages a module of hf_nlm may import inside a function, and why they wait until then.
DEFERRED_DEPENDENCIES = {
    "matplotlib": "only the plots draw; seconds to import",
    "evaluate": "the metrics are evaluate modules; loading evaluate pulls datasets, pandas and pyarrow",
    "datasets": "only the corpus loaders and dataset builders need it; import hf_nlm stays without it",
    "pyarrow": "only the corpus loaders' tables need it; the corpus registry (the hf-nlm parser) loads "
               "without it",
    "huggingface_hub": "only the Hub upload and the card metadata need its model-card classes",
    "transformers": "the command line and the Auto-class registration import it when they run",
    "torch": "the command line builds its parser without torch",
    "logging": "standard library, used once",
    "shlex": "standard library, used once",
    "psutil": "optional: the free memory where /proc/meminfo cannot be read",
    "selenium": "a dev dependency: only the web demo's browser test and screenshots drive a browser",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> list[Path]:
    found = [*sorted(PACKAGE.rglob("*.py")), ROOT / f"{CONSOLE_SCRIPT}.py"]
    for folder in SCRIPT_FOLDERS:
        found += sorted(p for p in (ROOT / folder).rglob("*.py") if "fixtures" not in p.parts)
    return found


MODULES = {module_name(p): p for p in _sources()}
#: A module path written as a string: ``"hf_nlm.x.y"`` or ``"hf_nlm.x.y:attribute"``.
MODULE_STRING = re.compile(r"^((?:hf_nlm|hf_nlm_cli)(?:\.[A-Za-z_]\w*)*)(?::[A-Za-z_]\w*)?$")


def in_package(module: str) -> bool:
    return module == "hf_nlm" or module.startswith("hf_nlm.")


def imported_names(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names an import statement of ``module`` reaches (``from pkg import sub`` reaches
    ``pkg.sub`` when that is a module; a script's ``import common`` reaches its neighbour
    ``benchmarks.common``)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level:
        package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names]
    else:
        base = node.module or ""
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                 for alias in node.names]
    if not in_package(module) and module != CONSOLE_SCRIPT:
        folder = module.rpartition(".")[0]
        names = [f"{folder}.{name}" if f"{folder}.{name.split('.')[0]}" in MODULES else name
                 for name in names]
    return names


def nearest_module(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """``(module -> the repository's modules it imports or names as a string, [(package module, other package
    imported inside a function)])``."""
    graph: dict[str, set[str]] = defaultdict(set)
    deferred: list[tuple[str, str]] = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = MODULE_STRING.match(node.value)
                if match and match.group(1) in MODULES and match.group(1) != module:
                    graph[module].add(match.group(1))
                continue
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in imported_names(module, node):
                target = nearest_module(name)
                if target and target != module and (target in MODULES):
                    graph[module].add(target)
                elif (in_package(module) and id(node) not in top_level and name
                      and name.split(".")[0] != "hf_nlm"):
                    deferred.append((module, name.split(".")[0]))
    return graph, deferred


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    graph, _ = import_graph()
    found = cycles(graph)
    detail = [" -> ".join(f"{a}->{sorted(graph[a] & set(c))}" for a in c) for c in found]
    assert not found, f"import cycles: {detail}"


def test_the_cycle_finder_finds_a_cycle():
    # The check above can fail: a circle of three modules, and a fourth outside it.
    graph = {"hf_nlm.models": {"hf_nlm.modeling_utils"}, "hf_nlm.modeling_utils": {"hf_nlm.heads"},
             "hf_nlm.heads": {"hf_nlm.models"}, "hf_nlm.trees": {"hf_nlm.heads"}}
    assert cycles(graph) == [["hf_nlm.heads", "hf_nlm.modeling_utils", "hf_nlm.models"]]


def test_function_level_imports_read_the_source():
    # A function-level relative import is an edge: evaluation's scorer imports the models' base class at the
    # top, and hub's card writing is imported inside save_pretrained.
    graph, _ = import_graph()
    assert "hf_nlm.modeling_utils" in graph["hf_nlm.evaluation.scoring"]
    assert "hf_nlm.hub.model_card" in graph["hf_nlm.modeling_utils"]


#: The layers, first to last; a module may import its own layer and those before it. Within ``data``: what the
#: corpora share, then the corpus modules (``data.corpora``), the registry that collects them and the
#: downloader that reads it, then the rest of ``data`` (token streams, batching), which may read the registry.
#: The model cards of ``hub`` receive a corpus's card from their caller: they import no corpus. Above the
#: package: the console script, then the scripts that use the package (examples, benchmarks, the cards'
#: generator, tests).
LAYERS = (
    "hf_nlm.saved_files", "hf_nlm.remote_code", "hf_nlm.tokenization", "hf_nlm.trees", "hf_nlm.heads",
    "hf_nlm.hub",
    "hf_nlm.cache_utils", "hf_nlm.generation",
    "hf_nlm.configuration_utils", "hf_nlm.modeling_utils", "hf_nlm.models", "hf_nlm.saved_run", "hf_nlm",
    "hf_nlm.data.reading", "hf_nlm.data.splits", "hf_nlm.data.file_stream", "hf_nlm.data.fetching",
    "hf_nlm.data.corpus", "hf_nlm.data.storylines", "hf_nlm.data.stories", "hf_nlm.data.corpora",
    "hf_nlm.data.registry", "hf_nlm.data.download", "hf_nlm.data",
    "hf_nlm.metrics", "hf_nlm.evaluation", "hf_nlm.ngram", "hf_nlm.training", "hf_nlm.story", "hf_nlm.plots",
    "hf_nlm.app", "hf_nlm.cli", CONSOLE_SCRIPT, "examples", "benchmarks", "model_cards", "tests",
)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the longest layer name that is ``module`` or a package above it."""
    matches = [i for i, name in enumerate(LAYERS) if module == name or module.startswith(name + ".")]
    assert matches, f"{module} is in no layer of LAYERS"
    return max(matches, key=lambda i: len(LAYERS[i]))


def test_layers_import_only_downwards():
    """tokenization -> trees -> heads -> hub -> modeling_utils -> models -> data -> evaluation -> training
    -> (story, plots, app, cli) -> the console script -> the scripts: no module imports a module of a later
    layer, and the scripts do not import one another across folders."""
    graph, _ = import_graph()
    wrong = sorted((m, t) for m, targets in graph.items() for t in targets
                   if layer_of(t) > layer_of(m) or (layer_of(t) == layer_of(m) >= layer_of("examples")
                                                     and t.split(".")[0] != m.split(".")[0]))
    assert not wrong, f"imports of a later layer: {wrong}"


def test_only_the_console_script_and_the_tests_import_the_command_line():
    """The library, the web demo, the examples and the benchmarks call the library; ``hf_nlm.cli`` only
    translates arguments for the console script."""
    graph, _ = import_graph()
    cli = {m for m in MODULES if m == "hf_nlm.cli" or m.startswith("hf_nlm.cli.")}
    wrong = sorted((m, t) for m, targets in graph.items() for t in targets & cli
                   if m not in cli and m != CONSOLE_SCRIPT and not m.startswith("tests."))
    assert not wrong, f"imports of hf_nlm.cli outside the command line: {wrong}"


def test_strings_naming_modules_are_edges():
    graph, _ = import_graph()
    assert "hf_nlm.cli.train" in graph[CONSOLE_SCRIPT]  # an import inside a function
    names = [MODULE_STRING.match(text)
             for text in ("hf_nlm.training.spec:DataSpec", "hf_nlm.training", "hf_nlm_x", "x")]
    assert [m and m.group(1) for m in names] == ["hf_nlm.training.spec", "hf_nlm.training", None, None]


def test_every_module_is_in_a_layer():
    assert all(layer_of(m) is not None for m in MODULES)
    assert {"hf_nlm_cli", "examples.train_lm", "benchmarks.common", "tests.test_import_graph"} <= set(MODULES)


def test_deferred_imports_are_listed():
    _, deferred = import_graph()
    unlisted = sorted({(m, p) for m, p in deferred if p not in DEFERRED_DEPENDENCIES})
    assert not unlisted, f"packages imported inside functions but not in DEFERRED_DEPENDENCIES: {unlisted}"


def test_layer_of_takes_the_longest_name():
    assert (layer_of("hf_nlm.hub.model_card") < layer_of("hf_nlm.data.reading")
            < layer_of("hf_nlm.data.corpora.brown"))
    assert (layer_of("hf_nlm.data.corpora.brown") < layer_of("hf_nlm.data.registry")
            < layer_of("hf_nlm.data.lm"))
    assert layer_of("hf_nlm.models.nplm.modeling_nplm") < layer_of("hf_nlm") < layer_of("hf_nlm.cli.recipes")
