"""``familiar trust``, and what ``mcp list``, ``status`` and ``doctor`` say about the
workspace's hook and MCP files: the real CLI on a real home, real processes."""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

# Imported before CliRunner swaps sys.stderr: the MCP SDK's stdio client binds its
# default error log (a real file) when first imported.
import core.mcp.connection  # noqa: F401
from core.trust import TRUST_FILE
from gateway.cli import app
from tests.daemon_env import REPO
from tests.integration.control_stack import ControlStack, control_stack
from tests.unit.test_cli_client import LoopThread

EX_USAGE = 64


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))  # short: a socket lives here
    (path / "config.toml").write_text('[provider]\nkind = "scripted"\n')
    (path / "workspace").mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def plant(home: Path) -> dict[str, Path]:
    """A hook file and an MCP file in the workspace whose commands run workspace scripts
    that leave a marker (the MCP one then serves the fake MCP tools)."""
    ws = home / "workspace"
    marks = {"hook": home / "hook-ran", "mcp": home / "mcp-ran"}
    (ws / "hook.sh").write_text(f"touch {marks['hook']}\n")
    python = shlex.quote(sys.executable)
    (ws / "server.sh").write_text(
        f"touch {marks['mcp']}\nexec {python} -m tests.fakes.mcp_tools_server\n"
    )
    hooks = ws / ".github" / "hooks"
    hooks.mkdir(parents=True)
    doc = {"version": 1, "hooks": {"preToolUse": [{"bash": "sh hook.sh"}]}}
    (hooks / "plant.json").write_text(json.dumps(doc))
    server = {"command": "/bin/sh", "args": ["${workspaceFolder}/server.sh"]}
    server["env"] = {"PYTHONPATH": str(REPO)}  # type: ignore[assignment]
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"planted": server}}))
    return {**marks, "hooks_file": hooks / "plant.json", "mcp_file": ws / ".mcp.json"}


def listed(home: Path) -> dict[str, dict[str, Any]]:
    result = cli("trust", "--json", "--home", str(home))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["workspace"] == str(home / "workspace")
    assert doc["record"] == str(home / TRUST_FILE)
    return {Path(f["path"]).name: f for f in doc["files"]}


def test_trust_lists_every_file_with_its_state_and_what_it_runs(home: Path) -> None:
    files = plant(home)
    ws = home / "workspace"
    before = listed(home)
    assert set(before) == {"plant.json", ".mcp.json"}
    assert {f["state"] for f in before.values()} == {"untrusted"}
    assert before["plant.json"]["kind"] == "hooks"
    assert before["plant.json"]["named"] == [str(ws / "hook.sh")]
    assert before[".mcp.json"]["named"] == [str(ws / "server.sh")]
    assert before[".mcp.json"]["allow"] == (
        f"familiar trust allow {files['mcp_file']} --home {home}"
    )

    allowed = cli("trust", "allow", str(files["mcp_file"]), "--home", str(home))
    assert allowed.exit_code == 0, allowed.output
    assert f"trusted {files['mcp_file']}" in allowed.stdout and "server.sh" in allowed.stdout
    assert listed(home)[".mcp.json"]["state"] == "trusted"

    (ws / "server.sh").write_text((ws / "server.sh").read_text() + "# edited\n")
    after = listed(home)[".mcp.json"]
    assert (after["state"], after["changed"]) == ("changed", [str(ws / "server.sh")])

    table = cli("trust", "--home", str(home))
    assert table.exit_code == 0
    text = " ".join(table.stdout.split())
    assert "untrusted" in text and "changed" in text and ".github/hooks/plant.json" in text
    assert f"trust it with: familiar trust allow {files['hooks_file']} --home {home}" in text


def test_allow_takes_workspace_relative_paths_and_home_before_the_subcommand(
    home: Path,
) -> None:
    plant(home)
    result = cli("trust", "--home", str(home), "allow", ".github/hooks/plant.json", ".mcp.json")
    assert result.exit_code == 0, result.output
    assert {f["state"] for f in listed(home).values()} == {"trusted"}


@pytest.mark.parametrize(
    "bad",
    [
        "workspace/hook.sh",  # a script, not a control file
        "workspace/notes/.mcp.json",  # the name, not the place
        "mcp.json",  # $FAMILIAR_HOME/mcp.json: the operator's own, needs no trust
        "workspace/.vscode/mcp.json",  # missing
    ],
)
def test_allow_refuses_what_is_not_a_present_control_file_and_changes_nothing(
    home: Path, bad: str
) -> None:
    files = plant(home)
    (home / "workspace" / "notes").mkdir()
    (home / "workspace" / "notes" / ".mcp.json").write_text("{}")
    (home / "mcp.json").write_text("{}")
    result = cli("trust", "allow", str(files["mcp_file"]), str(home / bad), "--home", str(home))
    assert result.exit_code == EX_USAGE, result.output
    message = " ".join(result.stderr.split())
    assert str(home / bad) in message and "nothing was trusted" in message
    if bad.endswith(".vscode/mcp.json"):
        assert "no such file" in message
    else:
        assert "is not a hook or MCP file of the workspace" in message
    assert not (home / TRUST_FILE).exists()


