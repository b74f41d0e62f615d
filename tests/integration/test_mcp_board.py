"""The ``mcp_status`` board: what agent processes publish, and what the front reads
(on SQLite and PostgreSQL: the ``store`` fixture)."""

from __future__ import annotations

import socket
from pathlib import Path

from core.bus.owner import make_owner
from core.mcp import McpConfig
from core.mcp.board import STALE_AFTER, McpBoard, McpPublisher, merge_views
from core.mcp.manager import McpManager, ServerStatus
from core.store.engine import Store
from core.tools.registry import ToolRegistry
from tests.fakes.mcp_procs import stdio_server
from tests.waiting import eventually


def status(name: str, state: str, **fields: object) -> ServerStatus:
    base: dict[str, object] = {
        "name": name, "source": "mcp.json", "transport": "stdio", "enabled": True,
        "state": state, "error": None, "tools": (), "starts": 1 if state == "ready" else 0,
    }  # fmt: skip
    return ServerStatus(**{**base, **fields})  # type: ignore[arg-type]


async def test_the_front_sees_live_processes_only(store: Store) -> None:
    host = socket.gethostname()
    now = [1_000_000.0]
    live = McpBoard(store, clock=lambda: now[0])
    dead = McpBoard(store, owner=f"{host}/999999999/1", clock=lambda: now[0])
    far = McpBoard(store, owner="elsewhere/42/7", clock=lambda: now[0])
    await dead.publish([status("files", "ready")])
    await far.publish([status("files", "failed", error="exited with status 1")])
    now[0] += STALE_AFTER + 1
    await live.publish([status("files", "ready"), status("web", "starting")])
    owners = {owner for owner, _ in await live.views()}
    assert owners == {make_owner()}  # the dead pid's rows and the silent host's are left out
    await far.publish([status("files", "failed", error="exited with status 1")])
    seen = await live.views()
    assert {owner for owner, _ in seen} == {make_owner(), "elsewhere/42/7"}
    merged = {s["name"]: s for s in merge_views(seen)}
    assert merged["files"]["state"] == "failed" and merged["files"]["starts"] == 1
    assert merged["files"]["error"] == "exited with status 1"
    assert [p["state"] for p in merged["files"]["processes"]] == ["failed", "ready"]
    assert merged["web"]["state"] == "starting"
    await live.publish([status("files", "ready")])  # replaced, not added to
    assert {s["name"] for _, s in await live.views() if _ == make_owner()} == {"files"}
    await live.withdraw()
    assert {owner for owner, _ in await live.views()} == {"elsewhere/42/7"}
    await dead.publish([status("files", "ready")])
    assert await live.sweep() == 1  # what a killed process left
    now[0] += STALE_AFTER + 1
    assert await live.sweep() == 1  # the silent host's
    assert await live.views() == []


async def test_a_publisher_follows_its_managers_servers(store: Store, tmp_path: Path) -> None:
    config = McpConfig(servers={"fake": stdio_server()})
    mgr = McpManager(config=config, registry=ToolRegistry(), cwd=tmp_path)
    board = McpBoard(store)
    publisher = McpPublisher(mgr, board)
    await publisher.start()
    try:
        assert [s["state"] for _, s in await board.views()] == ["stopped"]  # at once
        mgr.start(every=True)

        async def ready() -> bool:
            return [s["state"] for _, s in await board.views()] == ["ready"]

        await eventually(ready, timeout=60, what="the ready state published")
        (view,) = await board.views()
        assert "mcp__fake__echo" in view[1]["tools"]
    finally:
        await publisher.stop()
        await mgr.stop()
    assert await board.views() == []
