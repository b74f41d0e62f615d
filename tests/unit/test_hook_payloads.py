"""Hook packs among the hook files, payload fields per dialect, transcripts' lines and names."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.event_data import AssistantMessage, HookError, ToolComplete, ToolStart, UserMessage
from core.events import Event
from core.hooks import HookEvent, default_sources, load_hooks
from core.hooks.dialects import Facts
from core.hooks.loader import hook_files
from core.hooks.payloads import payload
from core.hooks.transcript import _newest_within, render, transcript_name
from core.tools.control_files import control_entry
from gateway.config import load_config, workspace_dir
from gateway.plugins import ChannelPlugins
from gateway.trust import workspace_control
from tests.trusting import trust_workspace


def _write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _hooks(event: str, command: str) -> dict[str, Any]:
    return {"version": 1, "hooks": {event: [{"type": "command", "bash": command}]}}


def test_packs_load_beside_loose_files_and_their_other_json_does_not(tmp_path: Path) -> None:
    ws, user = tmp_path / "ws", tmp_path / "home-hooks"
    loose = _write(ws / ".github/hooks/policy.json", _hooks("preToolUse", "echo loose"))
    pack = _write(ws / ".github/hooks/audit/hooks.json", _hooks("sessionEnd", "echo pack"))
    _write(ws / ".github/hooks/audit/settings.json", _hooks("preToolUse", "exit 1"))
    _write(ws / ".github/hooks/audit/nested/deeper/hooks.json", _hooks("preToolUse", "exit 1"))
    (ws / ".github/hooks/not-a-pack").mkdir()
    mine = _write(user / "logger/hooks.json", _hooks("agentStop", "echo mine"))
    found = [p for p, _ in hook_files(default_sources(ws, user))]
    assert found == [loose, pack, mine]
    trust = trust_workspace(tmp_path, ws)
    hooks = load_hooks(default_sources(ws, user), trust=trust)
    assert hooks.problems == () and hooks.files == (loose, pack, mine)
    assert [h.argv[-1] for h in hooks.for_event(HookEvent.SESSION_END)] == ["echo pack"]
    assert len(hooks.for_event(HookEvent.PRE_TOOL_USE)) == 1
    # the agent may not write a pack (the file tools and the sandbox refuse .github/hooks)
    assert control_entry(ws, (ws / ".github/hooks/audit/run.sh").resolve()) == ".github/hooks"


def test_disable_all_hooks_in_a_copilot_file_switches_off_that_file_only(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    _write(ws / ".github/hooks/keep.json", _hooks("preToolUse", "echo kept"))
    off = _hooks("preToolUse", "echo skipped") | {"disableAllHooks": True}
    _write(ws / ".github/hooks/paused/hooks.json", off)
    hooks = load_hooks(default_sources(ws, None), trust=trust_workspace(tmp_path, ws))
    assert hooks.disabled_by is None
    assert [h.argv[-1] for h in hooks.for_event(HookEvent.PRE_TOOL_USE)] == ["echo kept"]


def test_familiar_trust_lists_a_pack(tmp_path: Path) -> None:
    config = load_config(tmp_path, channel_plugins=ChannelPlugins())
    ws = workspace_dir(tmp_path, config)
    pack = _write(ws / ".github/hooks/audit/hooks.json", _hooks("sessionStart", "sh run.sh"))
    (ws / ".github/hooks/audit/run.sh").write_text("echo hi\n")
    (listed,) = workspace_control(tmp_path, config).files
    assert (listed.kind, listed.check.path, listed.check.state) == ("hooks", pack, "untrusted")


def _doc(facts: Facts, event: HookEvent, name: str, dialect: str) -> dict[str, Any]:
    return json.loads(payload(facts, event=event, event_name=name, dialect=dialect))  # type: ignore[arg-type]


BASE = Facts(session_key="slack:T1:C2", cwd="/ws", channel="slack", transcript_path="/t.jsonl")


def test_claude_payloads_follow_claude_codes_reference() -> None:
    start = _doc(
        replace(BASE, source="new", prompt="hi", model="m-1"),
        HookEvent.SESSION_START,
        "SessionStart",
        "claude",
    )
    assert {k: start[k] for k in ("session_id", "transcript_path", "cwd", "hook_event_name")} == {
        "session_id": "slack:T1:C2",
        "transcript_path": "/t.jsonl",
        "cwd": "/ws",
        "hook_event_name": "SessionStart",
    }
    assert start["permission_mode"] == "default" and start["source"] == "clear"
    assert start["model"] == "m-1"
    end = _doc(replace(BASE, reason="new"), HookEvent.SESSION_END, "SessionEnd", "claude")
    assert end["reason"] == "clear"
    failed = replace(
        BASE,
        tool_name="exec",
        tool_args={"command": "false"},
        call_id="c1",
        tool_result="exit code 1",
    )
    fail = _doc(failed, HookEvent.POST_TOOL_USE_FAILURE, "PostToolUseFailure", "claude")
    assert (fail["tool_name"], fail["tool_input"], fail["tool_use_id"]) == (
        "Bash",
        {"command": "false"},
        "c1",
    )
    assert fail["error"] == "exit code 1" and fail["is_interrupt"] is False
    error = replace(BASE, error="429 slow down", error_kind="ProviderRateLimited")
    stop_failure = _doc(error, HookEvent.ERROR_OCCURRED, "StopFailure", "claude")
    assert stop_failure["error"] == "rate_limit"
    assert stop_failure["error_details"] == "429 slow down"
    vscode = _doc(error, HookEvent.ERROR_OCCURRED, "ErrorOccurred", "claude")
    assert vscode["error"] == {"message": "429 slow down", "name": "ProviderRateLimited"}
    assert vscode["error_context"] == "model_call" and vscode["recoverable"] is False


def test_copilot_payloads_follow_githubs_reference() -> None:
    error = replace(BASE, error="boom", error_kind="RuntimeError")
    doc = _doc(error, HookEvent.ERROR_OCCURRED, "errorOccurred", "copilot")
    assert doc["error"] == {"message": "boom", "name": "RuntimeError"}
    assert doc["errorContext"] == "system" and doc["recoverable"] is False
    failed = replace(
        BASE, tool_name="read_file", tool_args={"path": "x"}, tool_result="error: no such file"
    )
    fail = _doc(failed, HookEvent.POST_TOOL_USE_FAILURE, "postToolUseFailure", "copilot")
    assert fail["toolArgs"] == '{"path":"x"}' and fail["error"] == "error: no such file"
    end = _doc(BASE, HookEvent.SESSION_END, "sessionEnd", "copilot")
    assert end["reason"] == "complete"  # no reason of ours: ended normally


def test_transcript_lines_and_names() -> None:
    key = "cli:alice"
    events = [
        Event(session_key=key, data=UserMessage(text="list", origin="user"), created_at=1.0, id=1),
        Event(session_key=key, data=AssistantMessage(content="", tool_calls=["exec"]), id=2),
        Event(
            session_key=key, data=ToolStart(tool="read_file", call_id="c", arguments={"path": "a"})
        ),
        Event(
            session_key=key,
            data=ToolComplete(tool="read_file", call_id="c", is_error=True, result="no"),
        ),
        Event(session_key=key, data=HookError(hook="x", error="e", source="s")),
        Event(session_key=key, data=AssistantMessage(content="done")),
    ]
    lines = [json.loads(line) for line in render(key, events, cwd="/ws")]
    assert [line["type"] for line in lines] == ["user", "assistant", "user", "assistant"]
    use = lines[1]["message"]["content"][0]
    assert use == {"type": "tool_use", "id": "c", "name": "Read", "input": {"file_path": "a"}}
    assert lines[2]["message"]["content"][0]["is_error"] is True
    assert lines[0]["timestamp"].startswith("1970-01-01T00:00:01")
    assert len({line["uuid"] for line in lines}) == 4 and lines[0]["parentUuid"] is None
    names = {transcript_name(k) for k in ("a:b", "a_b", "a/b", "../x")}
    assert len(names) == 4 and all("/" not in n and not n.startswith(".") for n in names)


def test_a_transcript_keeps_its_newest_lines_within_the_byte_cap() -> None:
    lines = [json.dumps({"n": i, "pad": "x" * 90}) for i in range(100)]
    kept = _newest_within(lines, 1000)
    assert kept == lines[-len(kept) :] and sum(len(x) + 1 for x in kept) <= 1000
    assert len(kept) == 1000 // (len(lines[0]) + 1)
