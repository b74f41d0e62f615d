"""The benchmarks run on demand, not in CI: at least keep them importable, so a rename in
the code they drive breaks the test run instead of the next ``make bench``."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import tests.bench

MODULES = sorted(m.name for m in pkgutil.iter_modules(tests.bench.__path__))


def test_there_are_benchmarks() -> None:
    assert "bench_throughput" in MODULES and len(MODULES) >= 7


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_module_imports(name: str) -> None:
    importlib.import_module(f"tests.bench.{name}")
