"""The Tasks and Memory pages in Chromium against a spawned gateway and the fake model.

Tasks: the parent session spawns background subagents; each child calls ``list_dir``
and then its answer is held back by the test (`Gates`) until it lets it go, so the
page is seen going from running to completed live (no reload), and a held child is
cancelled from the page. Memory: entries remembered through the agent's ``remember``
tool are searched, listed by scope and forgotten (a post without the CSRF token is
refused and forgets nothing).
"""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from playwright.sync_api import Dialog, Page, expect

from tests.e2e.ui.conftest import UiGateway
from tests.fakes.fake_openai import ScriptItem
from tests.waiting import eventually_sync

pytestmark = pytest.mark.slow

PARENT = "cli:tasks-e2e"


def _text(message: dict[str, Any]) -> str:
    return str(message.get("content") or "")


class Gates:
    """The children's held answers, one gate per child prompt (on the fake's loop)."""

    def __init__(self, gateway: UiGateway) -> None:
        self._gateway = gateway
        self._events: dict[str, asyncio.Event] = {}

    def _event(self, prompt: str) -> asyncio.Event:
        return self._events.setdefault(prompt, asyncio.Event())

    def release(self, prompt: str) -> None:
        async def let_go() -> None:
            self._event(prompt).set()

        self._gateway.fake.call(let_go())

    def release_all(self) -> None:
        async def let_go() -> None:
            for event in self._events.values():
                event.set()

        self._gateway.fake.call(let_go())

    def responder(self, session: str | None, messages: list[dict[str, Any]]) -> Any:
        """The parent spawns ``spawn <prompt>`` in the background; a child told
        ``delegate <part>`` starts a grandchild for the part and answers when it has; any
        other child lists the workspace, then answers ``done: <prompt>`` once its gate
        opens."""
        last = messages[-1] if messages else {}
        users = [_text(m) for m in messages if m.get("role") == "user"]
        if session == PARENT:
            if last.get("role") == "tool":
                return "started it"
            if users and users[-1].startswith("spawn "):
                prompt = users[-1].removeprefix("spawn ")
                args = {
                    "agent_type": "general-purpose",
                    "prompt": prompt,
                    "mode": "background",
                    "description": f"to {prompt}",
                }
                return [("sessions_spawn", args)]
            return "noted"
        if session is None or not session.startswith("subagent:") or not users:
            return None
        prompt = users[0]
        if prompt.startswith("delegate "):  # starts a grandchild (sync, at depth 2)
            if last.get("role") == "tool":
                return f"done: {prompt}"
            part = prompt.removeprefix("delegate ")
            args = {"agent_type": "general-purpose", "prompt": part, "description": f"to {part}"}
            return [("sessions_spawn", args)]
        if last.get("role") != "tool":
            return [("list_dir", {"path": "."})]
        return self._held(prompt)

    async def _held(self, prompt: str) -> ScriptItem:
        await self._event(prompt).wait()
        return f"done: {prompt}"


@pytest.fixture(scope="module")
def gates(gateway: UiGateway) -> Iterator[Gates]:
    held = Gates(gateway)
    gateway.fake.responder = held.responder
    try:
        yield held
    finally:
        held.release_all()  # no model request stays pending when the gateway stops
        gateway.fake.responder = None


def _task_ids(gateway: UiGateway) -> list[str]:
    tasks = gateway.control(lambda client: client.tasks(owner=PARENT))
    return [str(t["id"]) for t in tasks]


def _only_task_of(gateway: UiGateway, owner: str) -> str:
    """The one task ``owner`` spawns; waits for it, as the owner spawns it in its own turn."""
    found: list[dict[str, Any]] = []

    def spawned() -> bool:
        found[:] = gateway.control(lambda client: client.tasks(owner=owner))
        return bool(found)

    eventually_sync(spawned, what=f"{owner} spawned a task")
    (task,) = found
    return str(task["id"])


