"""Policy follows delegation: a subagent is bound by the channel rules of the session that
started its chain and by every agent above it, at any depth, across a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.messages import Delivery, InboundMessage, OutboundMessage
from core.tools.config import ExecConfig, PolicyRule, ToolPolicyConfig, ToolsConfig
from tests.fakes.fake_openai import FakeOpenAI, ScriptItem
from tests.integration.subagent_rig import last_text, last_user, rig, tool_results
from tests.integration.webhook_harness import running_webhook, write_webhook_config

ROOT = "webhook:ci:nightly"
MARKER = "pwned.txt"
EXEC_CALL = ("exec", {"command": f"echo ran > {MARKER}"})


def _webhook_message(text: str) -> InboundMessage:
    return InboundMessage(
        session_key=ROOT, text=text, delivery=Delivery(channel="webhook", chat_id="ci")
    )


async def _ask(app: Any, text: str) -> OutboundMessage:
    message = _webhook_message(text)
    await app.bus.publish_inbound(message)
    reply = await app.bus.wait_reply(message.id, 60)
    assert reply is not None, "no reply within 60 s"
    return reply  # type: ignore[no-any-return]


def _offered(fake: FakeOpenAI, key: str) -> set[str]:
    """The tools offered in the first model request of session ``key``."""
    for body in fake.requests:
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        if f"- Session: {key}\n" in system + "\n":
            return {t["function"]["name"] for t in body.get("tools", [])}
    raise AssertionError(f"no request of {key}")


def _respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
    """The root spawns what its message names; children run exec or delegate further."""
    user = last_user(messages)
    results = tool_results(messages) if last_text(messages) is not None else None
    if session == ROOT:
        if results is not None:
            return "root got: " + json.dumps(results)
        return [
            ("sessions_spawn", {"agent_type": t, "prompt": p})
            for t, p in json.loads(user)  # [[agent_type, prompt], ...]
        ]
    if results is not None:
        return f"{user} -> " + json.dumps(results)
    if user.startswith("delegate to "):
        agent_type = user.removeprefix("delegate to ")
        return [("sessions_spawn", {"agent_type": agent_type, "prompt": "run exec"})]
    return [EXEC_CALL]


def _deny_exec_on_webhook(**more: Any) -> ToolsConfig:
    policy = ToolPolicyConfig(per_channel={"webhook": PolicyRule(deny=["exec"])}, **more)
    return ToolsConfig(policy=policy)


def _results(reply: OutboundMessage) -> list[dict[str, Any]]:
    assert reply.text.startswith("root got: "), reply.text
    return [json.loads(r) for r in json.loads(reply.text.removeprefix("root got: "))]


async def test_a_webhook_caller_gets_no_exec_through_task_or_general_purpose_children(
    store_url: str, tmp_path: Path
) -> None:
    spawn = json.dumps([["task", "run exec"], ["general-purpose", "run exec"]])
    async with rig(tmp_path, store_url, _respond, tools=_deny_exec_on_webhook()) as (
        app,
        _replies,
        fake,
    ):
        reply = await _ask(app, spawn)
        tasks = await app.tasks.repo.list(owner_key=ROOT)
        offered = {t.agent_type: _offered(fake, t.child_key) for t in tasks}
    results = _results(reply)
    assert [r["status"] for r in results] == ["completed", "completed"]
    for result in results:
        assert "error: denied: tool 'exec' is not allowed here" in result["result"]
        assert "channel 'webhook'" in result["result"]
        assert ROOT in result["result"]  # names the session whose channel rule it is
    assert not (tmp_path / "ws" / MARKER).exists()
    # Not even offered: the children's requests list no exec.
    assert "exec" not in offered["task"] and "read_file" in offered["task"]
    assert "exec" not in offered["general-purpose"]
    assert {"read_file", "sessions_spawn", "write_file"} <= offered["general-purpose"]
    assert "exec" not in _offered(fake, ROOT)


async def test_the_root_channel_binds_a_grandchild_at_depth_two(
    store_url: str, tmp_path: Path
) -> None:
    spawn = json.dumps([["general-purpose", "delegate to task"]])
    async with rig(tmp_path, store_url, _respond, tools=_deny_exec_on_webhook()) as (
        app,
        _replies,
        fake,
    ):
        reply = await _ask(app, spawn)
        (child,) = await app.tasks.repo.list(owner_key=ROOT)
        (grandchild,) = await app.tasks.repo.list(owner_key=child.child_key)
        grand_offered = _offered(fake, grandchild.child_key)
    assert grandchild.depth == 2 and grandchild.agent_type == "task"
    (result,) = _results(reply)
    assert "tool 'exec' is not allowed here" in result["result"]
    assert "channel 'webhook'" in result["result"]
    assert "exec" not in grand_offered and "read_file" in grand_offered
    assert not (tmp_path / "ws" / MARKER).exists()


async def test_the_same_chain_from_the_cli_may_run_exec(store_url: str, tmp_path: Path) -> None:
    """The rule is the webhook's: a CLI root's grandchild runs exec (the control case)."""
    cli_root = "cli:ops"

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        return _respond(ROOT if session == cli_root else session, messages)

    spawn = json.dumps([["general-purpose", "delegate to task"]])
    async with rig(tmp_path, store_url, respond, tools=_deny_exec_on_webhook()) as (
        app,
        _replies,
        _fake,
    ):
        message = InboundMessage(
            session_key=cli_root, text=spawn, delivery=Delivery(channel="cli", chat_id="ops")
        )
        await app.bus.publish_inbound(message)
        reply = await app.bus.wait_reply(message.id, 60)
    assert reply is not None
    (result,) = _results(reply)
    assert "exit code 0" in result["result"], result
    assert (tmp_path / "ws" / MARKER).read_text() == "ran\n"


async def test_an_ancestors_agent_profile_binds_its_grandchildren(
    store_url: str, tmp_path: Path
) -> None:
    """A custom agent without exec cannot get it by starting a general-purpose child; and
    a per-agent rule of an agent above holds below it too."""
    agent = tmp_path / "ws" / "agents" / "planner.md"
    agent.parent.mkdir(parents=True)
    agent.write_text(
        "---\ndescription: Plans and delegates\ntools:\n  - sessions_spawn\n  - read_file\n"
        "  - list_dir\n---\nPlan, then delegate.\n"
    )
    spawn = json.dumps([["planner", "delegate to general-purpose"]])
    policy = {"per_agent": {"planner": PolicyRule(deny=["list_dir"])}}
    tools = ToolsConfig(policy=ToolPolicyConfig(**policy))
    async with rig(tmp_path, store_url, _respond, tools=tools, home=tmp_path / "home") as (
        app,
        _replies,
        fake,
    ):
        reply = await _ask(app, spawn)
        (planner,) = await app.tasks.repo.list(owner_key=ROOT)
        (worker,) = await app.tasks.repo.list(owner_key=planner.child_key)
        worker_offered = _offered(fake, worker.child_key)
    assert (planner.agent_type, worker.agent_type) == ("planner", "general-purpose")
    (result,) = _results(reply)
    assert "tool 'exec' is not allowed here" in result["result"]
    assert "not among the tools of agent 'planner' above it" in result["result"]
    assert worker_offered == {"sessions_spawn", "read_file"}  # list_dir: planner's rule
    assert not (tmp_path / "ws" / MARKER).exists()


async def test_a_subagent_never_gets_an_approval_its_root_could_not(
    store_url: str, tmp_path: Path
) -> None:
    """With every command needing approval, a child's exec is refused outright: nobody
    answers in a subagent session, and nothing waits for an /approve."""
    tools = ToolsConfig(exec=ExecConfig(approval="always"))
    spawn = json.dumps([["task", "run exec"]])
    async with rig(tmp_path, store_url, _respond, tools=tools) as (app, _replies, _fake):
        reply = await _ask(app, spawn)
    (result,) = _results(reply)
    assert "needs the user's approval, and nobody can answer in this session" in result["result"]
    assert "/approve" not in reply.text
    assert not (tmp_path / "ws" / MARKER).exists()


async def test_the_lineage_is_read_again_after_a_restart(store_url: str, tmp_path: Path) -> None:
    """The chain comes from the stored records: a fresh core (another process after a
    restart) binds an existing child by its root's channel as well."""
    spawn = json.dumps([["general-purpose", "delegate to task"]])
    async with rig(tmp_path, store_url, _respond, tools=_deny_exec_on_webhook()) as (app, _r, _f):
        await _ask(app, spawn)
        (child,) = await app.tasks.repo.list(owner_key=ROOT)
        (grandchild,) = await app.tasks.repo.list(owner_key=child.child_key)
    async with rig(tmp_path, store_url, _respond, tools=_deny_exec_on_webhook()) as (app, _r, _f):
        profile = await app.tasks.profiles.profile(grandchild.child_key)
    assert profile is not None and profile.lineage is not None
    lineage = profile.lineage
    assert (lineage.root_key, lineage.root_channel) == (ROOT, "webhook")
    assert [a.agent_type for a in lineage.ancestors] == ["main", "general-purpose"]
    assert not lineage.root_is_local_cli


