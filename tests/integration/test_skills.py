"""Agent Skills end to end: the model sees the catalog, loads a skill through the ``skill``
tool, reads a home skill's files, an agent's ``skills`` list limits what it sees, and
``allowed-tools`` binds the rest of the message."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from core.skills.config import SkillsConfig
from tests.fakes.fake_openai import ScriptItem
from tests.integration.harness import inbound
from tests.integration.subagent_rig import last_text, only_task, rig, tool_results
from tests.unit.test_skills_files import PDF_SKILL, simple, write_skill

SESSION = "test:skills"


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """Skills do not touch the store: SQLite only."""
    return f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}"


def _system(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def _tools(body: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools") or [])


def _session_bodies(fake: Any, session: str) -> list[dict[str, Any]]:
    return [b for b in fake.requests if f"- Session: {session}\n" in _system(b) + "\n"]


def _scripted(*calls: tuple[str, dict[str, Any]]) -> Any:
    """For each message: call ``calls`` one by one, then answer with their results as JSON."""

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        results = [m.get("content") for m in messages[last_user:] if m.get("role") == "tool"]
        if len(results) < len(calls):
            return [calls[len(results)]]
        return json.dumps(results)

    return respond


async def test_the_model_sees_the_catalog_and_loads_a_skill(store_url: str, tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    write_skill(
        workspace / ".agents" / "skills",
        "pdf-forms",
        PDF_SKILL,
        **{"scripts/list_fields.py": "print('fields')\n", "references/FIELDS.md": "Types.\n"},
    )
    write_skill(home / "skills", "release-notes", simple("release-notes", "Writes release notes."))
    respond = _scripted(("skill", {"name": "pdf-forms"}))
    async with rig(tmp_path, store_url, respond, home=home) as (app, replies, fake):
        message = inbound(SESSION, "fill in the tax form")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
    first = fake.requests[0]
    system = _system(first)
    assert "## Skills\n" in system
    assert "- pdf-forms: Fills PDF forms and extracts their fields. Use when" in system
    assert "- release-notes: Writes release notes." in system
    assert "skill" in _tools(first)
    (loaded,) = json.loads(reply.text)
    assert loaded.startswith('<skill_content name="pdf-forms">\n# Filling PDF forms\n')
    assert "Skill folder: .agents/skills/pdf-forms (in the workspace" in loaded
    assert "<skill_resources>\nreferences/FIELDS.md\nscripts/list_fields.py\n" in loaded
    assert "Compatibility: Requires python3 and the pypdf package" in loaded


async def test_a_home_skill_file_is_read_through_the_tool_and_escapes_are_refused(
    store_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[provider]\napi_key = "sk-secret"\n')
    folder = write_skill(
        home / "skills",
        "release-notes",
        simple("release-notes", "Writes release notes."),
        **{"references/STYLE.md": "Past tense, one line per change.\n"},
    ).parent
    os.symlink(home / "config.toml", folder / "references" / "leak.md")
    respond = _scripted(
        ("skill", {"name": "release-notes"}),
        ("skill", {"name": "release-notes", "path": "references/STYLE.md"}),
        ("skill", {"name": "release-notes", "path": "../../config.toml"}),
        ("skill", {"name": "release-notes", "path": str(home / "config.toml")}),
        ("skill", {"name": "release-notes", "path": "references/leak.md"}),
        ("read_file", {"path": "../home/config.toml"}),
        ("skill", {"name": "release notes"}),
    )
    async with rig(tmp_path, store_url, respond, home=home) as (app, replies, _fake):
        message = inbound(SESSION, "write the notes")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
    loaded, style, dotdot, absolute, link, read_file, guess = json.loads(reply.text)
    assert (
        "Skill folder: $FAMILIAR_HOME/skills/release-notes (outside the workspace: read a "
        'file with skill(name="release-notes", path="<file>")' in loaded
    )
    assert "<skill_resources>\nreferences/STYLE.md\n</skill_resources>" in loaded
    assert style == "Past tense, one line per change.\n"
    assert dotdot.startswith("error: path '../../config.toml' leaves the skill's folder")
    assert absolute.startswith("error: path ") and "leaves the skill's folder" in absolute
    assert link.startswith("error: skill 'release-notes' has no file 'references/leak.md'")
    assert read_file.startswith("error:") and "outside the workspace" in read_file
    assert guess == (
        "error: no skill 'release notes'; skills that match: release-notes\n"
        "(fix the arguments and call skill again)"
    )
    assert "sk-secret" not in reply.text


async def test_an_agent_skills_field_limits_the_catalog(store_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    for name in ("alpha", "beta"):
        write_skill(workspace / "skills", name, simple(name, f"The {name} skill."))
    agent = workspace / ".claude" / "agents" / "narrow.md"
    agent.parent.mkdir(parents=True)
    agent.write_text(
        "---\nname: narrow\ndescription: Sees alpha only\nskills:\n  - alpha\n---\nGo.\n"
    )

    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            if last_text(messages) is None:
                return [("skill", {"name": "beta"}), ("skill", {"name": "alpha"})]
            return json.dumps(tool_results(messages))
        if (result := last_text(messages)) is not None:
            return f"parent got: {result}"
        return [("sessions_spawn", {"agent_type": "narrow", "prompt": "work"})]

    async with rig(tmp_path, store_url, respond) as (app, replies, fake):
        message = inbound(SESSION, "go")
        await app.bus.publish_inbound(message)
        (reply,) = await replies.wait([message.id])
        task = await only_task(app, SESSION)
    parent = _system(_session_bodies(fake, SESSION)[0])
    assert "- alpha: The alpha skill." in parent and "- beta: The beta skill." in parent
    child = _system(_session_bodies(fake, task.child_key)[0])
    assert "- alpha: The alpha skill." in child
    assert "beta" not in child
    result = json.loads(reply.text.removeprefix("parent got: "))["result"]
    beta, alpha = json.loads(result)
    assert beta.startswith("error: no skill 'beta'")
    assert alpha.startswith('<skill_content name="alpha">\nSteps for alpha.')


async def test_allowed_tools_bind_the_rest_of_the_message(store_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    write_skill(
        workspace / "skills",
        "read-only-review",
        "---\nname: read-only-review\ndescription: Reviews without changing anything\n"
        "allowed-tools: Read Grep\n---\nRead the files, change nothing.\n",
    )
    (workspace / "notes.txt").parent.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("hello\n")
    calls = (
        ("write_file", {"path": "before.txt", "content": "x"}),
        ("skill", {"name": "read-only-review"}),
        ("read_file", {"path": "notes.txt"}),
        ("write_file", {"path": "after.txt", "content": "x"}),
        ("exec", {"command": "touch after-exec.txt"}),
        ("skill", {"name": "read-only-review", "path": "SKILL.md"}),
    )
    async with rig(tmp_path, store_url, _scripted(*calls)) as (app, replies, _fake):
        first = inbound(SESSION, "review")
        await app.bus.publish_inbound(first)
        (reply,) = await replies.wait([first.id])
        again = inbound(SESSION, "now write")
        await app.bus.publish_inbound(again)
        (second,) = await replies.wait([again.id])
    before, loaded, read, write, run, own = json.loads(reply.text)
    assert before.startswith("wrote")
    assert (
        "allowed-tools: until this message is answered, only these tools run: read_file, "
        "list_dir, resolve_path, skill, task_complete." in loaded
    )
    assert read == "hello\n"
    refusal = (
        "error: denied: tool '{}' is not allowed here: not among the allowed-tools of skill "
        "'read-only-review' (active until this message is answered)"
    )
    assert write == refusal.format("write_file")
    assert run == refusal.format("exec")
    assert own.startswith("---\nname: read-only-review")
    assert not (workspace / "after.txt").exists()
    assert not (workspace / "after-exec.txt").exists()
    # The next message starts with no skill active: write_file runs again.
    assert json.loads(second.text)[0].startswith("wrote")


async def test_no_skills_no_tool_and_off_means_off(store_url: str, tmp_path: Path) -> None:
    respond = _scripted()
    async with rig(tmp_path, store_url, respond) as (app, replies, fake):
        message = inbound(SESSION, "hi")
        await app.bus.publish_inbound(message)
        await replies.wait([message.id])
    assert "skill" not in _tools(fake.requests[0])
    assert "## Skills" not in _system(fake.requests[0])
    write_skill(tmp_path / "ws" / "skills", "alpha", simple("alpha"))
    off = SkillsConfig(enabled=False)
    async with rig(tmp_path, store_url, respond, skills=off) as (app, replies, fake):
        message = inbound(SESSION, "hi again")
        await app.bus.publish_inbound(message)
        await replies.wait([message.id])
        assert app.skills is None
    assert "skill" not in _tools(fake.requests[0])
    assert "## Skills" not in _system(fake.requests[0])
