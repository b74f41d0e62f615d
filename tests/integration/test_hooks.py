"""Lifecycle hooks end to end: a core on the fake OpenAI server, hook files in both formats
written by the tests, and a real hook script run as a process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.event_data import EventType, HookBlocked, HookError
from core.hooks import Hooks, HooksConfig, default_sources
from core.tools.base import ToolContext
from core.trust import TRUST_FILE, WorkspaceTrust
from tests.integration.hook_rig import HOOK_SCRIPT, HookRig, hook_rig, tool_results
from tests.waiting import eventually


async def test_every_event_fires_with_the_copilot_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAMILIAR_PROVIDER__API_KEY", "sk-very-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-also-secret")
    async with hook_rig(tmp_path) as rig:
        ok = [{"type": "command", "bash": rig.command("ok"), "timeoutSec": 30}]
        events = ["sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse"]
        rig.write_copilot("all.json", {e: ok for e in [*events, "agentStop", "errorOccurred"]})
        rig.fake.script([("exec", {"command": "echo hello-from-exec"})], "done")
        out = await rig.send("run it")
        rig.fake.script(400)
        failed = await rig.send("and again")
    assert out.text == "done" and failed.kind == "error"
    calls = rig.calls()
    # sessionStart, userPromptSubmitted, preToolUse, postToolUse, agentStop; then (not a
    # fresh session any more) userPromptSubmitted and errorOccurred
    assert len(calls) == 7
    start = calls[0]["payload"]
    assert start["sessionId"] == "cli:t" and isinstance(start["timestamp"], int)
    assert start["cwd"] == str(rig.workspace) and start["source"] == "startup"
    assert start["channel"] == "test" and start["agentName"] == "main"
    assert start["agentDepth"] == 0 and start["initialPrompt"] == "run it"
    assert calls[1]["payload"]["prompt"] == "run it" and "source" not in calls[1]["payload"]
    pre, post, stop = (calls[i]["payload"] for i in (2, 3, 4))
    assert pre["toolName"] == "bash"
    assert json.loads(pre["toolArgs"]) == {"command": "echo hello-from-exec"}  # a JSON string
    assert post["toolName"] == "bash"
    assert post["toolResult"]["resultType"] == "success"
    assert "hello-from-exec" in post["toolResult"]["textResultForLlm"]
    assert stop["stopReason"] == "end_turn" and stop["turnEnd"] == "answered"
    assert stop["stop_hook_active"] is False and stop["lastAssistantMessage"] == "done"
    assert stop["transcriptPath"].endswith(".jsonl")
    prompt2, error = calls[5]["payload"], calls[6]["payload"]
    assert prompt2["prompt"] == "and again"
    assert error["error"]["name"] == "ProviderRejected" and "400" in error["error"]["message"]
    assert all("hook_event_name" not in p for p in (start, pre, post, stop))
    for call in calls:  # the scrubbed environment of exec: no provider key, no FAMILIAR_*
        env = call["env"]
        assert "OPENAI_API_KEY" not in env
        assert not [k for k in env if k.startswith("FAMILIAR_")]
        assert env["CLAUDE_PROJECT_DIR"] == str(rig.workspace)


async def test_every_event_fires_with_the_claude_payload(tmp_path: Path) -> None:
    async with hook_rig(tmp_path) as rig:

        def group(matcher: str | None = None) -> list[dict[str, object]]:
            entry: dict[str, object] = {
                "hooks": [{"type": "command", "command": rig.command("ok"), "timeout": 30}]
            }
            if matcher is not None:
                entry["matcher"] = matcher
            return [entry]

        rig.write_claude(
            {
                "SessionStart": group("startup"),
                "UserPromptSubmit": group(),
                "PreToolUse": group("Bash"),  # Claude Code's name for our exec
                "PostToolUse": group("Read|Bash"),
                "Stop": group(),
            }
        )
        rig.fake.script([("exec", {"command": "echo claude-side"})], "all done")
        out = await rig.send("go")
    assert out.text == "all done"
    payloads = [c["payload"] for c in rig.calls()]
    assert [p["hook_event_name"] for p in payloads] == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
    ]
    start, prompt, pre, post, stop = payloads
    for p in payloads:
        assert p["session_id"] == "cli:t" and p["cwd"] == str(rig.workspace)
        assert p["channel"] == "test" and p["agent_type"] == "main" and p["agent_depth"] == 0
        assert "sessionId" not in p
    assert start["source"] == "startup" and prompt["prompt"] == "go"
    assert pre["tool_name"] == "Bash" and pre["tool_input"] == {"command": "echo claude-side"}
    assert pre["tool_use_id"]
    assert "claude-side" in post["tool_response"]["stdout"]  # Claude's Bash response shape
    assert stop["stop_hook_active"] is False and stop["last_assistant_message"] == "all done"


async def test_pre_tool_use_denies_a_matching_exec_and_the_model_sees_why(tmp_path: Path) -> None:
    async with hook_rig(tmp_path) as rig:
        rig.write_copilot(
            "policy.json",
            {
                "preToolUse": [
                    {"type": "command", "bash": rig.command("deny-rm"), "matcher": "exec"}
                ]
            },
        )
        rig.write_claude(
            {
                "PreToolUse": [
                    {"matcher": "Bash", "hooks": [{"command": rig.command("deny-exit2")}]},
                    # never runs: the matcher names another tool
                    {"matcher": "Write", "hooks": [{"command": rig.command("crash")}]},
                ]
            }
        )
        victim = rig.workspace / "precious"
        victim.mkdir()
        rig.fake.script(
            [("exec", {"command": "rm -rf precious"}), ("exec", {"command": "echo fine"})],
            "ok",
        )
        m = await rig.send("clean up")
        events = await rig.app.events.list("cli:t")
    assert m.text == "ok"
    assert victim.is_dir()
    denied, allowed = tool_results(rig.fake.requests[-1])
    assert "no rm -rf in this workspace" in denied
    assert "blocked by policy: rm -rf precious" in denied
    assert denied.startswith("error: denied by a preToolUse hook")
    assert "fine" in allowed and "denied" not in allowed
    blocked = [e.data for e in events if isinstance(e.data, HookBlocked)]
    assert {(b.hook, b.tool) for b in blocked} == {("preToolUse", "exec")}
    assert {Path(b.source).name for b in blocked} == {"policy.json", "settings.json"}
    assert {c["mode"] for c in rig.calls()} == {"deny-rm", "deny-exit2"}


async def test_a_claude_code_hook_script_sees_claude_tool_names_and_arguments(
    tmp_path: Path,
) -> None:
    """A validator written for Claude Code checks ``tool_name == "Bash"`` and reads
    ``tool_input.file_path``: with our names (``exec``, ``path``) it let everything by."""
    async with hook_rig(tmp_path) as rig:
        hook = {"type": "command", "command": rig.command("claude-validator")}
        rig.write_claude({"PreToolUse": [{"matcher": "Bash|Write|Edit", "hooks": [hook]}]})
        victim = rig.workspace / "precious"
        victim.mkdir()
        (rig.workspace / "app.env").write_text("KEY=1\n")
        rig.fake.script(
            [
                ("exec", {"command": "rm -rf precious", "timeout": 5}),
                ("write_file", {"path": "app.env", "content": "KEY=stolen"}),
                ("edit_file", {"path": "app.env", "old_text": "1", "new_text": "2"}),
                ("write_file", {"path": "redirect-me.txt", "content": "hello"}),
            ],
            "ok",
        )
        await rig.send("go")
        payloads = [c["payload"] for c in rig.calls()]
    assert victim.is_dir() and (rig.workspace / "app.env").read_text() == "KEY=1\n"
    denied_rm, denied_write, denied_edit, redirected = tool_results(rig.fake.requests[-1])
    assert "claude policy: no rm -rf" in denied_rm
    assert "claude policy: .env" in denied_write and "claude policy: .env" in denied_edit
    assert "redirected.txt" in redirected, redirected
    assert (rig.workspace / "redirected.txt").read_text() == "hello"
    assert not (rig.workspace / "redirect-me.txt").exists()
    assert payloads[0]["tool_input"] == {"command": "rm -rf precious", "timeout": 5000}
    assert payloads[2]["tool_name"] == "Edit"
    assert payloads[2]["tool_input"] == {
        "file_path": "app.env",
        "old_string": "1",
        "new_string": "2",
    }


@pytest.mark.parametrize("fmt", ["copilot", "claude"])
async def test_pre_tool_use_rewrites_the_arguments(tmp_path: Path, fmt: str) -> None:
    async with hook_rig(tmp_path) as rig:
        if fmt == "copilot":
            entry = {"bash": rig.command("rewrite-copilot"), "matcher": "exec"}
            rig.write_copilot("rewrite.json", {"preToolUse": [entry]})
        else:
            hook = {"type": "command", "command": rig.command("rewrite-claude")}
            rig.write_claude({"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]})
        rig.fake.script([("exec", {"command": "echo original"})], "ok")
        await rig.send("run")
    (result,) = tool_results(rig.fake.requests[-1])
    assert f"rewritten-by-{fmt}-hook" in result and "original" not in result


async def test_a_crashing_or_hanging_pre_tool_use_refuses_the_call(tmp_path: Path) -> None:
    pid_file = tmp_path / "hang.pid"
    async with hook_rig(tmp_path) as rig:
        rig.write_copilot(
            "crash.json", {"preToolUse": [{"bash": rig.command("crash"), "matcher": "list_dir"}]}
        )
        rig.write_copilot(
            "hang.json",
            {
                "preToolUse": [
                    {
                        # a shell, not Python: written at once even on a loaded machine
                        "bash": f"echo $$ > {pid_file}; exec sleep 600",
                        "matcher": "exec",
                        "timeoutSec": 2,
                    }
                ]
            },
        )
        rig.write_copilot(
            "garbage.json",
            {"preToolUse": [{"bash": rig.command("garbage"), "matcher": "read_file"}]},
        )
        marker = rig.workspace / "created-by-exec"
        rig.fake.script(
            [
                ("list_dir", {"path": "."}),
                ("exec", {"command": f"touch {marker}"}),
                ("read_file", {"path": "AGENTS.md"}),
            ],
            "ok",
        )
        await rig.send("try")
        events = await rig.app.events.list("cli:t")
    crashed, hung, garbled = tool_results(rig.fake.requests[-1])
    assert crashed.startswith("error: denied by a preToolUse hook: hook failed")
    assert "exited with status 1: boom" in crashed
    assert "hook failed: timed out after 2 s" in hung
    assert "hook failed: unreadable answer" in garbled
    assert not marker.exists()
    pid = int(pid_file.read_text())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    await eventually(gone, what="the hung hook's process was killed")
    errors = [e.data for e in events if isinstance(e.data, HookError)]
    assert sorted(e.tool or "" for e in errors) == ["exec", "list_dir", "read_file"]


async def test_a_crashing_post_tool_use_leaves_the_result_alone(tmp_path: Path) -> None:
    async with hook_rig(tmp_path) as rig:
        rig.write_copilot("post.json", {"postToolUse": [{"bash": rig.command("crash")}]})
        rig.write_copilot("ctx.json", {"postToolUse": [{"bash": rig.command("context")}]})
        rig.fake.script([("exec", {"command": "echo still-ran"})], "ok")
        await rig.send("go")
        events = await rig.app.events.list("cli:t")
    (result,) = tool_results(rig.fake.requests[-1])
    assert "still-ran" in result and not result.startswith("error")
    assert "[hook] CTX-bash" in result  # another postToolUse hook's additionalContext
    (error,) = [e.data for e in events if isinstance(e.data, HookError)]
    assert error.hook == "postToolUse" and "boom" in error.error
    assert not [e for e in events if e.type == EventType.HOOK_BLOCKED]


async def _quiet(rig: object, count: int) -> None:
    app = rig.app  # type: ignore[attr-defined]
    replies = rig.replies  # type: ignore[attr-defined]
    await eventually(lambda: len(replies.by_inbound) >= count, what=f"{count} replies")
    counts = await app.bus.queue_counts("cli:t")
    assert counts.depth == 0  # the last turn enqueued nothing more


async def test_agent_stop_blocking_twice_yields_two_more_turns(tmp_path: Path) -> None:
    counter = tmp_path / "stop-count"
    async with hook_rig(tmp_path) as rig:
        rig.write_copilot(
            "stop.json", {"agentStop": [{"bash": rig.command("block-stop-2", str(counter))}]}
        )
        rig.fake.script("first", "second", "third")
        await rig.send("start working")
        await _quiet(rig, 3)
        replies = sorted(rig.replies.by_inbound.values(), key=lambda r: r.created_at)
        events = await rig.app.events.list("cli:t")
    assert [r.text for r in replies] == ["first", "second", "third"]
    assert rig.fake.calls == 3
    users = [e.data for e in events if e.type == EventType.USER_MESSAGE]
    assert [(u.origin, u.text) for u in users] == [  # type: ignore[union-attr]
        ("user", "start working"),
        ("system", "keep going, round 1"),
        ("system", "keep going, round 2"),
    ]
    stops = [c["payload"] for c in rig.calls()]
    assert [s["stop_hook_active"] for s in stops] == [False, True, True]
    blocked = [e.data for e in events if isinstance(e.data, HookBlocked)]
    assert [(b.hook, b.reason) for b in blocked] == [
        ("agentStop", "keep going, round 1"),
        ("agentStop", "keep going, round 2"),
    ]
    # the model saw the reason as the next user message
    assert rig.fake.requests[1]["messages"][-1] == {
        "role": "user",
        "content": "keep going, round 1",
    }


async def test_agent_stop_blocks_are_capped(tmp_path: Path) -> None:
    counter = tmp_path / "stop-count"
    async with hook_rig(
        tmp_path, hooks=HooksConfig(reload_interval=0, max_consecutive_blocks=2)
    ) as rig:
        rig.write_copilot(
            "stop.json", {"agentStop": [{"bash": rig.command("block-stop-1000", str(counter))}]}
        )
        await rig.send("start")
        await _quiet(rig, 3)
        assert len(rig.replies.by_inbound) == 3
    assert rig.fake.calls == 3
    assert counter.read_text() == "2"  # not asked once the cap was reached


async def test_user_prompt_hooks_block_or_add_context(tmp_path: Path) -> None:
    async with hook_rig(tmp_path) as rig:
        rig.write_claude(
            {
                "SessionStart": [{"hooks": [{"command": rig.command("plain-context")}]}],
                "UserPromptSubmit": [{"hooks": [{"command": rig.command("context")}]}],
            }
        )
        ok = await rig.send("hello")
        assert ok.text == "echo: hello"
        system = rig.fake.requests[-1]["messages"][0]["content"]
        assert "PLAIN-CONTEXT-MARKER" in system and "CTX-UserPromptSubmit" in system
        rig.write_copilot(
            "block.json", {"userPromptSubmitted": [{"bash": rig.command("block-prompt")}]}
        )
        blocked = await rig.send("do the forbidden thing")
        events = await rig.app.events.list("cli:t")
    assert blocked.text == "that prompt is not allowed here" and blocked.kind == "reply"
    assert rig.fake.calls == 1  # the blocked prompt never reached the model
    (b,) = [e.data for e in events if isinstance(e.data, HookBlocked)]
    assert b.hook == "userPromptSubmitted"


async def test_a_malformed_file_is_reported_and_the_others_work(tmp_path: Path) -> None:
    async with hook_rig(tmp_path) as rig:
        bad = rig.workspace / ".github" / "hooks" / "broken.json"
        bad.parent.mkdir(parents=True)
        bad.write_text('{"version": 1, "hooks": {"preToolUse": [')
        odd = rig.write_copilot(
            "odd.json", {"preToolUse": [{"bash": rig.command("ok"), "matcher": "("}]}
        )
        rig.write_copilot("policy.json", {"preToolUse": [{"bash": rig.command("deny-rm")}]})
        rig.fake.script([("exec", {"command": "rm -rf x"})], "ok")
        await rig.send("go")
        assert rig.app.hooks is not None
        problems = {p.path: p.reason for p in await rig.app.hooks.problems()}
    assert set(problems) == {bad, odd}
    assert problems[bad].startswith("not JSON")
    assert "hooks.preToolUse[0].matcher '(' is not a valid regex" in problems[odd]
    (result,) = tool_results(rig.fake.requests[-1])
    assert "no rm -rf in this workspace" in result


async def test_changed_files_are_read_again(tmp_path: Path) -> None:
    async with hook_rig(tmp_path) as rig:
        rig.fake.script([("exec", {"command": "echo one; rm -rf nothing"})], "ok")
        await rig.send("first")
        rig.write_copilot("policy.json", {"preToolUse": [{"bash": rig.command("deny-rm")}]})
        rig.fake.script([("exec", {"command": "echo two; rm -rf nothing"})], "ok")
        await rig.send("second")
        first, second = (tool_results(r)[-1] for r in (rig.fake.requests[1], rig.fake.requests[3]))
        assert "one" in first and "denied" not in first
        assert "no rm -rf" in second
        (rig.workspace / ".github" / "hooks" / "policy.json").unlink()
        rig.fake.script([("exec", {"command": "echo three; rm -rf nothing"})], "ok")
        await rig.send("third")
    assert "three" in tool_results(rig.fake.requests[5])[-1]


async def test_oversized_output_fails_the_hook(tmp_path: Path) -> None:
    async with hook_rig(tmp_path) as rig:
        rig.write_copilot("flood.json", {"preToolUse": [{"bash": rig.command("flood")}]})
        rig.fake.script([("list_dir", {"path": "."})], "ok")
        await rig.send("go")
    (result,) = tool_results(rig.fake.requests[-1])
    assert "hook failed: wrote more than 1048576 bytes to stdout" in result


async def test_session_end_fires_when_new_clears_the_context(tmp_path: Path) -> None:
    async with hook_rig(tmp_path) as rig:
        rig.write_copilot(
            "life.json",
            {
                "sessionEnd": [{"bash": rig.command("ok")}],
                "sessionStart": [{"bash": rig.command("ok")}],
            },
        )
        await rig.send("hello")
        await rig.send("/new")
        await rig.send("hello again")
        rig.write_copilot("broken-end.json", {"sessionEnd": [{"bash": rig.command("crash")}]})
        await rig.send("/new")
        events = await rig.app.events.list("cli:t")
    (error,) = [e.data for e in events if isinstance(e.data, HookError)]
    assert error.hook == "sessionEnd" and "boom" in error.error
    payloads = [c["payload"] for c in rig.calls()]
    assert [(p.get("source"), p.get("reason")) for p in payloads] == [
        ("startup", None),
        (None, "user_exit"),  # /new, as GitHub names a session the user ended
        ("new", None),
        (None, "user_exit"),  # both sessionEnd hooks of the second /new
        (None, "user_exit"),
    ]


@pytest.mark.parametrize("fmt", ["copilot", "claude"])
async def test_subagent_hooks_through_their_api(tmp_path: Path, fmt: str) -> None:
    """Subagents are wired in by the subagent code; this drives the API they call."""
    counter = tmp_path / "count"
    (tmp_path / "hook.py").write_text(HOOK_SCRIPT)
    workspace = tmp_path / "ws"
    rig = HookRig(app=None, replies=None, fake=None, workspace=workspace, tmp=tmp_path)  # type: ignore[arg-type]
    if fmt == "copilot":
        rig.write_copilot(
            "sub.json",
            {
                "subagentStart": [{"bash": rig.command("context"), "matcher": "review.*"}],
                "subagentStop": [{"bash": rig.command("block-stop-1", str(counter))}],
            },
        )
    else:
        rig.write_claude(
            {
                "SubagentStart": [
                    {"matcher": "reviewer", "hooks": [{"command": rig.command("context")}]}
                ],
                "SubagentStop": [
                    {"hooks": [{"command": rig.command("block-stop-1", str(counter))}]}
                ],
            }
        )
    hooks = Hooks(
        config=HooksConfig(),
        workspace=workspace,
        sources=default_sources(workspace, None),
        trust=WorkspaceTrust(record=tmp_path / TRUST_FILE, workspace=workspace),
    )
    parent = ToolContext(workspace=workspace, session_key="cli:t", channel="test", message_id="m1")
    started = await hooks.subagent_start(
        parent=parent, child_session_key="subagent:abc", agent_type="reviewer", prompt="review it"
    )
    other = await hooks.subagent_start(
        parent=parent, child_session_key="subagent:def", agent_type="coder", prompt="code it"
    )
    stop1 = await hooks.subagent_stop(
        parent=parent, child_session_key="subagent:abc", agent_type="reviewer", response="done?"
    )
    stop2 = await hooks.subagent_stop(
        parent=parent,
        child_session_key="subagent:abc",
        agent_type="reviewer",
        response="done!",
        blocks_so_far=1,
    )
    assert started.context == (("CTX-x",) if fmt == "copilot" else ("CTX-SubagentStart",))
    assert other.ran == 0 and other.context == ()
    assert stop1.block == "keep going, round 1" and stop2.block is None
    assert [type(e).__name__ for e in stop1.events] == ["HookBlocked"]
    start, first_stop, second_stop = (c["payload"] for c in rig.calls())
    if fmt == "copilot":
        assert start["agentName"] == "reviewer" and start["agentDepth"] == 1
        assert start["sessionId"] == "cli:t" and start["agentId"] == "subagent:abc"
        assert start["prompt"] == "review it"
        assert first_stop["lastAssistantMessage"] == "done?"
        assert first_stop["stopReason"] == "end_turn"
    else:
        assert start["agent_type"] == "reviewer" and start["agent_depth"] == 1
        assert start["session_id"] == "cli:t" and start["agent_id"] == "subagent:abc"
        assert start["prompt"] == "review it"
        assert first_stop["last_assistant_message"] == "done?"
        assert first_stop["agent_id"] == "subagent:abc"
    assert first_stop["stop_hook_active"] is False and second_stop["stop_hook_active"] is True


async def test_hooks_off_run_nothing(tmp_path: Path) -> None:
    async with hook_rig(tmp_path, hooks=HooksConfig(enabled=False)) as rig:
        rig.write_copilot("policy.json", {"preToolUse": [{"bash": rig.command("deny-rm")}]})
        rig.fake.script([("exec", {"command": "echo ran; rm -rf nothing"})], "ok")
        await rig.send("go")
        assert rig.app.hooks is None
    assert "ran" in tool_results(rig.fake.requests[-1])[-1]
    assert rig.calls() == []
