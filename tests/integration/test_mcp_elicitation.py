"""MCP servers' questions (``elicitation/create``) during plain calls: asked in the root
session, answered with ``/answer`` or ``/decline`` while the call waits, cancelled when
nobody answers in time; URL mode shows the URL."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.fakes.fake_openai import FakeOpenAI, ToolCalls
from tests.integration.test_daemon import Gateway, running, write_config
from tests.integration.test_mcp_tasks import servers, tool_results
from tests.waiting import eventually


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """The daemon runs in-process."""


async def question(gw: Gateway, session: str = "cli:test") -> tuple[str, str]:
    """The newest question shown in ``session``: its id and text."""

    async def shown() -> str | None:
        async with gw.http.get(f"http://familiar/v1/sessions/{session}") as response:
            if response.status == 404:
                return None  # its first message is not in yet
            unread = (await response.json())["unread"]
        texts = [u["text"] for u in unread if "asks (question" in u["text"]]
        return texts[-1] if texts else None

    await eventually(shown, what=f"a question in {session}")
    text = await shown()
    assert text is not None
    found = re.search(r"question (\w+)", text)
    assert found is not None
    return found.group(1), text


@pytest.mark.slow
async def test_a_question_during_a_call_is_answered_while_the_turn_waits(
    daemon_home: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path))
        fake.script(ToolCalls((("mcp__fake__ask", {"question": "Your name?"}),)), "Thanks.")
        async with running(daemon_home) as gw:
            turn = asyncio.create_task(gw.send("ask me"))
            qid, text = await question(gw)
            missing = await gw.send("/answer nosuch Ada")
            answered = await gw.send(f"/answer {qid} Ada Lovelace")
            again = await gw.send(f"/answer {qid} Bob")
            lines = await turn
    assert "Your name?" in text and "- answer (Answer) [string, required]" in text
    assert "no question nosuch in this conversation" in missing[-1]["text"]
    assert answered[-1]["text"].startswith(f"Answered question {qid}")
    assert "answered already" in again[-1]["text"]
    assert tool_results(fake)[-1] == "answer: Ada Lovelace"
    assert lines[-1]["text"] == "Thanks."


@pytest.mark.slow
async def test_another_conversation_can_neither_answer_nor_see_the_question(
    daemon_home: Path, tmp_path: Path
) -> None:
    """Whoever talks in another session (another channel's caller included) gets the
    reply of an id that does not exist, and the question waits on for its own person."""
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path))
        fake.script(ToolCalls((("mcp__fake__ask", {"question": "Your PIN?"}),)), "Thanks.")
        async with running(daemon_home) as gw:
            turn = asyncio.create_task(gw.send("ask me"))
            qid, _ = await question(gw)
            other = "cli:intruder"
            listed = await gw.send("/answer", session=other)
            answer = await gw.send(f"/answer {qid} 0000", session=other)
            decline = await gw.send(f"/decline {qid}", session=other)
            unknown = await gw.send("/decline nosuch", session=other)
            own = await gw.send(f"/answer {qid} 1234")
            await turn
    assert listed[-1]["text"] == "No MCP server is waiting for an answer in this conversation."
    assert answer[-1]["text"] == f"no question {qid} in this conversation"
    assert decline[-1]["text"] == f"no question {qid} in this conversation"
    assert unknown[-1]["text"] == "no question nosuch in this conversation"  # alike
    assert own[-1]["text"].startswith(f"Answered question {qid}")
    assert tool_results(fake)[-1] == "answer: 1234"


@pytest.mark.slow
async def test_a_url_question_shows_the_url_and_can_be_declined(
    daemon_home: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path))
        fake.script(ToolCalls((("mcp__fake__login", {}),)), "ok")
        async with running(daemon_home) as gw:
            turn = asyncio.create_task(gw.send("log in"))
            qid, text = await question(gw)
            declined = await gw.send(f"/decline {qid}")
            await turn
    assert "Open: https://login.example/fake" in text and "Sign in" in text
    assert declined[-1]["text"].startswith(f"Declined question {qid}")
    assert tool_results(fake)[-1] == "login: decline"


@pytest.mark.slow
async def test_an_unanswered_question_is_cancelled_after_the_timeout(
    daemon_home: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        config = servers(tmp_path).replace("elicitation_timeout = 120", "elicitation_timeout = 1")
        write_config(daemon_home, fake, config)
        fake.script(ToolCalls((("mcp__fake__ask", {"question": "Still there?"}),)), "ok")
        async with running(daemon_home) as gw:
            await gw.send("ask me")
            qid, text = await question(gw)
            late = await gw.send(f"/answer {qid} yes")
    assert "cancelled if unanswered in 1 s" in text
    assert tool_results(fake)[-1] == "cancelled"
    assert "was cancelled already" in late[-1]["text"]


@pytest.mark.slow
async def test_a_subagents_question_is_asked_in_the_root_session(
    daemon_home: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path))
        spawn = {"agent_type": "general-purpose", "prompt": "ask the user", "mode": "sync"}
        fake.script(
            ToolCalls((("sessions_spawn", spawn),)),
            ToolCalls((("mcp__fake__ask", {"question": "Colour?"}),)),
            "child done",
            "parent done",
        )
        async with running(daemon_home) as gw:
            turn = asyncio.create_task(gw.send("delegate"))
            qid, text = await question(gw)
            await gw.send(f"/answer {qid} green")
            lines = await turn
    assert "Colour?" in text
    assert "answer: green" in tool_results(fake)
    assert lines[-1]["text"] == "parent done"


@pytest.mark.slow
async def test_a_question_is_refused_when_two_conversations_call_the_server(
    daemon_home: Path, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path))
        fake.script(
            ToolCalls((("mcp__fake__ask", {"question": "A?"}),)),
            ToolCalls((("mcp__fake__ask", {"question": "B?"}),)),
            "B done",
            "A done",
        )
        async with running(daemon_home) as gw:
            first = asyncio.create_task(gw.send("ask", session="cli:a"))
            qid, _ = await question(gw, "cli:a")
            second = await gw.send("ask too", session="cli:b")
            await gw.send(f"/answer {qid} Ada", session="cli:a")
            await first
    results = tool_results(fake)
    assert "cannot tell whose question this is" in results[0]
    assert results[1] == "answer: Ada"
    assert second[-1]["text"] == "B done"


@pytest.mark.slow
async def test_sampling_is_refused_when_two_conversations_call_the_server(
    daemon_home: Path, tmp_path: Path
) -> None:
    """Whose request it is is not on the wire: its cost is never put on the wrong one."""
    async with FakeOpenAI() as fake:
        write_config(daemon_home, fake, servers(tmp_path, sampling=True))
        fake.script(
            ToolCalls((("mcp__fake__sample", {"prompt": "from a", "after": "a-go"}),)),
            ToolCalls((("mcp__fake__sample", {"prompt": "from b", "after": "b-go"}),)),
            "A done",
            "hi from the fake model",
            "B done",
        )
        async with running(daemon_home) as gw:
            first = asyncio.create_task(gw.send("sample", session="cli:a"))
            await eventually(lambda: len(fake.requests) == 1, what="a's call made")
            second = asyncio.create_task(gw.send("sample too", session="cli:b"))
            await eventually(lambda: len(fake.requests) == 2, what="b's call made")
            (tmp_path / "a-go").touch()  # a asks while both calls are open
            await first
            (tmp_path / "b-go").touch()  # b asks alone
            await second
            events = {
                s: (await gw.get(f"/v1/sessions/{s}?events=1"))["events"]
                for s in ("cli:a", "cli:b")
            }
    a_result, b_result = tool_results(fake)
    assert "refused:" in a_result and "several conversations" in a_result, a_result
    assert "model said: hi from the fake model" in b_result
    sampled = {s: [e for e in found if e["type"] == "mcp.sampling"] for s, found in events.items()}
    assert sampled["cli:a"] == [] and len(sampled["cli:b"]) == 1
