"""No import cycles in core, channels and gateway, counting every import statement.

import-linter's layers contract sees module-level imports between the three packages;
this test reads every ``import`` in every module (at module level, inside functions and
under ``TYPE_CHECKING`` alike, since a cycle hidden in a function is still a cycle) and
fails on a cycle between modules or between sibling packages (``core.agent`` and
``core.hooks``, say), printing the path of each. ``import a.b.c`` counts as an import
of ``a.b.c`` only: the package ``__init__`` modules Python runs on the way are left
out, since a package that re-exports its own modules would otherwise be a cycle.
"""

from __future__ import annotations

import ast
import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "channels", "gateway")


# node -> {imported node: where the first such import is, "core/agent/loop.py:28"}
Graph = dict[str, dict[str, str]]


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if "migrations" in parts:
                # alembic runs these by file path (core.store.migrate points it at the
                # folder): scripts that import the packages' tables, imported by no
                # module. Named apart, their imports count as those of a client on top.
                parts = ("(alembic)", *parts[parts.index("migrations") + 1 :])
            found[".".join(parts)] = path
    return found


def _imported_names(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        anchor = package.split(".")
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    # `from a import b` imports module a.b when b is a submodule, else a name from a
    return [f"{base}.{alias.name}" for alias in node.names]


def _module_graph(modules: dict[str, Path]) -> Graph:

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {name: {} for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for imported in _imported_names(node, package):
                target = resolve(imported)
                if target is not None and target != name:
                    where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
                    graph[name].setdefault(target, where)
    return graph


def _sibling_graph(modules: Graph) -> Graph:
    """Edges between sibling packages and modules: an import from ``core.agent.loop`` of
    ``core.hooks.runner`` is an edge ``core.agent -> core.hooks``. Imports between a
    package and its own submodules are not sibling edges."""
    graph: Graph = {}
    for source, targets in modules.items():
        for target, where in targets.items():
            a, b = source.split("."), target.split(".")
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            if common == len(a) or common == len(b):
                continue
            left, right = ".".join(a[: common + 1]), ".".join(b[: common + 1])
            graph.setdefault(left, {}).setdefault(right, where)
            graph.setdefault(right, {})
    return graph


def _components(graph: Graph) -> Iterator[set[str]]:
    """Strongly connected components with more than one node (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    yield component


def _shortest_cycle(graph: Graph, component: set[str]) -> list[str]:
    """The shortest cycle through the component's members, as a closed path."""
    best: list[str] = []
    for start in sorted(component):
        parents: dict[str, str] = {}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if start in graph[node]:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                cycle = [*reversed(path), start]
                if not best or len(cycle) < len(best):
                    best = cycle
                break
            for child in graph[node]:
                if child in component and child not in parents and child != start:
                    parents[child] = node
                    queue.append(child)
    return best


def _describe(graph: Graph, cycle: list[str]) -> str:
    steps = [f"{a} -> {b} ({graph[a][b]})" for a, b in itertools.pairwise(cycle)]
    return "\n    ".join(steps)


def _cycles(graph: Graph, known: Iterable[frozenset[str]] = ()) -> list[str]:
    skip = set(known)
    return [
        _describe(graph, _shortest_cycle(graph, component))
        for component in _components(graph)
        if frozenset(component) not in skip
    ]


MODULES = _module_graph(_modules())


def test_the_graph_sees_imports_inside_functions() -> None:
    # `familiar gateway` imports gateway.daemon only inside its function (the daemon's
    # imports stay out of every other command's start); a graph that misses it would
    # pass every check below without looking.
    assert "gateway.daemon" in MODULES["gateway.commands.run"]


def test_no_cycle_between_modules() -> None:
    cycles = _cycles(MODULES)
    assert not cycles, "import cycles between modules:\n  " + "\n  ".join(cycles)


def test_no_cycle_between_packages() -> None:
    cycles = _cycles(_sibling_graph(MODULES))
    assert not cycles, "import cycles between packages:\n  " + "\n  ".join(cycles)


def test_a_cycle_is_reported_with_its_path() -> None:
    graph: Graph = {"a": {"b": "a:1"}, "b": {"c": "b:2"}, "c": {"a": "c:3", "d": "c:4"}, "d": {}}
    assert _cycles(graph) == ["a -> b (a:1)\n    b -> c (b:2)\n    c -> a (c:3)"]
    assert _cycles({"a": {"b": "a:1"}, "b": {}}) == []
