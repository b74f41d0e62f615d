"""Workspace trust (core.trust): which files a command runs, the states, the record on disk."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.trust import (
    MISSING,
    NOT_A_FILE,
    TRUST_FILE,
    TrustState,
    WorkspaceTrust,
    digest,
    named_files,
    shell_words,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "scripts").mkdir(parents=True)
    (workspace / "scripts" / "check.sh").write_text("echo check\n")
    (workspace / "data.txt").write_text("data\n")
    return workspace


def names(ws: Path, argv: list[str], cwd: Path | None = None) -> list[str]:
    found = named_files(shell_words(argv), cwd=cwd or ws, workspace=ws)
    return sorted(str(p.relative_to(ws)) for p in found)


def test_shell_words_splits_commands_at_separators() -> None:
    assert shell_words(["/bin/sh", "-c", "cd x && ./run.sh 'a b' | tee log; echo"]) == [
        ["cd", "x"],
        ["./run.sh", "a b"],
        ["tee", "log"],
        ["echo"],
    ]
    assert shell_words(["/usr/bin/python3", "server.py"]) == [["/usr/bin/python3", "server.py"]]
    assert shell_words(["bash", "-c", "echo 'unbalanced"]) == [["echo", "'unbalanced"]]


def test_named_files_are_existing_workspace_files_programs_and_scripts(ws: Path) -> None:
    # existing files, wherever they appear (also after "=")
    assert names(ws, ["bash", "-c", "scripts/check.sh --in=data.txt"]) == [
        "data.txt",
        "scripts/check.sh",
    ]
    # a program by path and an interpreter's script count even when missing...
    assert names(ws, ["/bin/sh", "-c", "./later.sh; python3 -u tools/srv.py"]) == [
        "later.sh",
        "tools/srv.py",
    ]
    # ...other missing words do not (a log file the hook writes), nor bare program names
    assert names(ws, ["/bin/sh", "-c", "echo hi >> out/hook.log; python3 -m tools.srv"]) == []
    assert names(ws, ["node", "-e", "x"]) == [] and names(ws, ["python3"]) == []
    # outside the workspace: not ours to track (the agent cannot write there)
    assert names(ws, ["/usr/bin/env", "bash", str(ws.parent / "elsewhere.sh")]) == []
    # relative to the command's cwd; ".." that leaves and re-enters the workspace
    assert names(ws, ["sh", "check.sh"], cwd=ws / "scripts") == ["scripts/check.sh"]
    assert names(ws, ["sh", "../ws/data.txt"]) == ["data.txt"]
    # ``VAR=value prog``: the program after the assignments
    assert names(ws, ["/bin/sh", "-c", "MODE=x ./go.sh"]) == ["go.sh"]


def test_a_link_into_the_workspace_counts(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "door").symlink_to(ws)
    via = tmp_path / "door" / "scripts" / "check.sh"
    assert named_files([["sh", str(via)]], cwd=ws, workspace=ws) == [via]


def test_digest_of_missing_folders_fifos_and_files(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    os.mkfifo(tmp_path / "fifo")
    assert digest(tmp_path / "f") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert digest(tmp_path / "nope") == MISSING
    assert digest(tmp_path) == NOT_A_FILE
    assert digest(tmp_path / "fifo") == NOT_A_FILE  # never blocks on a reader


def test_states_through_allow_edit_and_revoke(ws: Path, tmp_path: Path) -> None:
    control = ws / ".mcp.json"
    control.write_text('{"mcpServers": {}}')
    script = ws / "scripts" / "check.sh"
    trust = WorkspaceTrust(record=tmp_path / TRUST_FILE, workspace=ws)

    first = trust.check(control, [script])
    assert first.state is TrustState.UNTRUSTED and not first.trusted
    trust.allow([first])
    assert trust.check(control, [script]).state is TrustState.TRUSTED

    script.write_text("echo evil\n")
    changed = trust.check(control, [script])
    assert changed.state is TrustState.CHANGED and changed.changed == (str(script),)
    script.write_text("echo check\n")  # the same content again: trusted again
    assert trust.check(control, [script]).trusted

    control.write_text('{"mcpServers": {"x": {"command": "x"}}}')
    assert trust.check(control, [script]).changed == (str(control),)
    control.write_text('{"mcpServers": {}}')
    # a file it now names that was not named when trusted
    assert trust.check(control, [script, ws / "data.txt"]).changed == (str(ws / "data.txt"),)

    trust.revoke([control])
    assert trust.check(control, [script]).state is TrustState.UNTRUSTED
    with pytest.raises(ConfigError, match="not trusted"):
        trust.revoke([control])


def test_the_record_is_private_and_replaced_whole(ws: Path, tmp_path: Path) -> None:
    control = ws / ".mcp.json"
    control.write_text("{}")
    record = tmp_path / TRUST_FILE
    trust = WorkspaceTrust(record=record, workspace=ws)
    trust.allow([trust.check(control, [])])
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    doc = json.loads(record.read_text())
    assert doc["version"] == 1 and set(doc["files"]) == {str(control)}
    assert sorted(p.name for p in tmp_path.iterdir()) == [TRUST_FILE, "ws"]  # no temp file left


def test_an_invalid_record_trusts_nothing_and_is_never_overwritten(
    ws: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    control = ws / ".mcp.json"
    control.write_text("{}")
    record = tmp_path / TRUST_FILE
    record.write_text('{"version": 1, "files": {"x": {"no": "sha"}}}')
    trust = WorkspaceTrust(record=record, workspace=ws)
    with caplog.at_level(logging.ERROR, logger="core.trust"):
        assert trust.check(control, []).state is TrustState.UNTRUSTED
        assert trust.check(control, []).state is TrustState.UNTRUSTED
    assert len([r for r in caplog.records if "not valid" in r.getMessage()]) == 1
    with pytest.raises(ConfigError, match="is not valid"):
        trust.allow([trust.check(control, [])])
    assert record.read_text() == '{"version": 1, "files": {"x": {"no": "sha"}}}'


def test_no_record_trusts_nothing(ws: Path) -> None:
    (ws / ".mcp.json").write_text("{}")
    trust = WorkspaceTrust(record=None, workspace=ws)
    assert trust.check(ws / ".mcp.json", []).state is TrustState.UNTRUSTED
    with pytest.raises(ConfigError):
        trust.allow([trust.check(ws / ".mcp.json", [])])


def test_an_ignored_file_is_logged_once_per_content(
    ws: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    control = ws / ".mcp.json"
    control.write_text("{}")
    trust = WorkspaceTrust(record=tmp_path / TRUST_FILE, workspace=ws)
    with caplog.at_level(logging.WARNING, logger="core.trust"):
        for _ in range(3):
            trust.note(trust.check(control, []), what="MCP")
        control.write_text('{"mcpServers": {}}')
        trust.note(trust.check(control, []), what="MCP")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert f"familiar trust allow {control} --home {tmp_path}" in lines[0]
    assert "state=untrusted" in lines[0]
