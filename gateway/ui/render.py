"""Rendering the web panel's templates (Jinja2, autoescaped), with what every page shows.

Templates live in ``gateway/ui/templates`` (package data) and are all compiled when the
gateway starts (`Templates.load`, in a thread): rendering reads no file afterwards.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import jinja2
from aiohttp import web

from gateway.ui.auth import UiSession
from gateway.version import package_version

__all__ = [
    "NAV",
    "SESSION",
    "TEMPLATES",
    "NavItem",
    "Templates",
    "is_async",
    "render",
    "render_text",
    "session_of",
]

NAV: tuple[tuple[str, str], ...] = (
    ("chat", "Chat"),
    ("sessions", "Sessions"),
    ("approvals", "Approvals"),
    ("schedules", "Schedules"),
    ("tasks", "Tasks"),
    ("memory", "Memory"),
    ("system", "System"),
)
"""The pages, in navigation order: ``(slug, title)``; page ``slug`` is ``/ui/<slug>``."""

SESSION = "familiar_ui.session"
"""The request key of the logged-in `UiSession` (set before any page handler runs)."""


@dataclass(frozen=True)
class NavItem:
    """One entry of the navigation bar."""

    href: str
    title: str
    current: bool


class Templates:
    """The compiled templates of the panel."""

    def __init__(self) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("gateway.ui", "templates"),
            autoescape=True,
            auto_reload=False,
            cache_size=-1,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

        self.env.filters["clock"] = _clock

    async def load(self) -> None:
        """Compile every template now, off the event loop."""
        await asyncio.to_thread(self._compile_all)

    def _compile_all(self) -> None:
        self.env.globals["version"] = package_version()
        for name in self.env.list_templates(extensions=["html"]):
            self.env.get_template(name)

    def render(self, name: str, context: dict[str, Any]) -> str:
        return self.env.get_template(name).render(context)


def _clock(epoch: object) -> str:
    """A Unix time as local ``YYYY-MM-DD HH:MM:SS`` (``-`` when there is none)."""
    if not isinstance(epoch, int | float):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


TEMPLATES = web.AppKey("familiar_ui.templates", Templates)


def session_of(request: web.Request) -> UiSession:
    """The logged-in session of a request that reached a page handler."""
    session = request[SESSION]
    assert isinstance(session, UiSession)
    return session


def is_async(request: web.Request) -> bool:
    """Whether the request came from the panel's script (`data-async` forms), which wants
    a fragment back rather than a redirect."""
    return request.headers.get("X-Familiar-Async") == "1"


def _nav(request: web.Request) -> list[NavItem]:
    first = request.path.removeprefix("/ui/").split("/", 1)[0]
    return [NavItem(f"/ui/{slug}", title, slug == first) for slug, title in NAV]


def render_text(request: web.Request, template: str, **context: Any) -> str:
    """``template`` rendered with ``context`` plus ``csrf``, ``operator``, ``nav`` and
    ``version`` (for a fragment sent in an SSE event, or a page)."""
    session = session_of(request)
    base = {"csrf": session.csrf, "operator": session.operator, "nav": _nav(request)}
    return request.config_dict[TEMPLATES].render(template, {**base, **context})


def render(
    request: web.Request, template: str, *, status: int = 200, **context: Any
) -> web.Response:
    """An HTML response of ``template`` (see `render_text` for what it is given)."""
    return web.Response(
        text=render_text(request, template, **context),
        status=status,
        content_type="text/html",
    )
