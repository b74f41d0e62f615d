"""The gateway's MCP servers as ``familiar status`` (``mcp``), ``mcp list`` and ``doctor``
show them, whichever process runs them."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from core.app import CoreApp
from core.mcp.board import McpBoard, merge_views

__all__ = ["mcp_report"]


def _names(processes: Iterable[dict[str, Any]]) -> dict[int, str]:
    return {p["pid"]: str(p.get("name")) for p in processes if isinstance(p.get("pid"), int)}


def _process(owner: str, names: dict[int, str]) -> str:
    """``agent-1`` for an owner ``host/pid/start`` of this host in the process table,
    else ``host/pid``."""
    host, _, rest = owner.partition("/")
    pid = rest.partition("/")[0]
    if host == socket.gethostname() and pid.isdigit() and int(pid) in names:
        return names[int(pid)]
    return f"{host}/{pid}"


async def mcp_report(
    core: CoreApp, *, runs_agent: bool, processes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One entry per server (`merge_views`): this process's own servers when it runs the
    agent, else what the agent processes published (`McpBoard`)."""
    names = _names(processes)
    if runs_agent:
        me = names.get(os.getpid(), "single")
        return merge_views((me, asdict(status)) for status in core.mcp.status())
    views = await McpBoard(core.store).views()
    return merge_views((_process(owner, names), status) for owner, status in views)
