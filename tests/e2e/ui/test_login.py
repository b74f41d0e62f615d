"""Logging in to the web panel through the URL ``familiar ui`` prints."""

from __future__ import annotations

import getpass
import stat
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from gateway.commands.ui import open_login
from tests.e2e.ui.conftest import UiGateway, login_url

pytestmark = pytest.mark.slow


def test_login_through_familiar_ui_url(
    gateway: UiGateway,
    page: Page,
    login: Callable[[Page], str],
) -> None:
    page.goto(gateway.url("/ui/system"))
    assert page.get_by_role("navigation", name="Main").count() == 0  # not logged in

    login(page)

    nav = page.get_by_role("navigation", name="Main")
    titles = nav.get_by_role("link").all_inner_texts()
    assert titles == ["Chat", "Sessions", "Approvals", "Schedules", "Tasks", "Memory", "System"]
    page.get_by_role("link", name="System").click()
    page.wait_for_url(gateway.url("/ui/system"))
    assert page.locator(".operator").inner_text() == getpass.getuser()


def test_the_browser_familiar_ui_opens_gets_no_token_on_its_command_line(
    gateway: UiGateway, page: Page
) -> None:
    """Every local user reads a process's arguments: the browser is started with a page
    of the home's private run directory, which sends it on to the login URL."""
    url = login_url(gateway)
    opened: list[str] = []
    open_login(gateway.home, url, opener=opened.append)
    (address,) = opened
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["token"][0]
    assert address.startswith("file://") and token not in address
    login_page = Path(urllib.parse.urlsplit(address).path)
    assert stat.S_IMODE(login_page.stat().st_mode) == 0o600
    assert stat.S_IMODE(login_page.parent.stat().st_mode) == 0o700

    page.goto(address)  # the page forwards the real browser to the panel, logged in
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    assert page.url.startswith(gateway.url("/ui/")), page.url
