"""``familiar --help`` and ``familiar send`` import only what they need (issue 15: lean CLI).

Each case runs the real entry point in a fresh interpreter and lists which heavy modules
ended up in ``sys.modules``: the store (SQLAlchemy), aiohttp, the providers' SDKs,
prompt_toolkit, the MCP SDK, the channels' SDKs, the config models.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

NEVER = (
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "aiohttp",
    "httpx",
    "prompt_toolkit",
    "mcp",
    "slack_bolt",
    "microsoft_agents",
    "core.messages",
    "core.store",
    "gateway.config",
)
"""Not imported by ``--help`` or ``send`` (each pulls in a tenth of a second or more)."""
NOT_FOR_HELP = (*NEVER, "pydantic", "asyncio", "gateway.control.client", "rich.console")
"""The top-level help lists commands from the registry: no command module is imported,
and help is plain text (click's own, no rich)."""
NOT_FOR_SEND = (*NEVER, "pydantic", "rich.console")
"""``send`` prints plain text, and click converts its parameters (no pydantic)."""

_PROBE = """
import json, sys
args, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
from gateway.cli import main
sys.argv = ["familiar", *args]
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(m for m in heavy if m in sys.modules)}))
"""


def _imports(args: list[str], heavy: tuple[str, ...], tmp_path: Path) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAMILIAR_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args), json.dumps(heavy)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    result = json.loads(done.stdout.splitlines()[-1])
    return result["code"], result["loaded"]


@pytest.mark.parametrize("args", [["--help"], []])
def test_help_imports_no_command(args: list[str], tmp_path: Path) -> None:
    code, loaded = _imports(args, NOT_FOR_HELP, tmp_path)
    assert loaded == []
    assert code == (0 if args else 64)


def test_send_imports_only_the_control_client(tmp_path: Path) -> None:
    # No daemon on this home: the whole path runs (argument checks, the client, the
    # connection attempt, the "no gateway" hint) and exits 2.
    args = ["send", "hi", "--session", "s", "--timeout", "30", "--home", str(tmp_path)]
    code, loaded = _imports(args, NOT_FOR_SEND, tmp_path)
    assert code == 2
    assert loaded == []


@pytest.mark.parametrize(
    "command", ["send", "status", "sessions", "schedule", "memory", "tasks", "service", "init"]
)
def test_a_command_help_imports_not_the_daemon(command: str, tmp_path: Path) -> None:
    code, loaded = _imports([command, "--help"], (*NEVER, "pydantic", "rich.console"), tmp_path)
    assert code == 0
    assert loaded == []
