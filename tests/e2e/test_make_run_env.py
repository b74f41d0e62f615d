"""`make run`'s environment holds what running needs and no test, lint or docs tool.

A fresh clone of this checkout (its committed HEAD) under /tmp gets ``make venv-run``
(the venv `make run` builds before it starts the gateway) run from another directory
with no stdin; then its packages are listed. The runtime lock pins them, so this also
proves requirements.lock installs as it is (hashes checked) on this Python.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_locks import DEV_TOOLS, LOCKS, Lock

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _tools() -> None:
    missing = [tool for tool in ("git", "make") if shutil.which(tool) is None]
    if missing and os.environ.get("CI") != "true":
        pytest.skip(f"needs {', '.join(missing)}")


def test_make_run_installs_only_the_runtime_lock(tmp_path: Path) -> None:
    _tools()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PYTHON"] = shutil.which("python3") or sys.executable
    made = subprocess.run(
        ["make", "-C", str(clone), "venv-run"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=1200,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    python = clone / ".venv" / "bin" / "python"
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    installed = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout)}
    assert [tool for tool in DEV_TOOLS if tool in installed] == []
    locked = Lock.read(clone / LOCKS["runtime"]).versions
    assert installed["click"] in {str(v) for v in locked["click"]}
    helped = subprocess.run(
        [str(clone / ".venv" / "bin" / "familiar"), "--help"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert helped.returncode == 0 and "send" in helped.stdout, helped.stderr
