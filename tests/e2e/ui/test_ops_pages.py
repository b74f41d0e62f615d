"""The Approvals and Schedules pages in a real Chromium against a spawned gateway.

Approvals: the fake model calls ``exec`` with a command that pipes into a shell, which
waits for approval; the page lists it live with the exact command, the operator
approves it there, and it runs (the confirmation gives its exit code, and its output
reaches the conversation). Nothing destructive is ever approved: the ``rm`` command is
only denied (and is ``rm -rf "/" --help`` besides, which prints GNU rm's help).
Schedules: create (every, cron with a timezone), a refused one, cancel.
"""

from __future__ import annotations

import getpass
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect

from tests.e2e.ui.conftest import PHONE, UiGateway
from tests.waiting import eventually_sync

pytestmark = pytest.mark.slow

DECODE = "echo ZWNobyBoaQ== | base64 -d | sh"
"""Needs approval (it pipes text into a shell); runs ``echo hi``."""
RM = 'rm -rf "/" --help'
"""Needs approval (it deletes /); only ever denied."""
WAIT_MS = 30_000
"""For what waits on the gateway (a live list's next look, a command's run): under load
more than Playwright's default 5 s."""


def _ask(gateway: UiGateway, session: str, command: str) -> str:
    """Have the model ask to run ``command`` in ``cli:<session>``; the reply."""
    call = "!tool exec " + json.dumps({"command": command})
    done = gateway.familiar("send", "--session", session, "--json", call)
    reply = str(json.loads(done.stdout)["reply"])
    assert "/approve" in reply, reply
    return reply


