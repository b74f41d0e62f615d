"""The web panel's end-to-end rig: the distribution's Chromium (Playwright's sync API,
no browser download), a spawned ``familiar gateway`` with a scriptable fake model, and
helpers to log in and take screenshots.

Fixtures:

- ``browser`` (module): Chromium from ``/usr/bin/chromium``; skipped when it is missing
  (``make deps-system`` installs it), except under ``CI=true``, where that fails.
- ``gateway`` (module): a `UiGateway`: ``home``, ``base_url`` (``http://127.0.0.1:N``),
  ``fake`` (the model: ``gateway.fake.script("a reply")`` queues answers,
  ``gateway.fake.responder = fn`` answers by session; see `tests.fakes.fake_openai`),
  ``familiar(*args)`` (the real CLI against it) and ``control(fn)`` (``fn(client)``
  with a `ControlClient`). A module needing other settings makes its own fixture with
  ``spawn_gateway(tmp_path_factory, extra_config="[ui]\\n...")``.
- ``page``: a fresh browser context (no cookie) at 1280x800; ``phone``: one at 390x844.
- ``login(page)``: runs ``familiar ui`` and opens the first line of its output, as an
  operator would; returns that URL (spent).
- ``shot(page, name)``: saves ``<name>.png`` into ``$FAMILIAR_UI_SCREENSHOTS`` (``make
  screenshots`` sets it to docs/images/ui) or the test's tmp_path.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from gateway.control.client import ControlClient, DaemonUnavailable
from tests.daemon_env import REPO, daemon_env
from tests.fakes.fake_openai import FakeOpenAI, Responder, ScriptItem
from tests.waiting import eventually_sync

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
TIMEOUT = 60.0
EXPECT_TIMEOUT = 30.0
"""How long an ``expect`` waits for the page to show something: live parts poll every
few seconds, and the suite runs on two loaded cores (Playwright's 5 s is too tight).
A passing ``expect`` returns as soon as it holds."""
expect.set_options(timeout=EXPECT_TIMEOUT * 1000)
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Per module, not per session: while Playwright's sync API is started, an event loop
    # runs in the test thread, and the asyncio tests of other files on this worker could
    # not run theirs.
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing (make deps-system installs chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires Chromium: {reason}")
        pytest.skip(reason)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class FakeModel:
    """The fake OpenAI server on its own event loop in a thread (the tests are sync)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.server: FakeOpenAI = self._call(self._start())

    async def _start(self) -> FakeOpenAI:
        server = FakeOpenAI()
        await server.start()
        return server

    def call(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the fake's loop and wait for it (Playwright's sync API runs a
        loop of its own in the test's thread, so ``asyncio.run`` is not available)."""
        return self._call(coro)

    def _call(self, coro: Awaitable[T]) -> T:
        async def run() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(TIMEOUT)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def script(self, *items: ScriptItem) -> None:
        """Queue answers for the next model requests (then `rule_reply` applies:
        ``echo: <text>``, ``!tool NAME {json}`` calls a tool, ``!sleep S`` waits)."""

        async def add() -> None:
            self.server.script(*items)

        self._call(add())

    @property
    def responder(self) -> Responder | None:
        return self.server.responder

    @responder.setter
    def responder(self, value: Responder | None) -> None:
        """Answer by session first (called on the fake's thread)."""
        self.server.responder = value

    @property
    def log(self) -> list[dict[str, Any]]:
        """One entry per model request so far (a copy)."""
        return list(self.server.log)

    def close(self) -> None:
        self._call(self.server.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(TIMEOUT)
        self._loop.close()


@dataclass
class UiGateway:
    """A spawned ``familiar gateway`` serving the panel."""

    home: Path
    fake: FakeModel
    proc: subprocess.Popen[bytes]
    base_url: str = ""

    def familiar(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the real ``familiar`` CLI against this gateway."""
        done = subprocess.run(
            [sys.executable, "-m", "gateway.cli", *args, "--home", str(self.home)],
            env=daemon_env(), cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, done.stderr
        return done

    def control(self, call: Callable[[ControlClient], Awaitable[T]]) -> T:
        """``call(client)`` on the control API, from a sync test."""

        async def ask() -> T:
            async with ControlClient(self.home) as client:
                return await call(client)

        return self.fake.call(ask())

    def logs(self) -> str:
        return (self.home / "gateway.log").read_text(errors="replace")

    def url(self, path: str) -> str:
        return self.base_url + path


def _write_config(home: Path, base_url: str, extra: str) -> None:
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\nmodel = "fake-model"\n'
        f'api_key = "sk-test"\n\n[http]\nport = 0\n\n[agent]\nshutdown_grace = 2\n\n{extra}\n'
    )


@contextmanager
def spawn_gateway(
    tmp_path_factory: pytest.TempPathFactory, *, extra_config: str = "", single: bool = True
) -> Iterator[UiGateway]:
    """A ``familiar gateway`` with ``extra_config`` appended to its config.toml, ready."""
    home = tmp_path_factory.mktemp("ui-home")
    fake = FakeModel()
    _write_config(home, fake.base_url, extra_config)
    log = (home / "gateway.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "gateway", "--home", str(home)],
        cwd=REPO, env=daemon_env(single=single), stdout=log, stderr=log,
    )  # fmt: skip
    gateway = UiGateway(home=home, fake=fake, proc=proc)
    try:
        status: dict[str, Any] = {}

        def ready() -> bool:
            assert proc.poll() is None, gateway.logs()
            with suppress(DaemonUnavailable):
                status.update(gateway.control(lambda client: client.status()))
            return bool(status.get("http"))

        eventually_sync(ready, timeout=TIMEOUT, what="the gateway serves HTTP")
        gateway.base_url = f"http://{status['http']}"
        yield gateway
    finally:
        proc.terminate()
        try:
            proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        fake.close()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiGateway]:
    with spawn_gateway(tmp_path_factory) as spawned:
        yield spawned


@contextmanager
def _page(browser: Browser, viewport: dict[str, int]) -> Iterator[Page]:
    context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    context.set_default_timeout(TIMEOUT * 1000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with _page(browser, DESKTOP) as opened:
        yield opened


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    with _page(browser, PHONE) as opened:
        yield opened


def login_url(gateway: UiGateway) -> str:
    """The first line of ``familiar ui``'s output."""
    done = gateway.familiar("ui", "--no-browser")
    return done.stdout.splitlines()[0]


@pytest.fixture
def login(gateway: UiGateway) -> Callable[[Page], str]:
    def log_in(page: Page) -> str:
        url = login_url(gateway)
        page.goto(url)
        assert page.url.startswith(gateway.url("/ui/")), page.url
        assert "/ui/login" not in page.url, page.content()
        return url

    return log_in


@pytest.fixture
def shot(tmp_path: Path) -> Callable[[Page, str], Path]:
    folder = Path(os.environ.get("FAMILIAR_UI_SCREENSHOTS") or tmp_path)

    def take(page: Page, name: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
