"""A core on the fake OpenAI server with hook files written by the test, and a hook script."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.app import CoreApp
from core.hooks import HooksConfig
from core.messages import OutboundMessage
from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tools.config import ExecConfig, ToolsConfig
from tests.fakes.fake_openai import FakeOpenAI
from tests.integration.harness import Replies, inbound, running_core
from tests.trusting import trust_workspace

HOOK_SCRIPT = r"""
import json, os, sys
log_path, mode = sys.argv[1], sys.argv[2]
raw = sys.stdin.read()
doc = json.loads(raw)
with open(log_path, "a") as f:
    f.write(json.dumps({"mode": mode, "payload": doc, "env": dict(os.environ)}) + "\n")
args = doc.get("toolArgs") or doc.get("tool_input") or {}
if isinstance(args, str):  # Copilot's toolArgs is a JSON string (GitHub's scripts parse it)
    args = json.loads(args)
command = args.get("command", "") if isinstance(args, dict) else ""
if mode == "ok":
    sys.exit(0)
if mode == "deny-rm":
    if "rm -rf" in command:
        print(json.dumps({"permissionDecision": "deny",
                          "permissionDecisionReason": "no rm -rf in this workspace"}))
    sys.exit(0)
if mode == "deny-exit2":
    if "rm -rf" in command:
        sys.stderr.write("blocked by policy: " + command)
        sys.exit(2)
    sys.exit(0)
if mode == "rewrite-copilot":
    print(json.dumps({"modifiedArgs": {"command": "echo rewritten-by-copilot-hook"}}))
    sys.exit(0)
if mode == "rewrite-claude":
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "updatedInput": {"command": "echo rewritten-by-claude-hook"}}}))
    sys.exit(0)
if mode == "claude-validator":  # as Claude Code's docs write one: names and keys are theirs
    tool, given = doc.get("tool_name"), doc.get("tool_input") or {}
    if tool == "Bash" and "rm -rf" in given.get("command", ""):
        sys.stderr.write("claude policy: no rm -rf")
        sys.exit(2)
    if tool in ("Write", "Edit") and given.get("file_path", "").endswith(".env"):
        sys.stderr.write("claude policy: .env files are off limits")
        sys.exit(2)
    if tool == "Write" and given.get("file_path") == "redirect-me.txt":
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
              "updatedInput": {"file_path": "redirected.txt", "content": given["content"]}}}))
    sys.exit(0)
if mode == "crash":
    sys.stderr.write("boom")
    sys.exit(1)
if mode == "garbage":
    print("this is not json")
    sys.exit(0)
if mode == "context":
    name = doc.get("hook_event_name", doc.get("toolName", "x"))
    print(json.dumps({"additionalContext": "CTX-" + name}))
    sys.exit(0)
if mode == "plain-context":
    print("PLAIN-CONTEXT-MARKER")
    sys.exit(0)
if mode == "block-prompt":
    print(json.dumps({"decision": "block", "reason": "that prompt is not allowed here"}))
    sys.exit(0)
if mode.startswith("block-stop-"):
    limit = int(mode.rsplit("-", 1)[1])
    counter = sys.argv[3]
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    with open(counter, "w") as f:
        f.write(str(n + 1))
    if n < limit:
        print(json.dumps({"decision": "block", "reason": f"keep going, round {n + 1}"}))
    sys.exit(0)
if mode == "flood":
    sys.stdout.write("x" * 3_000_000)
    sys.exit(0)
sys.exit(3)
"""


@dataclass
class HookRig:
    app: CoreApp
    replies: Replies
    fake: FakeOpenAI
    workspace: Path
    tmp: Path

    def command(self, mode: str, *extra: str) -> str:
        """A shell command line running the test hook script in ``mode``."""
        parts = [sys.executable, str(self.tmp / "hook.py"), str(self.log_path), mode, *extra]
        return " ".join(shlex.quote(p) for p in parts)

    @property
    def log_path(self) -> Path:
        return self.tmp / "hook-log.jsonl"

    def calls(self) -> list[dict[str, Any]]:
        """What each hook run received (``payload``) and its environment (``env``)."""
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def write_copilot(self, name: str, hooks: dict[str, list[dict[str, Any]]]) -> Path:
        path = self.workspace / ".github" / "hooks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"version": 1, "hooks": hooks}))
        trust_workspace(self.tmp, self.workspace)  # as the operator would: familiar trust allow
        return path

    def write_claude(self, hooks: dict[str, list[dict[str, Any]]]) -> Path:
        path = self.workspace / ".claude" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"hooks": hooks}))
        trust_workspace(self.tmp, self.workspace)
        return path

    async def send(self, text: str, session: str = "cli:t") -> OutboundMessage:
        m = inbound(session, text)
        await self.app.bus.publish_inbound(m)
        (out,) = await self.replies.wait([m.id])
        return out


@asynccontextmanager
async def hook_rig(tmp_path: Path, *, hooks: HooksConfig | None = None) -> AsyncIterator[HookRig]:
    (tmp_path / "hook.py").write_text(HOOK_SCRIPT)
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    async with FakeOpenAI() as fake:
        provider = OpenAIProvider(
            config=ProviderConfig(kind="openai", base_url=fake.base_url, model="fake")
        )
        try:
            async with running_core(
                store_url=f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}",
                workspace=workspace,
                provider=provider,
                tools=ToolsConfig(exec=ExecConfig(sandbox="none")),
                hooks=hooks or HooksConfig(reload_interval=0),
                hooks_dir=tmp_path / "home-hooks",
                home=tmp_path,  # its trust.json: what write_copilot / write_claude trust
            ) as (app, replies):
                yield HookRig(app, replies, fake, workspace, tmp_path)
        finally:
            await provider.aclose()


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results a request to the fake model carried."""
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "tool"]
