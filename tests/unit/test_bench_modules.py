"""The benchmarks run on demand, not in CI: at least keep them importable, so a rename in
the code they drive breaks the test run instead of the next ``make bench``."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import tests.bench

MODULES = sorted(m.name for m in pkgutil.iter_modules(tests.bench.__path__))


def test_there_are_benchmarks() -> None:
    assert "bench_throughput" in MODULES and len(MODULES) >= 7


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_module_imports(name: str) -> None:
    importlib.import_module(f"tests.bench.{name}")


def test_make_bench_runs_every_benchmark() -> None:
    # docs/benchmarks.md's figures are what `make bench` prints: a benchmark left out of the
    # target has figures nobody reruns with it.
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    run = set(re.findall(r"-m tests\.bench\.(\w+)", recipe))
    assert run == {name for name in MODULES if name.startswith("bench_")}