def test_background_subagent_goes_from_running_to_completed_live(
    gateway: UiGateway,
    gates: Gates,
    page: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    login(page)
    page.goto(gateway.url("/ui/tasks"))
    trees = page.locator("#task-trees")
    expect(trees).to_contain_text("No subagents yet.")
    page.evaluate("() => { window.familiarLoaded = 'once'; }")  # gone if the page reloads

    done = gateway.familiar("send", "--session", "tasks-e2e", "spawn delegate count the files")
    assert done.stdout.strip() == "started it", done.stdout
    (child,) = _task_ids(gateway)
    grandchild = _only_task_of(gateway, f"subagent:{child}")

    node = page.locator(f'li.task[data-task="{child}"]')
    nested = node.locator(f'li.task[data-task="{grandchild}"]')
    expect(node).to_have_attribute("data-status", "running")
    expect(nested).to_have_attribute("data-status", "running")
    expect(nested.locator(".status")).to_have_text("running")
    expect(nested.locator(".progress")).to_contain_text("now 1 tool call, last list_dir")
    expect(node.locator(".progress").first).to_contain_text("now 0 tool calls")
    expect(trees.get_by_role("heading", name=PARENT)).to_be_visible()
    shot(page, "tasks-running")

    link = nested.get_by_role("link", name=grandchild)
    link.focus()  # a keyboard user on the tree keeps their place when it is redrawn
    gates.release("count the files")
    expect(nested).to_have_attribute("data-status", "completed")
    expect(link).to_be_focused()
    expect(node).to_have_attribute("data-status", "completed")
    expect(node.locator(".status").first).to_have_text("completed")
    expect(nested.locator(".progress")).to_contain_text("1 turn, 1 tool call")
    expect(node.get_by_role("button", name=f"Cancel {child}")).to_have_count(0)
    assert page.evaluate("() => window.familiarLoaded") == "once"  # no reload
    shot(page, "tasks-completed")

    nested.get_by_role("link", name=grandchild).click()
    page.wait_for_url(gateway.url(f"/ui/tasks/{grandchild}"))
    expect(page.locator("dl.facts .status")).to_have_text("completed")
    expect(page.locator("pre.result")).to_have_text("done: count the files")
    conversation = page.locator("ol.conversation > li")
    expect(conversation.first).to_contain_text("count the files")
    expect(conversation.last).to_contain_text("done: count the files")
    shot(page, "task-conversation")
    page.get_by_role("link", name=f"subagent:{child}", exact=True).click()
    page.wait_for_url(gateway.url(f"/ui/tasks/{child}"))
    expect(page.locator("pre.result")).to_have_text("done: delegate count the files")


def test_cancel_a_running_subagent_from_the_page(
    gateway: UiGateway, gates: Gates, page: Page, login: Callable[[Page], str]
) -> None:
    login(page)
    page.goto(gateway.url(f"/ui/tasks?session={PARENT}"))
    before = set(_task_ids(gateway))
    gateway.familiar("send", "--session", "tasks-e2e", "spawn wait for ever")
    (task_id,) = set(_task_ids(gateway)) - before
    node = page.locator(f'li.task[data-task="{task_id}"]')
    expect(node).to_have_attribute("data-status", "running")

    asked: list[str] = []

    def accept(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    node.get_by_role("button", name=f"Cancel {task_id}").click()
    expect(node).to_have_attribute("data-status", "cancelled")
    assert asked == [f"Cancel {task_id} and every agent it started?"]
    shown = gateway.control(lambda client: client.task(task_id))
    assert shown["status"] == "cancelled"
    assert shown["error"] == f"cancelled by ui:{getpass.getuser()}"


def _remember(gateway: UiGateway, session: str, text: str) -> None:
    call = "!tool remember " + json.dumps({"text": text})
    gateway.familiar("send", "--session", session, call)


def _memory_ids(gateway: UiGateway) -> dict[str, int]:
    entries = gateway.control(lambda client: client.memory())
    return {str(e["text"]): int(e["id"]) for e in entries}


def test_memory_search_list_by_scope_and_forget(
    gateway: UiGateway,
    page: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    _remember(gateway, "mem-a", "the boiler code is 4711")
    _remember(gateway, "mem-a", "the boiler was serviced in May")
    _remember(gateway, "mem-b", "the spare key is under the blue pot")
    ids = _memory_ids(gateway)
    code, key = ids["the boiler code is 4711"], ids["the spare key is under the blue pot"]

    login(page)
    page.goto(gateway.url("/ui/memory"))
    scopes = page.get_by_role("navigation", name="Scopes")
    expect(scopes.get_by_role("listitem").filter(has_text="cli:mem-a")).to_contain_text("2")

    page.get_by_label("Search").fill("boiler")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/ui/memory?**q=boiler*")
    rows = page.locator("#memory-entries tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("#memory-entries")).not_to_contain_text("spare key")
    shot(page, "memory-search")

    page.get_by_label("Search").fill('"* ()')
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#memory-entries [role=alert]")).to_contain_text("no words")

    scopes.get_by_role("link", name="cli:mem-b").click()
    page.wait_for_url("**/ui/memory?scope=cli%3Amem-b")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("the spare key is under the blue pot")

    page.goto(gateway.url("/ui/memory?scope=cli:nobody"))
    expect(page.locator("#memory-entries")).to_contain_text("No memories in this scope yet.")
    expect(page.get_by_label("Scope", exact=True)).to_have_value("cli:nobody")
    page.go_back()

    # A post without the session's CSRF token is refused and forgets nothing.
    refused = page.request.post(gateway.url(f"/ui/memory/{key}/forget"), form={"scope": "x"})
    assert refused.status == 403
    assert key in _memory_ids(gateway).values()

    page.once("dialog", lambda dialog: dialog.accept())
    rows.first.get_by_role("button", name=f"Forget memory #{key}").click()
    expect(page.locator("#memory-entries [role=status]")).to_contain_text(f"Forgot #{key}")
    expect(rows).to_have_count(0)
    remaining = _memory_ids(gateway)
    assert key not in remaining.values() and code in remaining.values()

    # Without the script the form is a plain post with the token: 303 back to the view.
    serviced = remaining["the boiler was serviced in May"]
    token = page.locator('meta[name="csrf-token"]').get_attribute("content") or ""
    plain = page.request.post(
        gateway.url(f"/ui/memory/{serviced}/forget"),
        form={"csrf": token, "scope": "cli:mem-a"},
        max_redirects=0,
    )
    assert plain.status == 303
    assert unquote(plain.headers["location"]) == "/ui/memory?scope=cli:mem-a"
    remaining = _memory_ids(gateway)
    assert serviced not in remaining.values() and code in remaining.values()


def test_tasks_and_memory_fit_a_phone(
    gateway: UiGateway,
    gates: Gates,
    phone: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    gateway.familiar("send", "--session", "tasks-e2e", "spawn look at a phone")
    _remember(gateway, "mem-phone", "a rather long memory " * 12)
    task_id = _task_ids(gateway)[0]
    login(phone)
    for path, name in (
        ("/ui/tasks", "tasks-phone"),
        (f"/ui/tasks/{task_id}", None),
        ("/ui/memory", "memory-phone"),
    ):
        phone.goto(gateway.url(path))
        expect(phone.locator("main h1")).to_be_visible()
        if path.startswith("/ui/tasks/"):  # a held child: its turn's progress, live
            progress = phone.locator("dl.facts .progress")
            expect(progress).to_contain_text("now 1 tool call, last list_dir")
        width = phone.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], (path, width)
        if name is not None:
            shot(phone, name)
