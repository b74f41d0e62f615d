"""The MCP reference server ``@modelcontextprotocol/server-everything``, from npm.

Installed once (pinned) into a cache folder outside the repository:
``$FAMILIAR_TEST_NPM_CACHE``, default ``~/.cache/familiar-tests/npm``. Without node and
npm, or when the install fails, the tests that need it skip with the reason, except
under ``CI=true``, where they fail: CI must run them.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = "@modelcontextprotocol/server-everything"
VERSION = "2026.8.31"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true needs {PACKAGE}: {reason}")
    pytest.skip(f"{PACKAGE} unavailable: {reason}")


def _cache() -> Path:
    found = os.environ.get("FAMILIAR_TEST_NPM_CACHE")
    return Path(found) if found else Path.home() / ".cache" / "familiar-tests" / "npm"


def _installed(root: Path) -> Path | None:
    package = root / "node_modules" / PACKAGE
    try:
        version = json.loads((package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    entry = package / "dist" / "index.js"
    return entry if version == VERSION and entry.is_file() else None


def everything_command() -> list[str]:
    """``node <...>/dist/index.js stdio``, installing the package first if needed."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        _unavailable("node and npm are not on PATH")
    assert node is not None and npm is not None
    root = _cache()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers install once
        entry = _installed(root)
        if entry is None:
            env = {**os.environ, "npm_config_cache": str(root / ".npm-cache")}
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(root),
                 f"{PACKAGE}@{VERSION}"],
                capture_output=True, text=True, timeout=600, env=env,
            )  # fmt: skip
            entry = _installed(root)
            if done.returncode != 0 or entry is None:
                _unavailable(f"npm install failed: {done.stderr.strip()[-500:]}")
    assert entry is not None
    return [node, str(entry), "stdio"]
