"""What a page module registers its routes with: `UiRoutes` (see `gateway.ui.pages`).

Every route it adds requires the login cookie; the kind of route decides how a request
without it is refused (a page: 401 with the "log in with ``familiar ui``" page; anything
else: a bare 401), and actions also require the session's CSRF token (403 without it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from core.errors import FamiliarError
from gateway.control.client import ControlClient
from gateway.ui.auth import COOKIE, UiAuth, UiSession
from gateway.ui.render import SESSION, TEMPLATES, is_async

__all__ = ["Action", "EventStream", "Handler", "StreamHandler", "UiRoutes", "after_action"]

log = logging.getLogger(__name__)

_LINE_END = re.compile(r"\r\n|\r|\n")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
"""A page, fragment or action handler."""


class EventStream:
    """A Server-Sent Events response whose events carry HTML fragments.

    The panel's script replaces the element's content with an event named ``replace``
    and appends an ``append`` one; ``close`` ends the stream (no reconnect).
    """

    def __init__(self, response: web.StreamResponse, stopping: asyncio.Event) -> None:
        self._response = response
        self._stopping = stopping

    async def send(self, event: str, html: str = "") -> None:
        """Send one event (``replace``, ``append`` or ``close``) with an HTML fragment.

        Raises:
            ConnectionResetError: the browser went away.
        """
        # CR is a line end in SSE too: a stray one in model text would cut the event.
        lines = "".join(f"data: {line}\n" for line in _LINE_END.split(html))
        await self._response.write(f"event: {event}\n{lines}\n".encode())

    async def wait(self, seconds: float) -> bool:
        """Wait ``seconds`` (between two looks at what the stream shows); False when the
        gateway is stopping instead, and the handler should return."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
        return not self._stopping.is_set()

    async def keepalive(self) -> None:
        """A comment line: keeps proxies from closing an idle stream."""
        await self._response.write(b": keepalive\n\n")


StreamHandler = Callable[[web.Request, EventStream], Awaitable[None]]
"""An SSE handler: sends events until it returns (or the browser goes away)."""

Action = Handler
"""A state-changing handler (POST): runs only with a valid CSRF token."""


def after_action(
    request: web.Request, *, redirect: str, fragment: web.Response | None = None
) -> web.StreamResponse:
    """The answer to an action: the ``fragment`` for the panel's script (`data-async`
    forms), else a 303 to ``redirect`` (a plain form post)."""
    if fragment is not None and is_async(request):
        return fragment
    raise web.HTTPSeeOther(redirect)


class UiRoutes:
    """Registers a page module's routes on the ``/ui`` application.

    Paths are relative to ``/ui`` (``"/system"`` serves ``/ui/system``).

    Attributes:
        home: the gateway's home (for `client`).
        auth: the panel's logins.
    """

    def __init__(self, app: web.Application, *, home: Path, auth: UiAuth) -> None:
        self._app = app
        self.home = home
        self.auth = auth
        self.stopping = asyncio.Event()
        """Set when the gateway stops: live streams end (see `EventStream.wait`)."""

        async def stop(_app: web.Application) -> None:
            self.stopping.set()

        app.on_shutdown.append(stop)

    def client(self) -> ControlClient:
        """A control API client of this gateway (every page's data comes through it)."""
        return ControlClient(self.home)

    def page(self, path: str, handler: Handler) -> None:
        """A GET route answering a whole page (``render(request, "<slug>.html", ...)``)."""
        self._app.router.add_get(path, self._guard(handler, page=True))

    def fragment(self, path: str, handler: Handler) -> None:
        """A GET route answering an HTML fragment (``templates/<slug>/_*.html``)."""
        self._app.router.add_get(path, self._guard(handler, page=False))

    def stream(self, path: str, handler: StreamHandler) -> None:
        """A GET route answering Server-Sent Events (an element's ``data-sse``)."""

        async def serve(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(
                headers={
                    "Content-Type": "text/event-stream",
                    "Cache-Control": "no-store",
                    "X-Accel-Buffering": "no",
                }
            )
            await response.prepare(request)
            try:
                await handler(request, EventStream(response, self.stopping))
            except ConnectionResetError:
                log.debug("ui stream closed by the browser path=%s", request.path)
            except FamiliarError as exc:  # the answer has started: end it (the browser retries)
                log.warning("ui stream ended path=%s error=%s", request.path, exc)
            return response

        self._app.router.add_get(path, self._guard(serve, page=False))

    def action(self, path: str, handler: Action, *, method: str = "POST") -> None:
        """A state-changing route: the CSRF token (header ``X-CSRF-Token`` or form field
        ``csrf``) must be the session's, else 403."""
        self._app.router.add_route(method, path, self._guard(handler, page=False, csrf=True))

    def _guard(self, handler: Handler, *, page: bool, csrf: bool = False) -> Handler:
        auth = self.auth

        async def guarded(request: web.Request) -> web.StreamResponse:
            session = auth.session(request.cookies.get(COOKIE))
            if session is None:
                return _refused(request, page=page)
            if csrf and not await _csrf_ok(request, auth, session):
                log.warning("ui request refused: bad csrf token path=%s", request.path)
                return web.Response(status=403, text="forbidden: missing or wrong CSRF token")
            request[SESSION] = session
            return await handler(request)

        return guarded


def _refused(request: web.Request, *, page: bool) -> web.Response:
    if page:
        html = request.config_dict[TEMPLATES].render("login_needed.html", {"used": False})
        return web.Response(status=401, text=html, content_type="text/html")
    return web.Response(status=401, text="unauthorized: log in with `familiar ui`")


async def _csrf_ok(request: web.Request, auth: UiAuth, session: UiSession) -> bool:
    # Under "Referrer-Policy: no-referrer" Chromium sends "Origin: null" with the panel's
    # form posts (its fetch posts name the origin): only a named origin can be told
    # apart; the token decides.
    if not auth.origin_ok(request.headers.get("Origin"), f"{request.scheme}://{request.host}"):
        return False
    given = request.headers.get("X-CSRF-Token")
    if given is None and request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        value = (await request.post()).get("csrf")
        given = value if isinstance(value, str) else None
    return auth.csrf_ok(session, given)
