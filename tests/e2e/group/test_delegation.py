"""Delegation between spawned gateways on one PostgreSQL database (own schemas each):
``sessions_spawn(agent_type="peer:<name>")`` sync and background, a refusal, the
peer's policy, a caller restarted, a peer killed mid-task and a peer gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.group.rig import GroupDb, group_db, homes, member, write_member_config
from tests.e2e.test_daemon_process import Daemon, fake_openai
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
__all__ = ["group_db", "homes"]  # the fixtures

NO_EXEC = '\n[tools.policy.per_channel.group]\ndeny = ["exec"]\n'


def _spawn(peer: str, prompt: str, mode: str = "sync") -> str:
    args = {"agent_type": f"peer:{peer}", "prompt": prompt, "mode": mode}
    return "!tool sessions_spawn " + json.dumps(args)


async def _reply(d: Daemon, message_id: str) -> str:
    found: dict[str, Any] = {}

    async def answered() -> bool:
        found.update(await d.get(f"/v1/messages/{message_id}"))
        return found.get("reply") is not None

    await eventually(answered, timeout=60, interval=0.1, what=f"a reply to {message_id}")
    return str(found["reply"]["text"])


async def _task(db: GroupDb, caller: str, prompt: str) -> tuple[Any, ...]:
    """The newest group task of ``caller`` with this prompt: id, status, result, error."""
    rows = await db.rows(
        "SELECT id, status, result, error FROM familiar_group.group_tasks "
        f"WHERE caller = '{caller}' AND prompt = '{prompt}' ORDER BY created_at DESC"
    )
    return rows[0] if rows else ("", "", None, None)


async def _until_task(db: GroupDb, caller: str, prompt: str, status: str) -> tuple[Any, ...]:
    async def reached() -> bool:
        return (await _task(db, caller, prompt))[1] == status

    await eventually(reached, timeout=60, interval=0.1, what=f"{prompt!r} {status}")
    return await _task(db, caller, prompt)


async def _events(db: GroupDb, schema: str, session: str) -> list[tuple[Any, ...]]:
    return await db.rows(
        f"SELECT type, data FROM {schema}.events WHERE session_key = '{session}' ORDER BY id"
    )


async def test_sync_answer_the_peers_policy_and_a_refusal(
    group_db: GroupDb, homes: list[Path]
) -> None:
    db = group_db
    async with fake_openai() as llm:
        write_member_config(homes[0], llm=llm, db=db, name="home")
        write_member_config(
            homes[1], llm=llm, db=db, name="work", accept_from=["home"], extra=NO_EXEC
        )
        write_member_config(homes[2], llm=llm, db=db, name="bot")
        async with member(homes[0]) as home, member(homes[1]) as work, member(homes[2]) as bot:
            for d in (home, work, bot):
                await d.wait_ready()
            await db.until_members({"home": "active", "work": "active", "bot": "active"}, "all up")

            # agents_list shows the peers with their description.
            await _reply(home, await home.submit("cli:l", "!tool agents_list {}"))
            ((listed,),) = await db.rows(
                f"SELECT content FROM {db.schema('home')}.history "
                "WHERE session_key = 'cli:l' AND role = 'tool'"
            )
            peers = {a["name"]: a for a in json.loads(listed)["agents"] if a.get("kind") == "peer"}
            assert sorted(peers) == ["peer:bot", "peer:work"]
            assert peers["peer:work"]["description"] == "the work assistant"

            # A sync spawn returns the peer's answer as the tool result.
            sent = await home.submit("cli:s", _spawn("work", "what is two and two"))
            assert "echo: what is two and two" in await _reply(home, sent)
            task_id, status, result, _ = await _task(db, "home", "what is two and two")
            assert (status, result) == ("done", "echo: what is two and two")
            peer_log = await _events(db, db.schema("work"), f"group:home:{task_id}")
            assert peer_log[0][0] == "user.message"
            assert "peer:home" in peer_log[0][1]
            caller_log = [t for t, _ in await _events(db, db.schema("home"), "cli:s")]
            assert "subagent.started" in caller_log
            assert "subagent.completed" in caller_log

            # The peer's policy for its group channel binds delegated tasks: no exec.
            prompt = '!tool exec {"command": "echo ran"}'
            await _reply(home, await home.submit("cli:x", _spawn("work", prompt)))
            _, status, result, _ = await _task(db, "home", prompt)
            assert status == "done"
            assert "denied by the channel 'group' policy" in result, result

            # A peer whose accept_from does not name the caller refuses, clearly.
            text = await _reply(home, await home.submit("cli:r", _spawn("bot", "do it")))
            task_id, status, _, error = await _task(db, "home", "do it")
            assert status == "refused"
            assert (
                error
                == "bot does not run tasks from home (its group.accept_from does not name home)"
            )
            assert '"status":"refused"' in text
            (refusal,) = await _events(db, db.schema("bot"), f"group:home:{task_id}")
            assert refusal[0] == "session.error"
            assert "GroupTaskRefused" in refusal[1]
            records = await db.rows(
                f"SELECT status, error FROM {db.schema('home')}.subagent_tasks "
                "WHERE agent_type = 'peer:bot'"
            )
            assert records == [("failed", error)]


async def test_background_after_a_caller_restart_a_killed_peer_and_a_gone_one(
    group_db: GroupDb, homes: list[Path]
) -> None:
    db = group_db
    async with fake_openai() as llm:
        write_member_config(homes[0], llm=llm, db=db, name="home")
        write_member_config(homes[1], llm=llm, db=db, name="work", accept_from=["home"])
        async with member(homes[1]) as work:
            async with member(homes[0]) as home:
                await home.wait_ready()
                await work.wait_ready()
                await db.until_members({"home": "active", "work": "active"}, "both up")
                started = await home.submit(
                    "cli:b", _spawn("work", "!sleep 2 background work", "background")
                )
                assert '"status":"running"' in await _reply(home, started)
                await _until_task(db, "home", "!sleep 2 background work", "running")
                await home.kill()  # the caller goes down while the peer works
            await _until_task(db, "home", "!sleep 2 background work", "done")
            replies = await db.rows(
                f"SELECT id FROM {db.schema('home')}.outbound WHERE session_key = 'cli:b'"
            )
            assert len(replies) == 1  # no handoff yet: nobody of "home" runs
            async with member(homes[0]) as home:
                await home.wait_ready()  # restarted: it re-watches its open peer tasks

                async def handed_over() -> bool:
                    rows = await db.rows(
                        f"SELECT payload FROM {db.schema('home')}.outbound "
                        "WHERE session_key = 'cli:b'"
                    )
                    texts = [json.loads(p)["text"] for (p,) in rows]
                    return any(t.startswith("echo: [subagent handoff]") for t in texts)

                await eventually(handed_over, timeout=60, interval=0.1, what="the handoff")

                # The peer dies mid-task: after its lease the caller hands back a failure.
                await home.submit("cli:k", _spawn("work", "!sleep 60 doomed", "background"))
                await _until_task(db, "home", "!sleep 60 doomed", "running")
                await work.kill()
                _, _, _, error = await _until_task(db, "home", "!sleep 60 doomed", "failed")
                assert "lease" in error

                async def failure_handed_back() -> bool:
                    rows = await db.rows(
                        f"SELECT payload FROM {db.schema('home')}.outbound "
                        "WHERE session_key = 'cli:k'"
                    )
                    return any("[subagent handoff]" in json.loads(p)["text"] for (p,) in rows)

                await eventually(failure_handed_back, timeout=30, interval=0.1, what="failure")

                # Once gone from the roster, a spawn fails at once, saying so.
                await db.until_members({"work": "gone"}, "work gone")
                text = await _reply(home, await home.submit("cli:g", _spawn("work", "hello")))
                assert "is gone" in text, text
