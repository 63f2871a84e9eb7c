"""The package's import graph (issue 12): no cycle, no edge between ``kernels`` and
``conformance``, the mutant catalogue reached only through the command lines.

Every ``import``/``from ... import`` of a ``kvcontract`` module counts, relative ones
(``from .cases import ...``) included, also inside a function (a deferred import is still
a dependency); imports under ``if TYPE_CHECKING:`` do not (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"kvcontract": ROOT, "kvcontract.spec": ROOT / "spec", "kvcontract.reference": ROOT / "reference",
                "kvcontract.conformance": ROOT / "conformance", "kvcontract.kernels": ROOT / "kernels"}


def _modules() -> dict[str, Path]:
    """Every module of the package, subpackages included (``kvcontract`` itself: its own files only)."""
    found = {}
    for package, folder in PACKAGE_DIRS.items():
        paths = folder.glob("*.py") if package == "kvcontract" else folder.rglob("*.py")
        for path in sorted(paths):
            parts = [*path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module a ``from ... import`` names, relative imports (``from .cases``) resolved."""
    if node.level == 0:
        return node.module or ""
    parts = importer.split(".") if is_package else importer.split(".")[:-1]
    base = parts[:len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(path: Path, modules: set[str], importer: str = "") -> set[str]:
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
            module = _absolute(node, importer, path.name == "__init__.py")
            names = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    names = set(modules)
    return {m: _imports(p, names, m) - {m} for m, p in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _package_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Edges between modules, leaving out each package's ``__init__`` re-exporting its own modules."""
    return {(a, b) for a, deps in graph.items() for b in deps}


def test_the_graph_sees_every_subpackage():
    graph = _graph()
    assert {"kvcontract.cli", "kvcontract.reference.merge", "kvcontract.conformance.run.session",
            "kvcontract.kernels.harness", "kvcontract.spec"} <= set(graph)


def test_no_import_cycle():
    graph = _graph()
    # A package's __init__ importing its own modules is not a cycle of design; drop those edges.
    packages = {m for m, path in _modules().items() if path.name == "__init__.py"}
    pruned = {m: {d for d in deps if not (d.startswith(m + ".") and m in packages)}
              for m, deps in graph.items()}
    assert _cycles(pruned) == []


def test_no_edge_between_kernels_and_conformance():
    edges = _package_edges(_graph())
    crossing = [(a, b) for a, b in edges
                if (a.startswith("kvcontract.kernels") and b.startswith("kvcontract.conformance"))
                or (a.startswith("kvcontract.conformance") and b.startswith("kvcontract.kernels"))]
    assert crossing == []


def test_only_command_lines_and_workers_reach_the_mutant_catalogue():
    graph = _graph()
    catalogue = {m for m in graph if m == "kvcontract.conformance.engines.mutants"
                 or m.startswith("kvcontract.conformance.engines.mutants.")}
    assert "kvcontract.conformance.engines.mutants.base" in catalogue
    importers = {m for m, deps in graph.items()
                 if deps & {"kvcontract.conformance.engines.registry", *catalogue}} - catalogue
    allowed = {"kvcontract.conformance.engines.registry", "kvcontract.conformance.power.hunt",
               "kvcontract.conformance.cli.symbolic", "kvcontract.conformance.run.tasks",
               "kvcontract.conformance.pytest_plugin",
               "kvcontract.conformance.cli.coverage", "kvcontract.conformance.cli.check",
               "kvcontract.conformance.cli.mutants", "kvcontract.conformance.power.symbolic",
               "kvcontract.conformance.power.crosshair_backend",
               "kvcontract.conformance.reports.html.plan_worker"}
    assert importers <= allowed, importers - allowed
    judging = {"kvcontract.conformance.contract.model", "kvcontract.conformance.contract.laws",
               "kvcontract.conformance.contract.laws.common", "kvcontract.conformance.contract.laws.role",
               "kvcontract.conformance.contract.laws.merge", "kvcontract.conformance.contract.laws.error",
               "kvcontract.conformance.contract.laws.uniform", "kvcontract.conformance.contract.laws.group",
               "kvcontract.conformance.contract.laws.dispatch", "kvcontract.conformance.contract.shapes",
               "kvcontract.conformance.contract.repro", "kvcontract.conformance.contract.expectations",
               "kvcontract.conformance.contract.systematic", "kvcontract.conformance.contract.strategies",
               "kvcontract.conformance.engines.protocol"}
    assert not (judging & importers)


def test_usage_errors_live_in_a_module_that_imports_nothing_of_the_kit():
    assert _graph()["kvcontract.usage"] == set()


def test_relative_imports_are_edges():
    graph = _graph()
    assert "kvcontract.kernels.cases" in graph["kvcontract.kernels.harness"]
    assert "kvcontract.kernels.protocol" in graph["kvcontract.kernels.backends"]


def test_shared_options_depend_on_no_verb():
    """``kvcontract.options`` serves the conformance verbs and ``kernels`` alike."""
    assert _graph()["kvcontract.options"] == {"kvcontract.usage"}
