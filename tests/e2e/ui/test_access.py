"""Nothing of ``/ui`` answers without the login cookie; login URLs work once; actions need
the session's CSRF token; the security headers; the layout at 390 px."""

from __future__ import annotations

import http.client
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from gateway.ui.render import NAV
from tests.e2e.ui.conftest import UiGateway, login_url

pytestmark = pytest.mark.slow


def request(
    gateway: UiGateway,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], str]:
    """One plain HTTP request (no browser: nothing is added that the test did not set)."""
    host = urllib.parse.urlsplit(gateway.base_url).netloc
    connection = http.client.HTTPConnection(host, timeout=30)
    sent = dict(headers or {})
    data = None
    if body is not None:
        data = urllib.parse.urlencode(body)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return response.status, dict(response.headers), response.read().decode()
    finally:
        connection.close()


def cookie_header(page: Page) -> str:
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "familiar_ui"]
    return f"familiar_ui={cookie['value']}"


def csrf_of(page: Page) -> str:
    token = page.locator('meta[name="csrf-token"]').get_attribute("content")
    assert token
    return token


ROUTES = [
    ("GET", "/ui/", "a page"),
    ("GET", "/ui/system", "a page"),
    ("GET", "/ui/static/ui.css", "a static file"),
    ("GET", "/ui/system/live", "an SSE stream"),
    ("POST", "/ui/system/trust", "an action"),
    ("POST", "/ui/logout", "an action"),
]


@pytest.mark.parametrize(("method", "path", "kind"), ROUTES)
def test_nothing_answers_without_the_cookie(
    gateway: UiGateway, method: str, path: str, kind: str
) -> None:
    status, headers, text = request(
        gateway, method, path, headers={"Cookie": "familiar_ui=forged-session"}
    )
    assert status == 401, (kind, status, text)
    assert "familiar ui" in text
    assert headers["X-Frame-Options"] == "DENY"
    if kind == "a page":  # a browser gets a page saying how to log in
        assert headers["Content-Type"].startswith("text/html")
        assert "<h1>familiar: log in</h1>" in text


def test_ui_without_a_slash_only_redirects(gateway: UiGateway) -> None:
    status, headers, _ = request(gateway, "GET", "/ui")
    assert (status, headers["Location"]) == (303, "/ui/")
    status, _, _ = request(gateway, "GET", "/ui/")
    assert status == 401


def test_login_url_works_once_and_sets_a_strict_cookie(
    gateway: UiGateway, page: Page, browser: object, login: Callable[[Page], str]
) -> None:
    used = login(page)
    (cookie,) = page.context.cookies()
    assert cookie["name"] == "familiar_ui"
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/ui"

    status, _, text = request(
        gateway, "GET", urllib.parse.urlsplit(used).path + "?" + urllib.parse.urlsplit(used).query
    )
    assert status == 401
    assert "already used, has expired or is unknown" in text

    status, _, _ = request(gateway, "GET", "/ui/login?token=guessed")
    assert status == 401


def test_login_url_opened_in_a_second_browser_is_refused(
    gateway: UiGateway, page: Page, phone: Page
) -> None:
    url = login_url(gateway)
    page.goto(url)
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    response = phone.goto(url)
    assert response is not None and response.status == 401
    expect(phone.get_by_text("already used, has expired or is unknown")).to_be_visible()
    assert not phone.context.cookies()


def test_an_action_needs_the_sessions_csrf_token(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    login(page)
    page.goto(gateway.url("/ui/system"))
    cookie, csrf = cookie_header(page), csrf_of(page)
    same_origin = gateway.base_url
    body = {"path": "/nowhere/hooks.json", "fingerprint": "0" * 64}
    for headers, form, why in [
        ({}, body, "no token"),
        ({}, {**body, "csrf": "wrong"}, "a wrong token in the form"),
        ({"X-CSRF-Token": "wrong"}, body, "a wrong token in the header"),
        ({"X-CSRF-Token": csrf, "Origin": "http://evil.example"}, body, "another origin"),
    ]:
        status, _, text = request(
            gateway, "POST", "/ui/system/trust", headers={"Cookie": cookie, **headers}, body=form
        )
        assert status == 403, (why, status, text)
        assert "CSRF" in text
    # With the token (form field or header) the action runs: here it refuses the path.
    for headers, form in [
        ({}, {**body, "csrf": csrf}),
        ({"X-CSRF-Token": csrf, "Origin": same_origin}, body),
    ]:
        status, _, text = request(
            gateway, "POST", "/ui/system/trust", headers={"Cookie": cookie, **headers}, body=form
        )
        assert status == 404, text
        assert "is not a hook or MCP file" in text


def test_pages_carry_the_security_headers(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    login(page)
    response = page.goto(gateway.url("/ui/system"))
    assert response is not None and response.status == 200
    headers = response.headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["cache-control"] == "no-store"
    assert headers["referrer-policy"] == "no-referrer"


def test_logging_out_ends_the_session(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    login(page)
    page.goto(gateway.url("/ui/system"))
    cookie = cookie_header(page)
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_text("Run familiar ui")).to_be_visible()
    status, _, _ = request(gateway, "GET", "/ui/system", headers={"Cookie": cookie})
    assert status == 401


def test_no_page_scrolls_sideways_at_390_px(
    gateway: UiGateway,
    phone: Page,
    login: Callable[[Page], str],
    shot: Callable[[Page, str], Path],
) -> None:
    login(phone)
    for slug, title in NAV:
        phone.goto(gateway.url(f"/ui/{slug}"))
        expect(phone.get_by_role("link", name=title, exact=True)).to_have_attribute(
            "aria-current", "page"
        )
        widths = phone.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert widths[0] <= widths[1], (slug, widths)
    phone.goto(gateway.url("/ui/system"))
    shot(phone, "system-phone")


UNLABELLED = """() => Array.from(document.querySelectorAll(
    'input:not([type=hidden]), select, textarea, button'
)).filter((el) => {
    const named = el.getAttribute('aria-label') || el.getAttribute('aria-labelledby')
        || el.getAttribute('title');
    if (el.tagName === 'BUTTON') return !(el.textContent.trim() || named);
    return !((el.labels && el.labels.length) || named);
}).map((el) => el.outerHTML.slice(0, 120))"""


def test_every_page_has_landmarks_and_labelled_controls(
    gateway: UiGateway, page: Page, login: Callable[[Page], str]
) -> None:
    login(page)
    for slug, _title in NAV:
        page.goto(gateway.url(f"/ui/{slug}"))
        expect(page.get_by_role("main")).to_have_count(1)
        expect(page.get_by_role("navigation", name="Main")).to_have_count(1)
        assert page.evaluate(UNLABELLED) == [], slug
    page.keyboard.press("Tab")  # the first stop skips to the content
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
