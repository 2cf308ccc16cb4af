"""The package's import graph points one way: no module of ``hf_nlm`` imports, directly or through others,
a module that imports it back. Imports inside functions count as much as those at the top of a file (they
are how circles hide), so the graph is read from the source with ``ast``, not from ``sys.modules``.

Imports of other packages inside functions are allowed only for the optional or heavy dependencies of
:data:`DEFERRED_DEPENDENCIES`, each with the reason it is deferred."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hf_nlm"

#: The other packages a module of hf_nlm may import inside a function, and why they wait until then.
DEFERRED_DEPENDENCIES = {
    "matplotlib": "only the plots draw; seconds to import",
    "evaluate": "the metrics are evaluate modules; loading evaluate pulls datasets, pandas and pyarrow",
    "datasets": "only the corpus loaders and dataset builders need it; import hf_nlm stays without it",
    "pyarrow": "only the corpus loaders' tables need it; the corpus registry (the hf-nlm parser) loads without it",
    "huggingface_hub": "only the Hub upload and the card metadata need its model-card classes",
    "transformers": "the command line and the Auto-class registration import it when they run",
    "torch": "the command line builds its parser without torch",
    "logging": "standard library, used once",
    "shlex": "standard library, used once",
    "psutil": "optional: the free memory where /proc/meminfo cannot be read",
    "selenium": "a dev dependency: only the web demo's browser test and screenshots drive a browser",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_names(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names an import statement of ``module`` reaches (``from pkg import sub`` reaches ``pkg.sub``
    when that is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def nearest_module(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """``(module -> the hf_nlm modules it imports, [(module, other package imported inside a function)])``."""
    graph: dict[str, set[str]] = defaultdict(set)
    deferred: list[tuple[str, str]] = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in imported_names(module, node):
                if name.split(".")[0] == "hf_nlm":
                    target = nearest_module(name)
                    if target and target != module:
                        graph[module].add(target)
                elif id(node) not in top_level and name:
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
    assert not found, f"import cycles in hf_nlm: {detail}"


def test_the_cycle_finder_finds_a_cycle():
    # The check above can fail: a circle of three modules, and a fourth outside it.
    graph = {"hf_nlm.models": {"hf_nlm.modeling_utils"}, "hf_nlm.modeling_utils": {"hf_nlm.heads"},
             "hf_nlm.heads": {"hf_nlm.models"}, "hf_nlm.trees": {"hf_nlm.heads"}}
    assert cycles(graph) == [["hf_nlm.heads", "hf_nlm.modeling_utils", "hf_nlm.models"]]


def test_function_level_imports_read_the_source():
    # A function-level relative import is an edge: evaluation's scorer imports the models' base class at the top,
    # and hub's card writing is imported inside save_pretrained.
    graph, _ = import_graph()
    assert "hf_nlm.modeling_utils" in graph["hf_nlm.evaluation.scoring"]
    assert "hf_nlm.hub.model_card" in graph["hf_nlm.modeling_utils"]


#: The layers, first to last; a module may import its own layer and those before it. Within ``data``: what the
#: corpora share, then the corpus modules (``data.corpora``), the registry that collects them and the downloader
#: that reads it, then the rest of ``data`` (token streams, batching), which may read the registry. The model cards
#: of ``hub`` receive a corpus's card from their caller: they import no corpus.
LAYERS = (
    "hf_nlm.tokenization", "hf_nlm.trees", "hf_nlm.heads", "hf_nlm.hub", "hf_nlm.cache_utils",
    "hf_nlm.configuration_utils", "hf_nlm.modeling_utils", "hf_nlm.models", "hf_nlm",
    "hf_nlm.data.reading", "hf_nlm.data.splits", "hf_nlm.data.file_stream", "hf_nlm.data.fetching",
    "hf_nlm.data.corpus", "hf_nlm.data.storylines", "hf_nlm.data.stories", "hf_nlm.data.corpora",
    "hf_nlm.data.registry", "hf_nlm.data.download", "hf_nlm.data",
    "hf_nlm.metrics", "hf_nlm.evaluation", "hf_nlm.ngram", "hf_nlm.training", "hf_nlm.story", "hf_nlm.plots",
    "hf_nlm.cli", "hf_nlm.app",
)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the longest layer name that is ``module`` or a package above it."""
    matches = [i for i, name in enumerate(LAYERS) if module == name or module.startswith(name + ".")]
    assert matches, f"{module} is in no layer of LAYERS"
    return max(matches, key=lambda i: len(LAYERS[i]))


def test_layers_import_only_downwards():
    """tokenization -> trees -> heads -> hub -> modeling_utils -> models -> data -> evaluation -> training ->
    (story, plots, cli): no module imports a module of a later layer."""
    graph, _ = import_graph()
    wrong = sorted((m, t) for m, targets in graph.items() for t in targets if layer_of(t) > layer_of(m))
    assert not wrong, f"imports of a later layer: {wrong}"


def test_every_module_is_in_a_layer():
    assert all(layer_of(m) is not None for m in MODULES)


def test_deferred_imports_are_listed():
    _, deferred = import_graph()
    unlisted = sorted({(m, p) for m, p in deferred if p not in DEFERRED_DEPENDENCIES})
    assert not unlisted, f"packages imported inside functions but not in DEFERRED_DEPENDENCIES: {unlisted}"


def test_layer_of_takes_the_longest_name():
    assert layer_of("hf_nlm.hub.model_card") < layer_of("hf_nlm.data.reading") < layer_of("hf_nlm.data.corpora.brown")
    assert layer_of("hf_nlm.data.corpora.brown") < layer_of("hf_nlm.data.registry") < layer_of("hf_nlm.data.lm")
    assert layer_of("hf_nlm.models.nplm.modeling_nplm") < layer_of("hf_nlm") < layer_of("hf_nlm.cli.recipes")
