"""Our code uses the public API of its dependencies only, and core/ tunes no interpreter knob.

A dependency's ``_``-prefixed names (``typer._click``, ``Connection._handle_dbapi_exception``)
may change in any release without notice; pinning below the next release was the price
(issue 24). Read from the source with `ast`, three ways in:

- an import of a private module or name of a dependency (``from typer._click import x``,
  ``from sqlalchemy.sql import _x``);
- an attribute chain from a name a dependency bound (``sqlalchemy.engine._x``,
  ``Connection._y`` after ``from sqlalchemy import Connection``);
- any ``obj._name`` where no module of ours defines ``_name``: then it is someone
  else's. The standard library is not a dependency here, and namedtuple's public
  ``_replace``/``_asdict``/``_fields`` (and SQLAlchemy's ``Row._mapping``, documented
  public) are allowed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("core", "channels", "gateway", "tests")
SHIPPED = ("core", "channels", "gateway")
"""What is checked: the code users run (tests/fakes stand in for services and may reach
deeper into an SDK to do so)."""
PUBLIC_UNDERSCORE = frozenset({"_replace", "_asdict", "_fields", "_make", "_mapping", "_t"})
"""Public despite the underscore: namedtuple's API (so as not to clash with field names),
and SQLAlchemy's `Row._mapping` / `Row._t`, documented as public."""
PENDING: dict[str, str] = {}
"""Files still known to break the rule, and why they may for now. An entry whose file
has become clean fails the test, so it cannot outlive its reason."""
INTERPRETER_WIDE = frozenset(
    {
        "sys.setswitchinterval",
        "sys.setrecursionlimit",
        "gc.set_threshold",
        "gc.freeze",
        "gc.disable",
    }
)
"""Process-wide settings a library layer must leave to the program that runs it."""


def _modules() -> Iterator[Path]:
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _foreign(module: str) -> bool:
    top = module.partition(".")[0]
    return bool(top) and top not in OURS and top not in sys.stdlib_module_names


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _trees() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(), str(p)) for p in _modules()}


def _our_names(trees: dict[str, ast.Module]) -> set[str]:
    """Every name our code defines: functions, classes, attributes set, parameters."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).partition(".")[0])
    return names


def _bound(tree: ast.Module) -> dict[str, str]:
    """Local names bound by importing a dependency, and what they were bound to."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _foreign(alias.name):
                    local = alias.asname or alias.name.partition(".")[0]
                    bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and not node.level and _foreign(node.module or ""):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _chain(node: ast.Attribute) -> tuple[ast.expr, list[str]]:
    attrs: list[str] = []
    value: ast.expr = node
    while isinstance(value, ast.Attribute):
        attrs.append(value.attr)
        value = value.value
    return value, attrs[::-1]


def _findings(path: str, tree: ast.Module, ours: set[str]) -> Iterator[Finding]:
    bound = _bound(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _foreign(alias.name) and any(map(_private, alias.name.split("."))):
                    yield Finding(path, node.lineno, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level and _foreign(node.module or ""):
            module = node.module or ""
            names = [a.name for a in node.names]
            if any(map(_private, module.split("."))) or any(map(_private, names)):
                yield Finding(path, node.lineno, f"from {module} import {', '.join(names)}")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            root, attrs = _chain(node)
            if node.attr in PUBLIC_UNDERSCORE:
                continue
            if isinstance(root, ast.Name) and root.id in bound:
                # Only the last attribute: a longer chain is found at its own node.
                yield Finding(path, node.lineno, f"{bound[root.id]}.{'.'.join(attrs)}")
            elif node.attr not in ours and not _stdlib_root(root, tree):
                yield Finding(path, node.lineno, f"{ast.unparse(node)} (defined by none of ours)")


def _stdlib_root(root: ast.expr, tree: ast.Module) -> bool:
    if not isinstance(root, ast.Name):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.asname or alias.name.partition(".")[0]) == root.id:
                    return alias.name.partition(".")[0] in sys.stdlib_module_names
    return False


@pytest.fixture(scope="module")
def trees() -> dict[str, ast.Module]:
    return _trees()


def test_no_private_api_of_a_dependency(trees: dict[str, ast.Module]) -> None:
    ours = _our_names(trees)
    found = [f for path, tree in trees.items() for f in _findings(path, tree, ours)]
    unexpected = [str(f) for f in found if f.path not in PENDING]
    assert unexpected == [], "private API of a dependency:\n" + "\n".join(unexpected)
    still = {f.path for f in found}
    cleaned = [path for path in PENDING if path in trees and path not in still]
    assert cleaned == [], f"clean now, take them out of PENDING: {cleaned}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from typer._click.core import Context", "from typer._click.core import Context"),
        ("import typer._coercion", "import typer._coercion"),
        ("from sqlalchemy.sql import _x", "from sqlalchemy.sql import _x"),
        ("import typer.core\ntyper.core._TyperParameter", "typer.core._TyperParameter"),
        ("from sqlalchemy import Connection\nConnection._y", "sqlalchemy.Connection._y"),
        ("def f(conn):\n    conn._handle_dbapi_exception()", "conn._handle_dbapi_exception"),
    ],
)
def test_the_check_finds_each_form(source: str, expected: str) -> None:
    found = [str(f) for f in _findings("probe.py", ast.parse(source), set())]
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos._exit(0)",
        "def f(row):\n    return row._mapping, row._replace(a=1)",
        "class A:\n    def __init__(self):\n        self._own = 1\n    def f(self):\n"
        "        return self._own",
        "import click\nclick.__version__",
    ],
)
def test_the_check_leaves_ours_and_public_names_alone(source: str) -> None:
    tree = ast.parse(source)
    assert list(_findings("probe.py", tree, _our_names({"probe.py": tree}))) == []


def test_core_sets_no_interpreter_wide_knob(trees: dict[str, ast.Module]) -> None:
    calls = [
        f"{path}:{node.lineno}: {ast.unparse(node.func)}"
        for path, tree in trees.items()
        if path.startswith("core/")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in INTERPRETER_WIDE
    ]
    assert calls == []