def test_revoke_drops_a_file_and_refuses_one_that_is_not_trusted(home: Path) -> None:
    files = plant(home)
    assert cli("trust", "allow", ".mcp.json", "--home", str(home)).exit_code == 0
    record = (home / TRUST_FILE).read_text()
    refused = cli("trust", "revoke", ".mcp.json", ".github/hooks/plant.json", "--home", str(home))
    assert refused.exit_code == EX_USAGE
    assert "not trusted: .github/hooks/plant.json" in refused.stderr
    assert (home / TRUST_FILE).read_text() == record
    files["mcp_file"].unlink()  # a file that is gone can still be revoked
    revoked = cli("trust", "revoke", str(files["mcp_file"]), "--home", str(home))
    assert revoked.exit_code == 0, revoked.output
    assert json.loads((home / TRUST_FILE).read_text())["files"] == {}


def test_an_invalid_record_is_reported_and_left_alone(home: Path) -> None:
    plant(home)
    (home / TRUST_FILE).write_text("[not a record]")
    result = cli("trust", "allow", ".mcp.json", "--home", str(home))
    assert result.exit_code == 1
    assert "is not valid" in " ".join(result.stderr.split())
    assert (home / TRUST_FILE).read_text() == "[not a record]"


def test_mcp_list_never_starts_an_untrusted_server(home: Path) -> None:
    files = plant(home)
    result = cli("mcp", "list", "--json", "--home", str(home))
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["from"].startswith("probed here") and out["servers"] == []
    (untrusted,) = out["untrusted"]
    assert untrusted["name"] == "planted" and untrusted["state"] == "untrusted"
    assert untrusted["allow"] == f"familiar trust allow {files['mcp_file']} --home {home}"
    table = cli("mcp", "list", "--home", str(home))
    assert "planted" in table.stdout and "untrusted" in table.stdout
    assert "trust it with: familiar trust allow" in " ".join(table.stderr.split())
    assert not files["mcp"].exists()

    assert cli("trust", "allow", ".mcp.json", "--home", str(home)).exit_code == 0
    trusted = json.loads(cli("mcp", "list", "--json", "--home", str(home)).stdout)
    (server,) = trusted["servers"]
    assert (server["name"], server["state"]) == ("planted", "ready")
    assert trusted["untrusted"] == [] and files["mcp"].exists()

    files["mcp"].unlink()
    server_sh = home / "workspace" / "server.sh"
    server_sh.write_text(server_sh.read_text().replace("touch", "touch /dev/null"))
    changed = json.loads(cli("mcp", "list", "--json", "--home", str(home)).stdout)
    assert changed["servers"] == [] and changed["untrusted"][0]["state"] == "changed"
    assert not files["mcp"].exists()


def test_doctor_warns_with_the_command_that_trusts_the_file(home: Path) -> None:
    files = plant(home)
    result = cli("doctor", "--home", str(home))
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    expected = (
        f"! workspace mcp file: {files['mcp_file']} is ignored: untrusted; trust it with: "
        f"familiar trust allow {files['mcp_file']} --home {home}"
    )
    assert expected in lines, result.stdout
    assert any(line.startswith("! workspace hooks file: ") for line in lines)
    assert cli("trust", "allow", ".mcp.json", ".github/hooks/plant.json", "--home", str(home))
    calm = cli("doctor", "--home", str(home)).stdout
    assert "✓ workspace hook and MCP files: 2 trusted" in calm and "is ignored" not in calm


@pytest.fixture
def daemon(home: Path) -> Iterator[ControlStack]:
    thread = LoopThread()
    stack = contextlib.AsyncExitStack()
    try:
        yield thread.run(stack.enter_async_context(control_stack(home)))
    finally:
        thread.run(stack.aclose())
        thread.close()


def test_status_shows_the_ignored_files(home: Path, daemon: ControlStack) -> None:
    files = plant(home)
    result = cli("status", "--json", "--home", str(home))
    assert result.exit_code == 0, result.output
    ignored = json.loads(result.stdout)["trust"]["untrusted"]
    assert {(Path(f["path"]), f["state"]) for f in ignored} == {
        (files["mcp_file"], "untrusted"),
        (files["hooks_file"], "untrusted"),
    }
    text = " ".join(cli("status", "--home", str(home)).stdout.split())
    assert f"trust: {files['mcp_file']} is ignored (untrusted); trust it with:" in text
    cli("trust", "allow", ".mcp.json", ".github/hooks/plant.json", "--home", str(home))
    assert json.loads(cli("status", "--json", "--home", str(home)).stdout)["trust"] == {
        "untrusted": []
    }