def _no_sideways_scroll(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def _history(gateway: UiGateway, key: str) -> list[dict[str, Any]]:
    found = gateway.control(lambda client: client.session(key))
    return list(found["history"])


def test_approve_a_pending_command_and_see_it_run(
    gateway: UiGateway,
    page: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    login(page)
    page.goto(gateway.url("/ui/approvals"))
    expect(page.locator("#no-pending")).to_be_visible(timeout=WAIT_MS)

    _ask(gateway, "ops", DECODE)
    _ask(gateway, "other", RM)
    # The list is live: both appear without a reload, each with its exact command.
    cards = page.locator("article.approval")
    expect(cards).to_have_count(2, timeout=WAIT_MS)
    decode = cards.filter(has=page.locator("code", has_text=DECODE))
    expect(decode.locator("pre code")).to_have_text(DECODE, timeout=WAIT_MS)
    expect(decode).to_contain_text("cli:ops", timeout=WAIT_MS)
    expect(decode).to_contain_text("pipes text into a shell", timeout=WAIT_MS)
    approval_id = (decode.get_attribute("id") or "").removeprefix("approval-")
    assert re.fullmatch(r"[a-z0-9]{6}", approval_id), approval_id
    shot(page, "approvals")

    decode.get_by_role("button", name=f"Approve and run #{approval_id}").click()
    result = page.locator("#decision-result")
    expect(result).to_contain_text(
        f"Approved #{approval_id}: `{DECODE}` ran (exit 0).", timeout=WAIT_MS
    )
    row = page.locator(f"#decided-{approval_id}")
    expect(row).to_contain_text("approved", timeout=WAIT_MS)
    expect(row).to_contain_text(f"ui:{getpass.getuser()}", timeout=WAIT_MS)
    expect(cards).to_have_count(1, timeout=WAIT_MS)
    # It ran: its output went back into the conversation that asked.
    eventually_sync(
        lambda: any(
            "ran: exit 0, output:\nhi" in str(m["content"]) for m in _history(gateway, "cli:ops")
        ),
        what="the command's output in cli:ops",
    )

    rm_card = cards.filter(has=page.locator("code", has_text=RM))
    rm_id = (rm_card.get_attribute("id") or "").removeprefix("approval-")
    rm_card.get_by_role("button", name=f"Deny #{rm_id}").click()
    expect(result).to_contain_text(f"Denied #{rm_id}", timeout=WAIT_MS)
    expect(page.locator(f"#decided-{rm_id}")).to_contain_text("denied", timeout=WAIT_MS)
    expect(page.locator("#no-pending")).to_be_visible(timeout=WAIT_MS)
    shot(page, "approvals-decided")

    page.set_viewport_size(PHONE)
    assert _no_sideways_scroll(page)
    shot(page, "approvals-phone")


def _schedules(gateway: UiGateway) -> list[dict[str, Any]]:
    return gateway.control(lambda client: client.schedules())


def test_create_and_cancel_schedules(
    gateway: UiGateway,
    page: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    login(page)
    page.goto(gateway.url("/ui/schedules"))
    before = {s["id"] for s in _schedules(gateway)}
    form = page.locator("#new-schedule")

    form.get_by_label("Kind").select_option("cron")
    form.get_by_label("When").fill("0 9 * * mon-fri")
    form.get_by_label("Timezone").fill("Asia/Tokyo")
    form.get_by_label("Message").fill("morning briefing")
    form.get_by_role("button", name="Create schedule").click()
    result = page.locator("#schedule-result")
    expect(result).to_contain_text("Created schedule #", timeout=WAIT_MS)
    (cron,) = [s for s in _schedules(gateway) if s["id"] not in before]
    assert cron["timezone"] == "Asia/Tokyo" and cron["next_run_local"].endswith("+09:00")
    row = page.locator(f"#schedule-{cron['id']}")
    expect(row).to_contain_text("09:00 Asia/Tokyo (UTC+09:00)", timeout=WAIT_MS)
    expect(row).to_contain_text("morning briefing", timeout=WAIT_MS)

    form.get_by_label("Kind").select_option("every")
    form.get_by_label("When").fill("2h")
    form.get_by_label("Message").fill("water the plants")
    form.get_by_role("button", name="Create schedule").click()
    expect(result).to_contain_text("every 2h", timeout=WAIT_MS)
    expect(page.locator("#schedules tbody tr")).to_have_count(len(before) + 2, timeout=WAIT_MS)

    # Bad input: a clear error, and nothing created.
    form.get_by_label("Kind").select_option("cron")
    form.get_by_label("When").fill("61 * * * *")
    form.get_by_label("Message").fill("never")
    form.get_by_role("button", name="Create schedule").click()
    error = form.locator("[data-error]")
    expect(error).to_contain_text('Not created: bad cron expression "61 * * * *"', timeout=WAIT_MS)
    form.get_by_label("When").fill("0 9 * * *")
    form.get_by_label("Timezone").fill("Mars/Olympus_Mons")
    form.get_by_role("button", name="Create schedule").click()
    expect(error).to_have_text(
        re.compile(r"^Not created: unknown timezone 'Mars/Olympus_Mons'"), timeout=WAIT_MS
    )
    assert len(_schedules(gateway)) == len(before) + 2
    shot(page, "schedules")

    def accept(dialog: Dialog) -> None:
        dialog.accept()

    page.on("dialog", accept)
    row.get_by_role("button", name=f"Cancel #{cron['id']}").click()
    expect(result).to_contain_text(f"Cancelled schedule #{cron['id']}", timeout=WAIT_MS)
    expect(row).to_have_count(0, timeout=WAIT_MS)
    assert cron["id"] not in {s["id"] for s in _schedules(gateway)}

    page.set_viewport_size(PHONE)
    assert _no_sideways_scroll(page)
    shot(page, "schedules-phone")


def test_schedules_work_without_javascript(
    gateway: UiGateway, browser: Browser, login: Callable[[Page], str]
) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        login(page)
        page.goto(gateway.url("/ui/schedules"))
        form = page.locator("#new-schedule")
        form.get_by_label("Kind").select_option("after")
        form.get_by_label("When").fill("5s")
        form.get_by_label("Message").fill("too soon")
        form.get_by_role("button", name="Create schedule").click()
        # A plain post: the page again, with the reason and what was typed.
        expect(page.locator("#create-error")).to_contain_text("at least 10s", timeout=WAIT_MS)
        expect(form.get_by_label("Message")).to_have_value("too soon", timeout=WAIT_MS)
        assert not [s for s in _schedules(gateway) if s["prompt"] == "too soon"]

        form.get_by_label("When").fill("3h")
        form.get_by_label("Timezone").fill("Europe/Berlin")
        form.get_by_role("button", name="Create schedule").click()
        page.wait_for_url(gateway.url("/ui/schedules"))
        (made,) = [s for s in _schedules(gateway) if s["prompt"] == "too soon"]
        row = page.locator(f"#schedule-{made['id']}")
        expect(row).to_contain_text("Europe/Berlin", timeout=WAIT_MS)
        row.get_by_role("button", name=f"Cancel #{made['id']}").click()
        page.wait_for_url(gateway.url("/ui/schedules"))
        expect(page.locator(f"#schedule-{made['id']}")).to_have_count(0, timeout=WAIT_MS)
    finally:
        context.close()
