"""Hook files as users copy them: a Copilot hook pack installed with
``cp -r hooks/<name> .github/hooks/`` (its ``hooks.json`` and scripts in their own
folder, scripts named from the repository root as GitHub's packs do), and a Claude Code
Stop hook reading the session's transcript. A real core on the fake OpenAI server, real
hook processes; the payloads checked field by field against GitHub's hooks reference
and Claude Code's."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path
from typing import Any

import pytest

from core.event_data import HookError
from core.hooks.transcript import TRANSCRIPTS_DIR
from tests.integration.hook_rig import HookRig, hook_rig
from tests.trusting import trust_workspace

PACK = "audit-trail"

# A pack's script as such packs write them: read the payload on stdin, append it to a log.
RECORD = """#!/bin/sh
payload=$(cat)
printf '%s\\n' "$payload" >> "$PACK_LOG"
"""
# GitHub's tutorial prints a banner from sessionStart; "any output from this hook is ignored"
BANNER = """#!/bin/sh
cat > /dev/null
echo "POLICY ACTIVE: prompts and tool use are logged"
"""


def install_pack(rig: HookRig, log: Path, *, extra_json: bool = True) -> Path:
    """``.github/hooks/audit-trail/`` with its hooks.json, scripts and a data file."""
    folder = rig.workspace / ".github" / "hooks" / PACK
    folder.mkdir(parents=True)
    for name, text in (("record.sh", RECORD), ("banner.sh", BANNER)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    script = f".github/hooks/{PACK}/record.sh"

    def entry(path: str = script) -> dict[str, Any]:
        return {"type": "command", "bash": path, "cwd": ".", "env": {"PACK_LOG": str(log)}}

    hooks = {
        "sessionStart": [entry(), entry(f".github/hooks/{PACK}/banner.sh")],
        "userPromptSubmitted": [entry()],
        "preToolUse": [entry()],
        "postToolUse": [entry()],
        "agentStop": [entry()],
        "sessionEnd": [entry()],
    }
    (folder / "hooks.json").write_text(json.dumps({"version": 1, "hooks": hooks}, indent=2))
    if extra_json:  # the scripts' data, shaped like a hook file: not one
        crash = {"type": "command", "bash": "exit 1"}
        (folder / "settings.json").write_text(
            json.dumps({"version": 1, "hooks": {"preToolUse": [crash]}})
        )
    return folder


def is_file(path: str) -> bool:
    return Path(path).is_file()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def recorded(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


COMMON = {"sessionId": str, "timestamp": int, "cwd": str}
"""Every camelCase payload (GitHub's hooks reference)."""
DOCUMENTED: dict[str, dict[str, type]] = {
    "sessionStart": {**COMMON, "source": str, "initialPrompt": str},
    "userPromptSubmitted": {**COMMON, "prompt": str},
    "preToolUse": {**COMMON, "toolName": str, "toolArgs": str},
    "postToolUse": {**COMMON, "toolName": str, "toolArgs": str, "toolResult": dict},
    "agentStop": {**COMMON, "transcriptPath": str, "stopReason": str},
    "sessionEnd": {**COMMON, "reason": str},
}
EXTRAS = {
    "channel",
    "agentName",
    "agentDepth",
    "messageId",
    "origin",
    "toolCallId",
    "turnEnd",
    "stop_hook_active",
    "lastAssistantMessage",
}
"""familiar's own fields (docs/formats/hooks.md); nothing else may appear."""


def event_of(payload: dict[str, Any]) -> str:
    keys = set(payload)
    for name in ("postToolUse", "preToolUse", "agentStop", "sessionStart", "sessionEnd"):
        if set(DOCUMENTED[name]) - set(COMMON) <= keys:
            return name
    return "userPromptSubmitted"


async def test_an_installed_copilot_pack_runs_with_githubs_payload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "pack-log.jsonl"
    caplog.set_level(logging.INFO)
    async with hook_rig(tmp_path) as rig:
        install_pack(rig, log)
        trust_workspace(tmp_path, rig.workspace)  # familiar trust allow
        rig.fake.script([("exec", {"command": "echo pack-ran"})], "done")
        out = await rig.send("list the files")
        await rig.send("/new")
        assert rig.app.hooks is not None
        loaded = await rig.app.hooks.current()
        events = await rig.app.events.list("cli:t")
    assert out.text == "done"
    pack_file = rig.workspace / ".github" / "hooks" / PACK / "hooks.json"
    assert loaded.files == (pack_file,) and loaded.problems == ()
    payloads = recorded(log)
    names = [event_of(p) for p in payloads]
    assert names == [
        "sessionStart",
        "userPromptSubmitted",
        "preToolUse",
        "postToolUse",
        "agentStop",
        "sessionEnd",
    ]
    for name, payload in zip(names, payloads, strict=True):
        fields = DOCUMENTED[name]
        for key, kind in fields.items():
            assert isinstance(payload[key], kind), (name, key, payload[key])
        assert set(payload) - set(fields) <= EXTRAS, (name, set(payload) - set(fields))
        assert payload["sessionId"] == "cli:t" and payload["cwd"] == str(rig.workspace)
        assert "hook_event_name" not in payload
    start, prompt, pre, post, stop, end = payloads
    assert start["source"] == "startup" and start["initialPrompt"] == "list the files"
    assert prompt["prompt"] == "list the files"
    assert pre["toolName"] == "bash"
    assert json.loads(pre["toolArgs"]) == {"command": "echo pack-ran"}  # a JSON string
    assert post["toolArgs"] == pre["toolArgs"]
    assert set(post["toolResult"]) == {"resultType", "textResultForLlm"}
    assert post["toolResult"]["resultType"] == "success"
    assert "pack-ran" in post["toolResult"]["textResultForLlm"]
    assert stop["stopReason"] == "end_turn" and is_file(stop["transcriptPath"])
    assert end["reason"] == "user_exit"  # /new: one of complete|error|abort|timeout|user_exit
    # the banner's plain text is ignored: no failure logged, no hook.error event
    assert not [e for e in events if isinstance(e.data, HookError)]
    assert not [r for r in caplog.records if "hook failed" in r.getMessage()]
    # the pack's other JSON file is its data: never loaded as hooks (it would crash)
    assert not [r for r in caplog.records if "settings.json" in r.getMessage()]


async def test_an_untrusted_pack_does_not_run(tmp_path: Path) -> None:
    log = tmp_path / "pack-log.jsonl"
    async with hook_rig(tmp_path) as rig:
        folder = install_pack(rig, log, extra_json=False)
        await rig.send("hello")
        assert rig.app.hooks is not None
        (ignored,) = (await rig.app.hooks.current()).untrusted
        assert recorded(log) == []
        assert ignored.path == folder / "hooks.json"
        assert {Path(p).name for p in ignored.named} == {"record.sh", "banner.sh"}

        trust_workspace(tmp_path, rig.workspace)
        await rig.send("trusted now")
        assert [event_of(p) for p in recorded(log)][-1] == "agentStop"

        # a script of the pack edited after trust: the pack is ignored again
        ran = len(recorded(log))
        record = folder / "record.sh"
        record.write_text(RECORD + "echo tampered\n")
        await rig.send("after the edit")
        (changed,) = (await rig.app.hooks.current()).untrusted
    assert len(recorded(log)) == ran
    assert changed.state == "changed" and changed.changed == (str(record),)


STOP_READER = r"""
import json, sys
doc = json.load(sys.stdin)
lines = [json.loads(l) for l in open(doc["transcript_path"]) if l.strip()]
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"payload": doc, "transcript": lines}) + "\n")
"""


async def test_a_claude_hook_reads_the_session_transcript(tmp_path: Path) -> None:
    """``transcript_path`` names a JSONL transcript in Claude Code's shape that already
    holds the running turn (a Stop hook reads the answer it is about to see end)."""
    reader = tmp_path / "stop-reader.py"
    reader.write_text(STOP_READER)
    out_log = tmp_path / "stop-log.jsonl"
    async with hook_rig(tmp_path) as rig:
        command = f"python3 {reader} {out_log}"
        rig.write_claude({"Stop": [{"hooks": [{"type": "command", "command": command}]}]})
        rig.fake.script([("exec", {"command": "echo from-the-tool"})], "all done")
        await rig.send("go")
        rig.fake.script("second answer")
        await rig.send("again")
    first, second = (json.loads(line) for line in out_log.read_text().splitlines())
    path = Path(first["payload"]["transcript_path"])
    assert path.parent == tmp_path / TRANSCRIPTS_DIR  # in $FAMILIAR_HOME, not the workspace
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    lines = first["transcript"]
    shapes = [(line["type"], line["message"]["role"]) for line in lines]
    assert shapes == [("user", "user"), ("assistant", "assistant")] * 2
    user, tool_use, tool_result, answer = (line["message"]["content"] for line in lines)
    assert user == "go"
    (use,) = tool_use
    assert use["type"] == "tool_use" and use["name"] == "Bash"
    assert use["input"] == {"command": "echo from-the-tool"}
    (result,) = tool_result
    assert result["type"] == "tool_result" and result["tool_use_id"] == use["id"]
    assert "from-the-tool" in result["content"] and result["is_error"] is False
    assert answer == [{"type": "text", "text": "all done"}]
    assert all(line["sessionId"] == "cli:t" for line in lines)
    assert [line["parentUuid"] for line in lines[1:]] == [line["uuid"] for line in lines[:-1]]
    # the second turn's transcript holds both turns, the newest answer last
    texts = [line["message"]["content"] for line in second["transcript"]]
    assert texts[0] == "go" and texts[-2:] == ["again", [{"type": "text", "text": "second answer"}]]
    assert second["payload"]["transcript_path"] == str(path)
