"""A running gateway follows its MCP files: no restart to add, change or remove a server,
and a workspace file only once it is trusted."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gateway.cli import app
from tests.fakes.fake_openai import FakeOpenAI
from tests.fakes.mcp_procs import MODULE, ROOT
from tests.integration.test_daemon import Gateway, running, write_config
from tests.waiting import eventually

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """The daemon runs in-process."""


def mcp_json(starts: Path, **servers: dict[str, Any]) -> str:
    """An ``mcp.json`` of fake servers (each recording its starts in ``starts``)."""
    entries = {
        name: {
            "command": sys.executable,
            "args": ["-m", MODULE],
            "cwd": str(ROOT),
            "env": {"PYTHONPATH": str(ROOT), "FAKE_MCP_STARTS": str(starts), **env},
        }
        for name, env in servers.items()
    }
    return json.dumps({"mcpServers": entries})


async def servers(gw: Gateway) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in (await gw.get("/v1/status"))["mcp"]}


def starts(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def test_an_edited_home_mcp_json_takes_effect_without_a_restart(daemon_home: Path) -> None:
    home, started = daemon_home, daemon_home / "starts"
    async with FakeOpenAI() as fake:
        write_config(home, fake, "\n[mcp]\nreload_interval = 0.1\n")
        fake.script("hello")
        async with running(home) as gw:
            assert await servers(gw) == {}
            await gw.send("hi")  # the first turn: servers added from now on start at once
            (home / "mcp.json").write_text(mcp_json(started, files={}))

            async def ready(name: str, count: int) -> bool:
                found = (await servers(gw)).get(name)
                return bool(found and found["state"] == "ready") and len(starts(started)) == count

            await eventually(lambda: ready("files", 1), timeout=60, what="added server ready")
            assert "mcp__files__echo" in (await servers(gw))["files"]["tools"]

            (home / "mcp.json").write_text(mcp_json(started, files={"MARK": "2"}))
            await eventually(lambda: ready("files", 2), timeout=60, what="changed: restarted")

            (home / "mcp.json").write_text(mcp_json(started, web={}))
            await eventually(lambda: ready("web", 3), timeout=60, what="renamed")
            assert set(await servers(gw)) == {"web"}

            env = f'{{ PYTHONPATH = "{ROOT}", FAKE_MCP_STARTS = "{started}" }}'
            toml = (
                f'\n[mcp.servers.toml]\ncommand = "{sys.executable}"\nargs = ["-m", "{MODULE}"]\n'
                f'cwd = "{ROOT}"\nenv = {env}\n'
            )
            write_config(home, fake, "\n[mcp]\nreload_interval = 0.1\n" + toml)
            await eventually(lambda: ready("toml", 4), timeout=60, what="[mcp.servers] reloaded")
            (home / "config.toml").write_text("this is [not toml")
            (home / "mcp.json").unlink()  # still applied: the last good [mcp] is kept

            async def only_toml() -> bool:
                return set(await servers(gw)) == {"toml"}

            await eventually(only_toml, timeout=60, what="mcp.json removed, [mcp] kept")


async def test_a_workspace_mcp_json_is_picked_up_once_trusted(daemon_home: Path) -> None:
    home, started = daemon_home, daemon_home / "starts"
    planted = home / "workspace" / ".mcp.json"
    async with FakeOpenAI() as fake:
        write_config(home, fake, "\n[mcp]\nreload_interval = 0.1\n")
        fake.script("hello")
        async with running(home) as gw:
            await gw.send("hi")
            planted.write_text(mcp_json(started, planted={}))
            listed = await asyncio.to_thread(
                CliRunner().invoke, app, ["mcp", "list", "--json", "--home", str(home)]
            )
            assert json.loads(listed.stdout)["untrusted"][0]["name"] == "planted"
            assert await servers(gw) == {} and starts(started) == []

            trusted = await asyncio.to_thread(
                CliRunner().invoke, app, ["trust", "allow", str(planted), "--home", str(home)]
            )
            assert trusted.exit_code == 0, trusted.output

            async def ready() -> bool:
                found = (await servers(gw)).get("planted")
                return bool(found and found["state"] == "ready")

            await eventually(ready, timeout=60, what="the trusted file's server started")

            planted.write_text(mcp_json(started, planted={"MARK": "edited"}))  # untrusted now

            async def gone() -> bool:
                return "planted" not in await servers(gw)

            await eventually(gone, timeout=60, what="the edited file's server stopped")
    assert len(starts(started)) == 1
