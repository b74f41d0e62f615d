"""Logging in to the web panel through the URL ``familiar ui`` prints."""

from __future__ import annotations

import getpass
from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests.e2e.ui.conftest import UiGateway

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
