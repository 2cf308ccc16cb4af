"""The package's import graph points one way: no module of ``hf_nlm`` imports, directly or through others,
a module that imports it back. Imports inside functions count as much as those at the top of a file (they
are how circles hide), so the graph is read from the source with ``ast``, not from ``sys.modules``.

Imports of other packages inside functions are allowed only for the optional or heavy dependencies of
:data:`DEFERRED_DEPENDENCIES`, each with the reason it is deferred."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hf_nlm"

#: The other packages a module of hf_nlm may import inside a function, and why they wait until then.
DEFERRED_DEPENDENCIES = {
    "matplotlib": "only the plots draw; seconds to import",
    "evaluate": "the metrics are evaluate modules; loading evaluate pulls datasets, pandas and pyarrow",
    "datasets": "only the corpus loaders and dataset builders need it; import hf_nlm stays without it",
    "huggingface_hub": "only the Hub upload and the card metadata need its model-card classes",
    "transformers": "the command line and the Auto-class registration import it when they run",
    "torch": "the command line builds its parser without torch",
    "logging": "standard library, used once",
    "shlex": "standard library, used once",
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


@pytest.mark.parametrize("layer, below", [
    ("hf_nlm.tokenization", ("hf_nlm.heads", "hf_nlm.modeling_utils", "hf_nlm.models", "hf_nlm.data")),
    ("hf_nlm.heads", ("hf_nlm.modeling_utils", "hf_nlm.models", "hf_nlm.data", "hf_nlm.evaluation")),
    ("hf_nlm.models", ("hf_nlm.data", "hf_nlm.evaluation", "hf_nlm.training", "hf_nlm.cli")),
    ("hf_nlm.data", ("hf_nlm.evaluation", "hf_nlm.training", "hf_nlm.cli", "hf_nlm.story", "hf_nlm.plots")),
    ("hf_nlm.evaluation", ("hf_nlm.training", "hf_nlm.cli", "hf_nlm.story", "hf_nlm.plots")),
    ("hf_nlm.training", ("hf_nlm.cli", "hf_nlm.story", "hf_nlm.plots")),
])
def test_layers_import_only_downwards(layer, below):
    """tokenization -> heads -> modeling_utils -> models -> data -> evaluation -> training -> (cli, story, plots):
    a layer imports nothing of a layer after it."""
    graph, _ = import_graph()
    wrong = sorted((m, t) for m, targets in graph.items() if m == layer or m.startswith(layer + ".")
                   for t in targets if any(t == b or t.startswith(b + ".") for b in below))
    assert not wrong, f"{layer} imports a later layer: {wrong}"


def test_deferred_imports_are_listed():
    _, deferred = import_graph()
    unlisted = sorted({(m, p) for m, p in deferred if p not in DEFERRED_DEPENDENCIES})
    assert not unlisted, f"packages imported inside functions but not in DEFERRED_DEPENDENCIES: {unlisted}"
