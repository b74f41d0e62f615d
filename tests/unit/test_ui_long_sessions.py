"""A long session's page renders its newest turns and events only, and says how many it
leaves out: rendering every Markdown reply of a year-old channel session held up the
gateway's event loop for seconds (5 s for 1,500 turns and 10,000 events)."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.ui.pages.chat import transcript_context
from gateway.ui.pages.sessions import session_context
from gateway.ui.render import Templates
from gateway.ui.transcript import SHOWN_EVENTS, SHOWN_TURNS

TURNS = 1_500
EVENTS = 10_000
REPLY = "Some **markdown** with `code` and a [link](https://example.org).\n\n- a\n- b\n" * 10


def _detail(key: str) -> dict[str, Any]:
    history: list[dict[str, Any]] = []
    for i in range(TURNS):
        message_id = f"m{i:06d}"
        history.append({"role": "user", "content": f"question {i}", "message_id": message_id})
        history[-1]["at"] = 1e9 + i
        history.append({"role": "assistant", "content": REPLY, "message_id": message_id})
        history[-1]["at"] = 1e9 + i + 0.5
    events = [
        {
            "id": i,
            "type": "tool.execution_start",
            "message_id": f"m{i % TURNS:06d}",
            "at": 1e9 + i,
            "data": {"tool": "exec", "call_id": f"c{i}", "arguments": {"cmd": f"event-{i}"}},
        }
        for i in range(EVENTS)
    ]
    session = {"key": key, "channel": key.split(":")[0], "created_at": 1e9, "updated_at": 1e9}
    return {"session": {**session, "messages": 2 * TURNS}, "history": history, "events": events}


def _render(template: str, context: dict[str, Any]) -> str:
    templates = Templates()
    asyncio.run(templates.load())
    base = {"csrf": "t", "operator": "op", "nav": [], "title": "x"}
    return templates.render(template, {**base, **context})


def test_the_sessions_page_shows_the_newest_turns_and_events_of_a_long_session() -> None:
    context = session_context(_detail("slack:C1"))
    page = {"sessions": [], "listed_max": 300, "channels": [], "channel": "", "q": ""}
    html = _render("sessions.html", {**page, "problem": None, "here": "/ui/sessions", **context})
    assert len(context["turns"]) == SHOWN_TURNS
    assert f"question {TURNS - 1}<" in html and f"question {TURNS - SHOWN_TURNS - 1}<" not in html
    assert f"{TURNS - SHOWN_TURNS} older turns are not shown here" in html
    assert html.count("<tr>") - 1 == SHOWN_EVENTS  # (the header row)
    assert f"event-{EVENTS - 1}" in html and f"event-{EVENTS - SHOWN_EVENTS - 1}\\" not in html
    assert f"{EVENTS - SHOWN_EVENTS} older events are not shown here" in html
    assert len(html) < 1_000_000, len(html)  # the work done, not its time (8.9 MB uncapped)


def test_the_chat_page_shows_the_newest_turns_of_a_long_session() -> None:
    context = transcript_context(_detail("ui:long"), [], "ui:long")
    html = _render("chat/_transcript.html", context)
    assert len(context["items"]) == SHOWN_TURNS
    assert f"question {TURNS - 1}<" in html and f"question {TURNS - SHOWN_TURNS - 1}<" not in html
    assert f"{TURNS - SHOWN_TURNS} older turns are not shown here" in html
    assert "familiar sessions show ui:long" in html
    assert len(html) < 1_000_000, len(html)  # the work done, not its time (8.9 MB uncapped)
