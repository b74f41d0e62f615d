"""The control routes of the web panel: a login URL for ``familiar ui``, the System
page's report and its trust action (real control socket, real core)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web
from click.testing import CliRunner

from core.app import CoreApp
from gateway.cli import app
from gateway.config import FamiliarConfig
from gateway.control.client import ControlClient, ControlError
from gateway.system_routes import add_system_routes
from gateway.ui.app import add_login_route
from gateway.ui.auth import UiAuth
from gateway.ui_config import UiConfig
from tests.integration.control_stack import control_stack


@asynccontextmanager
async def gateway(home: Path, ui: UiAuth | None) -> AsyncIterator[ControlClient]:
    def routes(app: web.Application, core: CoreApp) -> None:
        add_login_route(app, lambda: ui)
        add_system_routes(app, home, FamiliarConfig(), core)

    async with control_stack(home, more_routes=routes), ControlClient(home) as client:
        yield client


async def test_a_login_url_for_the_operator(tmp_path: Path) -> None:
    ui = UiAuth(UiConfig(login_token_seconds=30))
    ui.listening_on("127.0.0.1", 8787)
    async with gateway(tmp_path, ui) as client:
        answer = await client.ui_login("alice")
        with pytest.raises(ControlError) as refused:
            await client.ui_login("../alice")
    assert refused.value.status == 400
    assert answer["expires_in"] == 30
    prefix = "http://127.0.0.1:8787/ui/login?token="
    assert answer["url"].startswith(prefix)
    session = ui.redeem(answer["url"].removeprefix(prefix))
    assert session is not None and session.operator == "alice"


@pytest.mark.parametrize("why", ["[ui] enabled = false", "HTTP is not served here"])
async def test_no_login_url_while_the_panel_is_off(tmp_path: Path, why: str) -> None:
    ui = None if why.startswith("[ui]") else UiAuth(UiConfig())  # (no address to name)
    async with gateway(tmp_path, ui) as client:
        with pytest.raises(ControlError, match="the web panel is off") as refused:
            await client.ui_login("alice")
    assert refused.value.status == 404


async def test_system_report_and_trusting_a_workspace_file(tmp_path: Path) -> None:
    hooks = tmp_path / "workspace" / ".github" / "hooks"
    hooks.mkdir(parents=True)
    planted = hooks / "planted.json"
    planted.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [{"bash": "true"}]}}))
    async with gateway(tmp_path, None) as client:
        logging.getLogger("tests.ui").warning("something went %s", "wrong")
        before = await client.system()
        with pytest.raises(ControlError) as unknown:
            await client.trust_allow(str(tmp_path / "workspace" / "AGENTS.md"))
        (listed,) = before["trust"]["files"]
        planted.write_text(planted.read_text() + "\n")  # changed after it was listed
        with pytest.raises(ControlError, match="changed since it was shown") as stale:
            await client.trust_allow(str(planted), listed["fingerprint"])
        unchanged = await client.system()
        trusted = await client.trust_allow(
            str(planted), unchanged["trust"]["files"][0]["fingerprint"]
        )
        after = await client.system()

    assert unknown.value.status == 404
    assert stale.value.status == 409
    assert [f["state"] for f in unchanged["trust"]["files"]] == ["untrusted"]
    assert unchanged["trust"]["files"][0]["fingerprint"] != listed["fingerprint"]
    assert "general-purpose" in [a["id"] for a in before["agents"]]
    assert before["skills"]["enabled"] is True
    assert [(f["path"], f["state"]) for f in before["trust"]["files"]] == [
        (str(planted), "untrusted")
    ]
    assert {"level": "warning", "logger": "tests.ui", "message": "something went wrong"} in [
        {k: e[k] for k in ("level", "logger", "message")} for e in before["errors"]
    ]
    assert trusted["trusted"] == str(planted)
    assert [f["state"] for f in after["trust"]["files"]] == ["trusted"]


async def test_familiar_ui_prints_the_url_first(tmp_path: Path) -> None:
    ui = UiAuth(UiConfig())
    ui.listening_on("127.0.0.1", 8787)
    async with gateway(tmp_path, ui):
        runner = CliRunner()
        args = ["ui", "--no-browser", "--home", str(tmp_path)]
        done = await asyncio.to_thread(runner.invoke, app, args)
        as_json = await asyncio.to_thread(runner.invoke, app, [*args, "--json"])
    assert done.exit_code == 0, done.output
    first = done.stdout.splitlines()[0]
    assert first.startswith("http://127.0.0.1:8787/ui/login?token=")
    assert "works once" in done.stderr
    assert json.loads(as_json.stdout)["url"].startswith("http://127.0.0.1:8787/ui/login?token=")


def test_familiar_ui_without_a_gateway_exits_2(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["ui", "--no-browser", "--home", str(tmp_path)])
    assert done.exit_code == 2
    assert done.stdout == ""