async def test_through_the_real_webhook_route(
    daemon_home: Path, restore_root_logging: None
) -> None:
    """The same as a caller does it: a signed POST to /webhook/ci, a gateway configured
    with tools.policy.per_channel.webhook.deny = ["exec"] in config.toml."""
    async with FakeOpenAI(responder=_respond) as fake:
        provider = (
            f'[provider]\nkind = "openai"\nbase_url = "{fake.base_url}"\n'
            'model = "fake-model"\napi_key = "sk-x"\nmax_retries = 0\n'
            '\n[tools.policy.per_channel.webhook]\ndeny = ["exec"]\n'
        )
        hooks = '[channels.webhook.hooks.ci]\nsecret = "whsec-delegation"\nwait_timeout = 60\n'
        write_webhook_config(daemon_home, provider=provider, hooks=hooks)
        spawn = json.dumps([["task", "run exec"], ["general-purpose", "delegate to task"]])
        async with running_webhook(daemon_home) as gw:
            body = {"text": spawn, "session": "nightly", "wait": True}
            answer = await gw.post("ci", body, secret="whsec-delegation")
    assert answer.status == 200, answer
    results = [json.loads(r) for r in json.loads(answer.body["reply"].removeprefix("root got: "))]
    assert len(results) == 2
    for result in results:
        assert (
            "tool 'exec' is not allowed here: denied by the channel 'webhook'" in result["result"]
        )
    assert not (daemon_home / "workspace" / MARKER).exists()
    assert not any(
        t["function"]["name"] == "exec" for body in fake.requests for t in body.get("tools", [])
    )
