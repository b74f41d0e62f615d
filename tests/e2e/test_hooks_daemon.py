"""Hooks in a spawned daemon: the operator's ``$FAMILIAR_HOME/hooks`` and the workspace's
Claude settings, a hook script run by the real gateway, answers seen over the socket."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_process import BASE, Daemon, daemon, fake_openai, write_config
from tests.integration.hook_rig import HOOK_SCRIPT
from tests.trusting import trust_workspace

pytestmark = pytest.mark.slow


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def _send(d: Daemon, session: str, text: str) -> str:
    body = {"session": session, "text": text, "stream": False, "timeout": 60}
    async with d._session() as http, http.post(BASE + "/v1/messages", json=body) as r:
        assert r.status == 200, await r.text()
        lines: list[dict[str, Any]] = [json.loads(x) async for x in r.content if x.strip()]
    (reply,) = [line for line in lines if line["type"] == "reply"]
    return str(reply["text"])


async def test_the_daemon_runs_hooks_from_home_and_workspace(home: Path) -> None:
    script = home / "hook.py"
    script.write_text(HOOK_SCRIPT)
    log = home / "hook-log.jsonl"

    def command(mode: str, *extra: str) -> str:
        parts = [sys.executable, str(script), str(log), mode, *extra]
        return " ".join(shlex.quote(p) for p in parts)

    (home / "hooks").mkdir()
    (home / "hooks" / "policy.json").write_text(
        json.dumps({"version": 1, "hooks": {"preToolUse": [{"bash": command("deny-rm")}]}})
    )
    claude = home / "workspace" / ".claude"
    claude.mkdir(parents=True)
    (claude / "settings.json").write_text(
        json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [{"command": command("ok")}]}]}})
    )
    (home / "workspace" / ".github" / "hooks").mkdir(parents=True)
    (home / "workspace" / ".github" / "hooks" / "broken.json").write_text("{")
    trust_workspace(home, home / "workspace")
    async with fake_openai() as base_url:
        write_config(home, base_url)
        async with daemon(home, OPENAI_API_KEY="sk-from-the-daemon-env") as d:
            await d.wait_ready()
            reply = await _send(d, "cli:e2e", '!tool exec {"command": "rm -rf precious"}')
            assert "no rm -rf in this workspace" in reply, reply
            assert "hook file not loaded" in d.logs() and "broken.json" in d.logs()
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    modes = [c["mode"] for c in calls]
    assert modes == ["ok", "deny-rm"]
    prompt, pre = (c["payload"] for c in calls)
    assert prompt["hook_event_name"] == "UserPromptSubmit" and prompt["session_id"] == "cli:e2e"
    assert prompt["channel"] == "cli"
    assert pre["toolName"] == "bash"
    assert json.loads(pre["toolArgs"]) == {"command": "rm -rf precious"}  # a JSON string
    for call in calls:
        assert "OPENAI_API_KEY" not in call["env"]
        assert not [k for k in call["env"] if k.startswith("FAMILIAR_")]
