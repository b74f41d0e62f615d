"""What exec plants in the workspace cannot make the daemon read outside it.

The daemon reads workspace files with its own rights: identity files into every
prompt, memory files into global memory, HEARTBEAT.md. A command run through the
sandboxed ``exec`` can create symbolic links and FIFOs there; none of them may lead
the daemon to a secret, block it, or make it read without end.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from core.agent.context import ContextBuilder, ContextConfig
from core.memory.config import MemoryConfig
from core.memory.files import MemoryFileIndexer
from core.scheduling.heartbeat import _read as read_heartbeat
from core.tools.base import ToolContext
from core.tools.config import ExecConfig
from core.tools.exec import ExecRunner
from core.workspace_read import read_workspace_text

SECRET = "sk-live-do-not-leak-4b1d"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "config.toml").write_text(f"[provider]\napi_key = '{SECRET}'\n")
    (tmp_path / "workspace" / "memory").mkdir(parents=True)
    return tmp_path


def test_reads_refuse_links_fifos_and_devices(home: Path) -> None:
    ws = home / "workspace"
    (ws / "plain.md").write_text("hello")
    (ws / "AGENTS.md").symlink_to(home / "config.toml")
    (ws / "memory" / "zero.md").symlink_to("/dev/zero")
    os.mkfifo(ws / "memory" / "pipe.md")
    (ws / "linked").symlink_to(home)
    assert read_workspace_text(ws, "plain.md", max_bytes=100).text == "hello"  # type: ignore[union-attr]
    assert read_workspace_text(ws, "AGENTS.md", max_bytes=100) is None
    assert read_workspace_text(ws, "memory/zero.md", max_bytes=100) is None
    assert read_workspace_text(ws, "memory/pipe.md", max_bytes=100) is None  # no block
    assert read_workspace_text(ws, "linked/config.toml", max_bytes=100) is None
    assert read_workspace_text(ws, "../config.toml", max_bytes=100) is None
    (ws / "big.md").write_text("x" * 1000)
    big = read_workspace_text(ws, "big.md", max_bytes=10)
    assert big is not None and big.text == "x" * 10 and big.truncated


async def test_links_planted_through_exec_reach_no_prompt_and_no_memory(home: Path) -> None:
    ws = home / "workspace"
    runner = ExecRunner(ExecConfig())
    ctx = ToolContext(workspace=ws, session_key="webhook:ci:x", channel="webhook")
    out = await runner.run(
        'ln -sf "$(dirname "$PWD")/config.toml" memory/notes.md && '
        'ln -sf "$(dirname "$PWD")/config.toml" AGENTS.md && '
        'ln -sf "$(dirname "$PWD")/config.toml" HEARTBEAT.md && '
        "mkfifo memory/pipe.md && ln -s /dev/zero memory/zero.md && echo planted",
        ctx,
    )
    assert "planted" in out
    prompt = await ContextBuilder(workspace=ws, config=ContextConfig()).system_prompt(
        session_key="cli:default", channel="cli", tools=[]
    )
    assert SECRET not in prompt
    indexer = MemoryFileIndexer(store=None, workspace=ws, config=MemoryConfig())  # type: ignore[arg-type]
    changes = await asyncio.wait_for(asyncio.to_thread(indexer._changes), 10)
    assert all(SECRET not in "".join(c.chunks or []) for c in changes)
    assert await asyncio.to_thread(read_heartbeat, ws / "HEARTBEAT.md") is None
