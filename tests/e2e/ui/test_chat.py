"""The Chat and Sessions pages in Chromium: a streamed reply, tool steps, the session list."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.ui.conftest import UiGateway
from tests.fakes.fake_openai import Text, ToolCalls
from tests.waiting import eventually_sync

pytestmark = pytest.mark.slow

_REPLY = "Here is **the answer**, streamed in pieces:\n\n- first point\n- second point"


def _send(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_chat_streams_the_reply_and_shows_tool_steps(
    gateway: UiGateway,
    page: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    login(page)
    page.goto(gateway.url("/ui/chat?s=web"))
    expect(page.get_by_role("heading", name="ui:web")).to_be_visible()
    # Several chunks, a beat apart: the page shows the reply while it is being written.
    gateway.fake.script(Text(_REPLY, chunk_chars=6, chunk_delay=0.25))
    _send(page, "What is the answer?")

    turn = page.locator("#transcript .turn").filter(has_text="What is the answer?")
    expect(turn.locator(".msg.user .msg-text")).to_have_text("What is the answer?")
    streaming = turn.locator('[data-state="streaming"]')
    expect(streaming).to_be_visible()
    partial = streaming.locator(".md").inner_text()
    assert partial and len(partial) < len("Here is the answer, streamed in pieces:")
    done = turn.locator('[data-state="done"]')
    expect(done.locator("strong")).to_have_text("the answer")
    expect(done.locator("li")).to_have_text(["first point", "second point"])
    expect(page.get_by_label("Message")).to_have_value("")  # the form was reset

    # A tool call: a collapsible step with its arguments and result.
    _send(page, '!tool list_dir {"path": "."}')
    turn = page.locator("#transcript .turn").filter(has_text="!tool list_dir")
    expect(turn.locator('[data-state="done"]')).to_contain_text("tool said:")
    step = turn.locator('details.step[data-kind="tool"]')
    expect(step.locator("summary")).to_contain_text("list_dir")
    expect(step.locator("summary")).to_contain_text("done")
    assert step.get_attribute("open") is None
    expect(step.locator("pre").first).not_to_be_visible()
    step.locator("summary").click()
    expect(step.locator("pre").first).to_contain_text('"path": "."')

    # A subagent: a step of its own, with its answer.
    spawn = {"agent_type": "general-purpose", "prompt": "child work", "mode": "sync"}
    _send(page, "!tool sessions_spawn " + json.dumps(spawn))
    turn = page.locator("#transcript .turn").filter(has_text="!tool sessions_spawn")
    expect(turn.locator('[data-state="done"]')).to_contain_text("tool said:")
    agent = turn.locator('details.step[data-kind="subagent"]')
    expect(agent.locator("summary")).to_contain_text("general-purpose (sync)")
    expect(agent.locator("summary")).to_contain_text("done")
    agent.locator("summary").click()
    expect(agent).to_contain_text("echo: child work")

    # Reloaded, the conversation comes from the session's history, steps and all.
    page.reload()
    turns = page.locator("#transcript .turn")
    expect(turns).to_have_count(3)
    expect(turns.nth(0).locator(".md strong")).to_have_text("the answer")
    expect(turns.nth(1).locator("details.step summary")).to_contain_text("list_dir")
    expect(page.get_by_role("link", name="web", exact=True)).to_be_visible()
    turns.nth(1).locator("details.step summary").click()
    shot(page, "chat")

    # A slash command: its plain-text answer.
    _send(page, "/help")
    asked = page.locator("#transcript .turn").filter(has_text="/help")
    expect(asked.locator(".msg.assistant pre")).to_contain_text("/stop")


def test_a_step_opened_while_the_reply_streams_stays_open_and_focused(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    login(page)
    page.goto(gateway.url("/ui/chat?s=keep-place"))
    slow = "The files, one by one, " + "and then some more " * 6
    gateway.fake.script(
        ToolCalls((("list_dir", {"path": "."}),)), Text(slow, chunk_chars=4, chunk_delay=0.1)
    )
    _send(page, "List the files slowly")
    turn = page.locator("#transcript .turn").filter(has_text="List the files slowly")
    step = turn.locator('details.step[data-kind="tool"]')
    streaming = turn.locator('[data-state="streaming"] .md')
    expect(streaming).to_be_visible()
    step.locator("summary").focus()
    page.keyboard.press("Enter")  # opened from the keyboard
    expect(step.locator("pre").first).to_contain_text('"path": "."')
    shown = len(streaming.inner_text())
    eventually_sync(
        lambda: len(turn.locator(".md").first.inner_text()) > shown + 8,
        what="the reply went on streaming (the part was redrawn) after the step was opened",
    )
    expect(turn.locator('[data-state="done"]')).to_contain_text("and then some more")
    assert step.get_attribute("open") is not None
    expect(step.locator("summary")).to_be_focused()


def test_sessions_lists_filters_and_shows_history(
    gateway: UiGateway,
    page: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    gateway.familiar("send", "--session", "notes", "remember the milk")
    # Its sender stops waiting before the reply: the reply is kept unread.
    late = gateway.familiar(
        "send", "--session", "late", "--timeout", "0.2", "!sleep 1", check=False
    )
    assert late.returncode == 1, late.stderr

    def unread_late() -> bool:
        found = gateway.control(lambda client: client.find_sessions(query="late"))
        return [(s["key"], s["unread"]) for s in found["sessions"]] == [("cli:late", 1)]

    eventually_sync(unread_late, timeout=30, what="the late reply kept unread")
    login(page)
    page.goto(gateway.url("/ui/chat?s=lists"))
    _send(page, "a message from the panel")
    expect(page.locator('#transcript [data-state="done"]')).to_contain_text("echo:")

    page.get_by_role("link", name="Sessions").click()
    rows = page.locator("#session-list tbody tr")
    expect(rows.first).to_contain_text("ui:lists")  # newest first
    expect(rows).to_contain_text(["ui:lists", "cli:late", "cli:notes"])
    late_row = rows.filter(has_text="cli:late")
    expect(late_row.locator(".badge")).to_have_text("1 unread")
    expect(rows.filter(has_text="cli:notes").locator(".badge")).to_have_count(0)
    late_row.get_by_role("link", name="cli:late").click()
    detail = page.locator("#session-detail")
    expect(detail.locator(".msg.assistant")).to_contain_text("echo: !sleep 1")
    expect(detail.locator(".msg.assistant .badge")).to_have_text("new")
    detail.get_by_role("button", name="Mark read").click()
    expect(late_row.locator(".badge")).to_have_count(0)
    expect(detail.get_by_role("button", name="Mark read")).to_have_count(0)

    page.get_by_label("Channel").select_option("cli")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    expect(rows).to_contain_text(["cli:late", "cli:notes"])

    page.get_by_label("Channel").select_option("")
    page.get_by_label("Search").fill("from the panel")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    rows.first.get_by_role("link", name="ui:lists").click()

    detail = page.locator("#session-detail")
    expect(detail.get_by_role("heading", name="ui:lists")).to_be_visible()
    expect(detail.locator(".msg.user")).to_contain_text("a message from the panel")
    expect(detail.locator(".msg.assistant")).to_contain_text("echo: a message from the panel")
    detail.locator("details.events summary").click()
    expect(detail.locator("details.events tbody")).to_contain_text("user.message")
    shot(page, "sessions")


def test_chat_and_sessions_fit_a_phone(
    gateway: UiGateway,
    phone: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    login(phone)
    phone.goto(gateway.url("/ui/chat?s=phone"))
    wide = (
        "| column | another column | a third one |\n|---|---|---|\n"
        + "| "
        + "x" * 80
        + " | b | c |"
    )
    gateway.fake.script(Text(f"A table:\n\n{wide}\n\n`{'y' * 120}`"))
    _send(phone, "show me a wide table")
    expect(phone.locator('#transcript [data-state="done"] table')).to_be_visible()
    _send(phone, '!tool list_dir {"path": "."}')
    asked = phone.locator("#transcript .turn").filter(has_text="!tool list_dir")
    expect(asked.locator('[data-state="done"]')).to_contain_text("tool said:")
    for path in ("/ui/chat?s=phone", "/ui/sessions?key=ui%3Aphone"):
        phone.goto(gateway.url(path))
        phone.locator("details").first.locator("summary").click()
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} scrolls sideways: {width} px"
        if path.startswith("/ui/chat"):
            shot(phone, "chat-phone")


def test_stop_ends_the_reply_being_made_and_bad_sends_are_refused(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    login(page)
    page.goto(gateway.url("/ui/chat?s=stopping"))
    _send(page, "!sleep 60 a long job")
    slow = page.locator("#transcript .turn").filter(has_text="a long job")
    expect(slow.locator('[data-state="waiting"]')).to_be_visible()
    eventually_sync(
        lambda: any("a long job" in json.dumps(entry) for entry in gateway.fake.log),
        timeout=30,
        what="the model asked about the long job (its turn runs)",
    )
    page.get_by_role("button", name="Stop").click()
    stop = page.locator("#transcript .turn").filter(has_text="/stop")
    expect(stop.locator('[data-state="done"]')).to_be_visible()
    # The long job's turn ends well before its 60 s, with no answer from the model.
    expect(slow.locator('[data-state="done"]')).to_be_visible(timeout=30_000)
    expect(slow.locator('[data-state="done"]')).not_to_contain_text("echo:")

    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content") or ""
    send = gateway.url("/ui/chat/send")
    for form, status in (
        ({"session": "bad name", "text": "x"}, 400),
        ({"session": "never-stored", "text": "   "}, 400),
        ({"session": "", "text": "x"}, 400),
    ):
        answer = page.request.post(send, form=form, headers={"X-CSRF-Token": csrf})
        assert answer.status == status, (form, answer.text())
    refused = page.request.post(send, form={"session": "never-stored", "text": "x"})
    assert refused.status == 403
    found = gateway.control(lambda client: client.find_sessions(query="never-stored"))
    assert [s["key"] for s in found["sessions"]] == []


def test_a_schedule_firing_in_an_open_chat_appears_there(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    login(page)
    page.goto(gateway.url("/ui/chat?s=watched"))
    expect(page.get_by_role("heading", name="ui:watched")).to_be_visible()
    # The page follows the session's replies nobody waits for from the moment it opens;
    # the schedule fires seconds later.
    at = (datetime.now(UTC) + timedelta(seconds=3)).isoformat(timespec="seconds")
    added = gateway.familiar(
        "schedule", "add", "--session", "ui:watched", "--at", at, "scheduled hello"
    )
    assert "ui:watched" in added.stdout
    arrived = page.locator("#arrivals .msg.assistant")
    expect(arrived).to_contain_text("echo: scheduled hello", timeout=30_000)
    # Seen live, so not kept unread.
    found = gateway.control(lambda client: client.find_sessions(query="watched"))
    assert [(s["key"], s["unread"]) for s in found["sessions"]] == [("ui:watched", 0)]


def test_opening_a_chat_changes_nothing_mark_read_does(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    """A GET changes no state (a link from anywhere cannot); the unread replies are
    marked new until **Mark read** (a POST with the CSRF token)."""
    at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
    gateway.familiar("schedule", "add", "--session", "ui:away", "--at", at, "while away")

    def unread() -> int:
        found = gateway.control(lambda client: client.find_sessions(query="ui:away"))
        return sum(int(s["unread"]) for s in found["sessions"] if s["key"] == "ui:away")

    eventually_sync(lambda: unread() == 1, timeout=30, what="the reply kept unread")
    login(page)
    page.goto(gateway.url("/ui/chat?s=away"))
    expect(page.locator(".msg.assistant .badge")).to_have_text("new")
    page.reload()
    expect(page.locator(".msg.assistant .badge")).to_have_text("new")
    assert unread() == 1
    page.get_by_role("button", name="Mark read").click()
    expect(page.get_by_role("heading", name="ui:away")).to_be_visible()
    expect(page.locator(".msg.assistant .badge")).to_have_count(0)
    assert unread() == 0
