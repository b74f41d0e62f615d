"""requirements.lock and requirements-dev.lock hold what pyproject.toml asks for.

`make run` installs requirements.lock and `make test` requirements-dev.lock on top, so a
dependency added to pyproject.toml, dropped from it, or pinned past the locked version
must come with a new lock (`make lock`). Read offline: each lock's packages and versions
and uv's ``# via`` notes, which name ``familiar (pyproject.toml)`` for what the project
itself asks for.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "familiar (pyproject.toml)"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
DEV_TOOLS = ("pytest", "mypy", "ruff", "hypothesis", "mkdocs", "import-linter", "uv")
"""Test, lint and docs tools: in the dev lock only (`make run` installs none of them)."""


@dataclass
class Lock:
    """One lock file: each package's versions (one per marker) and who asked for it."""

    versions: dict[str, set[Version]] = field(default_factory=dict)
    wanted_by: dict[str, set[str]] = field(default_factory=dict)
    hashed: set[str] = field(default_factory=set)

    @classmethod
    def read(cls, path: Path) -> Lock:
        lock, current = cls(), ""
        for line in path.read_text().splitlines():
            if pin := _PIN.match(line):
                current = canonicalize_name(pin[1])
                lock.versions.setdefault(current, set()).add(Version(pin[2]))
                lock.wanted_by.setdefault(current, set())
            elif line.strip().startswith("--hash=sha256:"):
                lock.hashed.add(current)
            elif current and (note := line.strip()).startswith("#"):
                via = note.lstrip("#").strip().removeprefix("via").strip()
                if via:
                    lock.wanted_by[current].add(via)
        return lock

    def direct(self) -> set[str]:
        return {name for name, who in self.wanted_by.items() if PROJECT in who}


def _project() -> dict[str, list[Requirement]]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = meta.get("optional-dependencies", {})
    return {
        "runtime": [Requirement(r) for r in meta["dependencies"]],
        "dev": [Requirement(r) for r in meta["dependencies"] + extras.get("dev", [])],
    }


LOCKS = {"runtime": "requirements.lock", "dev": "requirements-dev.lock"}


def stale(lock: Lock, requirements: list[Requirement]) -> list[str]:
    """Why ``lock`` does not hold ``requirements``; empty when it does."""
    wanted = {canonicalize_name(r.name): r for r in requirements}
    problems = [f"not locked: {wanted[n]}" for n in sorted(set(wanted) - lock.direct())]
    problems += [f"locked, not asked for: {n}" for n in sorted(lock.direct() - set(wanted))]
    for name, requirement in wanted.items():
        # One version per marker set (e.g. an older release for an older Python).
        outside = [
            v for v in lock.versions.get(name, ()) if not requirement.specifier.contains(v, True)
        ]
        problems += [f"{requirement} does not admit {name} {v}" for v in outside]
    return problems


@pytest.mark.parametrize("kind", list(LOCKS))
def test_the_lock_holds_exactly_what_pyproject_asks_for(kind: str) -> None:
    problems = stale(Lock.read(ROOT / LOCKS[kind]), _project()[kind])
    assert problems == [], f"{LOCKS[kind]} is stale (run `make lock`): {problems}"


@pytest.mark.parametrize("kind", list(LOCKS))
def test_every_locked_package_is_pinned_with_its_hashes(kind: str) -> None:
    lock = Lock.read(ROOT / LOCKS[kind])
    assert lock.versions, f"no packages in {LOCKS[kind]}"
    assert set(lock.versions) == lock.hashed


def test_the_dev_lock_keeps_the_runtime_versions() -> None:
    run, dev = Lock.read(ROOT / LOCKS["runtime"]), Lock.read(ROOT / LOCKS["dev"])
    changed = {name: (v, dev.versions.get(name)) for name, v in run.versions.items()}
    assert {n: vs for n, vs in changed.items() if vs[0] != vs[1]} == {}


def test_the_runtime_lock_holds_no_dev_tool() -> None:
    run, dev = Lock.read(ROOT / LOCKS["runtime"]), Lock.read(ROOT / LOCKS["dev"])
    assert [t for t in DEV_TOOLS if t in run.versions] == []
    assert [t for t in DEV_TOOLS if t not in dev.versions] == []


def test_a_stale_lock_is_found(tmp_path: Path) -> None:
    text = (ROOT / LOCKS["runtime"]).read_text()
    runtime = _project()["runtime"]
    cases = {
        "not locked: click": re.sub(r"(?ms)^click==.*?(?=^\S)", "", text),
        "does not admit click 7.1.2": re.sub(r"(?m)^click==\S+", "click==7.1.2", text),
        "locked, not asked for: six": text
        + "six==1.17.0 \\\n    # via familiar (pyproject.toml)\n",
    }
    for expected, lock_text in cases.items():
        (tmp_path / "x.lock").write_text(lock_text)
        problems = stale(Lock.read(tmp_path / "x.lock"), runtime)
        assert any(expected in p for p in problems), (expected, problems)
