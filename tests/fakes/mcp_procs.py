"""Server definitions and processes of the fake MCP server (`tests.fakes.mcp_tools_server`)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from core.mcp import McpServerConfig

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.fakes.mcp_tools_server"


def stdio_server(**overrides: Any) -> McpServerConfig:
    """A stdio definition of the fake server (``env`` overrides are added to PYTHONPATH);
    ``eager`` unless overridden, so tests that wait for it at start need no first turn."""
    env = {"PYTHONPATH": str(ROOT), **overrides.pop("env", {})}
    fields: dict[str, Any] = {"cwd": str(ROOT), "eager": True, **overrides}
    return McpServerConfig(command=sys.executable, args=["-m", MODULE], env=env, **fields)


@contextlib.asynccontextmanager
async def http_server(*, sse: bool = False) -> AsyncIterator[str]:
    """Run the fake server over streamable HTTP (or legacy SSE) in a subprocess; yield its
    URL (``/mcp``, or ``/sse``)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        MODULE,
        "--sse" if sse else "--http",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            line = (await proc.stdout.readline()).decode()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/{'sse' if sse else 'mcp'}"
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()
