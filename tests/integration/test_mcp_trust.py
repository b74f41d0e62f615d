"""A trusted workspace MCP server is checked again at every start: one whose script changed
while it ran is not restarted. A real stdio server, a real crash."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from core.mcp import McpConfig
from core.mcp.manager import McpManager
from core.mcp.trust import trust_verifier
from core.tools.registry import ToolRegistry
from gateway.mcp import read_mcp
from tests.daemon_env import REPO
from tests.integration.test_mcp_client import call
from tests.trusting import trust_workspace
from tests.waiting import eventually


async def test_a_server_whose_script_changed_is_not_restarted(tmp_path: Path) -> None:
    home, ws = tmp_path, tmp_path / "ws"
    ws.mkdir()
    script = ws / "server.sh"
    python = shlex.quote(sys.executable)
    script.write_text(f"exec {python} -m tests.fakes.mcp_tools_server\n")
    server = {"command": "sh", "args": [str(script)], "env": {"PYTHONPATH": str(REPO)}}
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"ws": server}}))
    trust = trust_workspace(home, ws)
    config = read_mcp(McpConfig(restart_backoff=0.1), home=home, workspace=ws, env=os.environ)
    assert list(config.config.servers) == ["ws"] and config.untrusted == []

    registry = ToolRegistry()
    mgr = McpManager(
        config=config.config, registry=registry, cwd=home, verify=trust_verifier(trust, cwd=home)
    )
    mgr.start(every=True)
    try:
        await mgr.wait_settled(60)
        assert mgr.status()[0].state == "ready"
        script.write_text(script.read_text() + "# edited while it runs\n")
        crashed = await call(registry, tmp_path, "mcp__ws__crash")
        assert crashed.is_error

        def refused() -> bool:
            (status,) = mgr.status()
            return status.state == "failed" and "changed" in (status.error or "")

        await eventually(refused, timeout=60, what="the restart refused")
        (status,) = mgr.status()
        assert status.starts == 1
        assert f"run familiar trust allow {ws / '.mcp.json'} --home {home}" in str(status.error)
    finally:
        await mgr.stop()
