"""The System page: processes (live), MCP servers and their tools, channels, trusting a
workspace hook file, recent errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Dialog, Page, expect

from tests.daemon_env import REPO
from tests.e2e.ui.conftest import UiGateway, spawn_gateway
from tests.waiting import eventually_sync

pytestmark = pytest.mark.slow

MCP = (
    "[mcp.servers.tools]\n"
    f'command = "{sys.executable}"\nargs = ["-m", "tests.fakes.mcp_tools_server"]\n'
    f'cwd = "{REPO}"\nenv = {{ PYTHONPATH = "{REPO}" }}\neager = true\n'
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiGateway]:
    with spawn_gateway(tmp_path_factory, extra_config=MCP, single=False) as spawned:
        yield spawned


def plant_hook(gateway: UiGateway) -> Path:
    """An untrusted workspace hook file (it would run ``sh hook.sh`` before a tool)."""
    workspace = gateway.home / "workspace"
    (workspace / "hook.sh").write_text("echo hook ran\n")
    hooks = workspace / ".github" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    path = hooks / "planted.json"
    path.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [{"bash": "sh hook.sh"}]}}))
    return path


def trust_state(gateway: UiGateway, path: Path) -> str:
    listed = json.loads(gateway.familiar("trust", "--json").stdout)
    (found,) = [f for f in listed["files"] if f["path"] == str(path)]
    return str(found["state"])


def mcp_ready(gateway: UiGateway) -> bool:
    servers = gateway.control(lambda client: client.status())["mcp"]
    return any(s["name"] == "tools" and s["state"] == "ready" for s in servers)


def test_system_page_lists_processes_servers_and_trusts_a_file(
    gateway: UiGateway,
    page: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    planted = plant_hook(gateway)
    eventually_sync(lambda: mcp_ready(gateway), timeout=60, what="the MCP server is ready")
    page.goto(gateway.url("/ui/login?token=not-a-token"))  # leaves a warning in the log
    login(page)
    page.goto(gateway.url("/ui/system"))

    process = page.locator("#processes tr[data-process]")
    expect(process).to_have_count(1)  # "main", with no channel in a process of its own
    expect(process).to_contain_text("running")
    status = gateway.control(lambda client: client.status())
    expect(process).to_contain_text(str(status["pid"]))

    expect(page.get_by_role("heading", name="Store")).to_be_visible()
    expect(page.locator("section", has_text="Channels")).to_contain_text("cli")
    server = page.locator("#mcp-h ~ details", has_text="tools")
    expect(server).to_contain_text("ready")
    server.locator("summary").click()
    expect(server).to_contain_text("echo")
    expect(page.locator("section", has_text="Agents")).to_contain_text("yes")
    expect(page.locator("section", has_text="Recent errors")).to_contain_text("ui login refused")

    row = page.locator(f'#trust tr[data-file="{planted}"]')
    expect(row).to_contain_text("untrusted")
    assert trust_state(gateway, planted) == "untrusted"
    shot(page, "system")

    asked: list[str] = []

    def accept(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    # The script the hook runs changes after the page showed it: what the operator
    # reviewed is not what would run, so nothing is trusted.
    (gateway.home / "workspace" / "hook.sh").write_text("echo something else\n")
    row.get_by_role("button", name="Trust this file").click()
    expect(row.locator("[data-error]")).to_contain_text("changed since it was shown")
    assert trust_state(gateway, planted) == "untrusted"

    page.reload()
    row = page.locator(f'#trust tr[data-file="{planted}"]')
    row.get_by_role("button", name="Trust this file").click()
    expect(page.locator("#trust [role=status]")).to_contain_text(f"Trusted {planted}")
    expect(page.locator(f'#trust tr[data-file="{planted}"]')).to_contain_text("trusted")
    assert trust_state(gateway, planted) == "trusted"
    assert len(asked) == 2 and str(planted) in asked[1] and "fingerprint" in asked[1]


def test_processes_stream_live(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    """The process table's stream sends the table as HTML (``replace`` events)."""
    login(page)
    first = page.evaluate(
        """() => new Promise((resolve, reject) => {
            const source = new EventSource("/ui/system/live");
            source.addEventListener("replace", (event) => { source.close(); resolve(event.data); });
            source.onerror = () => { source.close(); reject(new Error("stream failed")); };
        })"""
    )
    assert "data-process" in first and "running" in first
