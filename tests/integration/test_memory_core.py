"""Memory through the running core (SQLite and PostgreSQL): tools, memory files, compaction."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from sqlalchemy import func, select

from core.agent.config import AgentConfig
from core.agent.context import ContextConfig, estimate_tokens
from core.errors import ProviderUnavailable
from core.event_data import Compaction
from core.memory import MemoryConfig
from core.memory.compaction import SUMMARY_SYSTEM_PROMPT
from core.providers.base import ChatRequest, Completion, ToolCall
from core.providers.scripted import Reply, ScriptedProvider
from core.store.models import HistoryRow
from tests.integration.harness import inbound, running_core
from tests.waiting import eventually

SUMMARY_MARK = SUMMARY_SYSTEM_PROMPT[:40]
SUMMARY_HEADING = "## Earlier in this conversation (summary)\n\n"


def tool_script(request: ChatRequest) -> Reply:
    """``!remember X`` / ``!recall X`` / ``!forget N`` call the tool; a tool result is echoed."""
    last = request.messages[-1]
    if last.role == "tool":
        return f"tool said: {last.content}"
    verb, _, rest = last.content.partition(" ")
    args: dict[str, object]
    if verb == "!remember":
        args = {"text": rest, "tags": ["test"]}
    elif verb == "!remember-global":
        args = {"text": rest, "scope": "global"}
    elif verb == "!recall":
        args = {"query": rest}
    elif verb == "!forget":
        args = {"id": int(rest)}
    else:
        return f"echo: {last.content}"
    name = verb.lstrip("!").removesuffix("-global")
    return Completion(tool_calls=(ToolCall(id="c1", name=name, arguments=args),))


async def ask(store_url: str, workspace: Path, session: str, *texts: str) -> list[str]:
    async with running_core(
        store_url=store_url, workspace=workspace, provider=ScriptedProvider(fn=tool_script)
    ) as (app, replies):
        out = []
        for text in texts:
            message = inbound(session, text)
            await app.bus.publish_inbound(message)
            (reply,) = await replies.wait([message.id])
            out.append(reply.text)
        return out


async def test_remember_then_recall_across_restart(store_url: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (saved,) = await ask(store_url, ws, "cli:alice", "!remember my locker code is 3141")
    assert saved.startswith("tool said: Remembered as #") and "(cli:alice)" in saved
    # A new core on the same store: the daemon restarted.
    found, other, empty, bad = await ask(
        store_url,
        ws,
        "cli:alice",
        "!recall locker code",
        "!recall nothing-like-it",
        "!remember  ",
        "!recall ***",
    )
    hits = json.loads(found.removeprefix("tool said: "))
    assert hits[0]["text"] == "my locker code is 3141"
    assert set(hits[0]) == {"id", "scope", "text", "tags", "date"}
    assert hits[0]["tags"] == ["test"] and hits[0]["scope"] == "cli:alice"
    assert json.loads(other.removeprefix("tool said: ")) == []
    assert "empty" in empty  # a clear tool error, the turn went on
    assert "no words" in bad
    # Another session does not see it; forgetting it from there is answered as for an
    # id that does not exist.
    entry_id = hits[0]["id"]
    (peek, steal) = await ask(store_url, ws, "cli:bob", "!recall locker", f"!forget {entry_id}")
    assert json.loads(peek.removeprefix("tool said: ")) == []
    assert steal == f"tool said: error: there is no memory #{entry_id}"
    (gone,) = await ask(store_url, ws, "cli:alice", f"!forget {entry_id}")
    assert gone == f"tool said: Forgot #{entry_id}."


async def test_memory_file_becomes_recallable(store_url: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    notes = ws / "memory" / "2026-01-05.md"
    notes.parent.mkdir(parents=True)
    notes.write_text("# Trip\n\nThe hotel in Lisbon is Casa Azul.\n\n# Work\n\nStandup at 9.\n")
    config = MemoryConfig(files_poll_seconds=0.1)
    async with running_core(
        store_url=store_url, workspace=ws, provider=ScriptedProvider(), agent=AgentConfig()
    ) as (app, _):
        app.memory_files._config = config  # the core's indexer, polling fast for the test

        async def finds(query: str, text: str) -> bool:
            return any(text in e.text for e in await app.memory.search(query))

        await eventually(lambda: finds("lisbon hotel", "Casa Azul"), timeout=15)
        (hit,) = await app.memory.search("lisbon hotel", limit=1)
        assert hit.scope == "global" and hit.path == "memory/2026-01-05.md"
        notes.write_text("# Trip\n\nThe hotel in Porto is Casa Verde.\n")
        stamp = notes.stat().st_mtime_ns + 1_000_000_000
        os.utime(notes, ns=(stamp, stamp))
        await eventually(lambda: finds("porto hotel", "Casa Verde"), timeout=15)
        assert not await finds("lisbon", "Casa Azul")
        assert not await finds("standup", "Standup")
        # A NUL byte (PostgreSQL text cannot hold one) does not keep a file out.
        (ws / "memory" / "odd.md").write_text("# Gym\n\nThe locker code is 4711\x00.\n")
        await eventually(lambda: finds("locker code", "4711."), timeout=15)


def compaction_script(*, fail_summary: bool) -> ScriptedProvider:
    def reply(request: ChatRequest) -> Reply:
        if request.system.startswith(SUMMARY_MARK):
            if fail_summary:
                raise ProviderUnavailable("summariser down", status=503)
            return "SUMMARY: the user counted numbers."
        return "noted " + request.messages[-1].content + " " + "pad " * 20

    return ScriptedProvider(fn=reply)


def prompt_tokens(request: ChatRequest) -> int:
    summary = request.system.partition(SUMMARY_HEADING)[2]
    history = sum(estimate_tokens(m) for m in request.messages)
    return history + math.ceil(len(summary.strip()) / 4)


async def drive(store_url: str, tmp_path: Path, *, fail_summary: bool) -> None:
    budget, turns = 400, 30
    provider = compaction_script(fail_summary=fail_summary)
    agent = AgentConfig(context=ContextConfig(history_token_budget=budget, summary_max_chars=600))
    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=provider, agent=agent
    ) as (app, replies):
        for n in range(turns):
            message = inbound("cli:long", f"number {n}")
            await app.bus.publish_inbound(message)
            (reply,) = await replies.wait([message.id])
            assert reply.kind == "reply" and reply.text.startswith(f"noted number {n}")

        async def compacted() -> list[Compaction]:
            events = await app.events.list("cli:long")
            return [e.data for e in events if isinstance(e.data, Compaction)]

        await eventually(lambda: _nonempty(compacted()), timeout=15)
        done = await compacted()
        turn_requests = [r for r in provider.requests if not r.system.startswith(SUMMARY_MARK)]
        assert len(turn_requests) == turns
        assert max(prompt_tokens(r) for r in turn_requests) <= budget
        async with app.store.read() as conn:
            count = select(func.count()).where(HistoryRow.session_key == "cli:long")  # type: ignore[arg-type]
            stored = (await conn.execute(count)).scalar()
        assert stored == 2 * turns  # every raw message is still there
        row = await app.sessions.get("cli:long")
        assert row is not None and row.summary and row.summary_upto > 0
        if fail_summary:
            assert {c.method for c in done} == {"extractive"}
            assert all("summariser down" in (c.error or "") for c in done)
            assert "user: number 0" in row.summary or row.summary.startswith("…")
        else:
            assert {c.method for c in done} == {"model"}
            assert row.summary == "SUMMARY: the user counted numbers."
            # The model's summary reaches the prompts. Not necessarily the last one: the
            # compaction runs beside the turns, and while it lags, the lines folded on the
            # fly past the summary's end can push it out of the capped summary section.
            assert any("SUMMARY: the user counted numbers." in r.system for r in turn_requests)


async def _nonempty(found: object) -> bool:
    return bool(await found)  # type: ignore[misc]


async def test_history_past_budget_gets_a_model_written_summary(
    store_url: str, tmp_path: Path
) -> None:
    await drive(store_url, tmp_path, fail_summary=False)


async def test_summariser_failing_falls_back_to_extractive_fold(
    store_url: str, tmp_path: Path
) -> None:
    await drive(store_url, tmp_path, fail_summary=True)
