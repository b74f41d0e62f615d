"""The web panel's aiohttp application, mounted at ``/ui`` on the gateway's HTTP app.

`mount_ui` builds it: the login route, the static files, every page of
`gateway.ui.pages` and the security headers of every answer. `add_login_route` adds the
control route ``POST /v1/ui/login`` that `familiar ui` asks for a login URL.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import mimetypes
from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from pathlib import Path

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import FamiliarError
from gateway.control.client import ControlError, DaemonUnavailable
from gateway.control.messages import error
from gateway.control.requests import validation_message
from gateway.ui.auth import COOKIE, OPERATOR_PATTERN, UiAuth
from gateway.ui.render import NAV, TEMPLATES, Templates, session_of
from gateway.ui.routes import Handler, UiRoutes
from gateway.ui_config import UiConfig

__all__ = ["LOGIN_PATH", "LoginRequest", "add_login_route", "mount_ui"]

log = logging.getLogger(__name__)

LOGIN_PATH = "/ui/login"
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_STATIC = web.AppKey("familiar_ui.static", dict[str, tuple[bytes, str]])


def mount_ui(app: web.Application, *, home: Path, config: UiConfig) -> UiAuth | None:
    """Serve the panel under ``/ui`` on ``app`` (nothing when ``config.enabled`` is false).

    Returns:
        The panel's logins (hand them to `add_login_route`), or None when it is off.
    """
    if not config.enabled:
        return None
    auth = UiAuth(config)
    ui = web.Application()
    ui[TEMPLATES] = Templates()
    ui[_STATIC] = {}
    ui.cleanup_ctx.append(_load)
    ui.on_response_prepare.append(_secure_headers)
    ui.middlewares.append(_control_errors)
    ui.router.add_get("/login", _login(auth))
    routes = UiRoutes(ui, home=home, auth=auth)
    routes.action("/logout", _logout(auth))
    routes.fragment("/static/{name}", _static)
    routes.page("/", _first_page)
    for slug, _title in NAV:
        module = importlib.import_module(f"gateway.ui.pages.{slug}")
        module.add_routes(routes)
    # Before the sub-app, whose prefix would answer "/ui" with a 404: a redirect into
    # "/ui/", which checks the cookie.
    app.router.add_get("/ui", _first_page)
    app.add_subapp("/ui", ui)
    return auth


async def _load(app: web.Application) -> AsyncIterator[None]:
    await app[TEMPLATES].load()
    app[_STATIC].update(await asyncio.to_thread(_read_static))
    yield


def _read_static() -> dict[str, tuple[bytes, str]]:
    found = {}
    for entry in files("gateway.ui").joinpath("static").iterdir():
        kind = mimetypes.guess_type(entry.name)[0] or "application/octet-stream"
        found[entry.name] = (entry.read_bytes(), kind)
    return found


async def _secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(_HEADERS)
    if "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = "no-store"


@web.middleware
async def _control_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A page whose control request failed says why, instead of a bare 500."""
    try:
        return await handler(request)
    except DaemonUnavailable as exc:
        return web.Response(status=503, text=f"the control socket does not answer: {exc}")
    except ControlError as exc:
        return web.Response(status=exc.status, text=str(exc))
    except FamiliarError as exc:
        log.warning("ui request failed path=%s error=%s", request.path, exc)
        return web.Response(status=500, text=str(exc))


def _login(auth: UiAuth) -> Handler:
    async def login(request: web.Request) -> web.Response:
        token = request.query.get("token", "")
        session = auth.redeem(token) if token else None
        if session is None:
            if token:
                log.warning("ui login refused: unknown, used or expired token")
            html = request.config_dict[TEMPLATES].render("login_needed.html", {"used": bool(token)})
            return web.Response(status=401, text=html, content_type="text/html")
        log.info("ui login operator=%s", session.operator)
        redirect = web.HTTPSeeOther("/ui/")
        response: web.Response = redirect
        if request.headers.get("Sec-Fetch-Site", "none") not in ("none", "same-origin"):
            # Opened from elsewhere (`familiar ui` opens a local file that forwards
            # here): a SameSite=Strict cookie would not go with a redirect of that
            # navigation. A page of the panel's own origin sends the browser on instead.
            html = request.config_dict[TEMPLATES].render("login_continue.html", {})
            response = web.Response(text=html, content_type="text/html")
        response.set_cookie(
            COOKIE,
            session.id,
            path="/ui",
            httponly=True,
            samesite="Strict",
            secure=request.secure or auth.secure_cookie,
            max_age=int(auth.session_seconds),
        )
        if response is redirect:
            raise redirect
        return response

    return login


def _logout(auth: UiAuth) -> Handler:
    async def logout(request: web.Request) -> web.StreamResponse:
        auth.end(session_of(request))
        response = web.HTTPSeeOther(LOGIN_PATH)
        response.del_cookie(COOKIE, path="/ui")
        raise response

    return logout


async def _static(request: web.Request) -> web.Response:
    found = request.config_dict[_STATIC].get(request.match_info["name"])
    if found is None:
        raise web.HTTPNotFound()
    body, kind = found
    return web.Response(
        body=body, content_type=kind, headers={"Cache-Control": "private, max-age=3600"}
    )


async def _first_page(request: web.Request) -> web.Response:
    raise web.HTTPSeeOther(f"/ui/{NAV[0][0]}" if request.path == "/ui/" else "/ui/")


class LoginRequest(BaseModel):
    """The body of ``POST /v1/ui/login``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    operator: str = Field(pattern=f"^{OPERATOR_PATTERN}$")
    """The OS user asking (shown in the panel, recorded on its decisions)."""


def add_login_route(app: web.Application, auth: Callable[[], UiAuth | None]) -> None:
    """``POST /v1/ui/login`` ``{"operator": user}`` on the control app: a one-time login
    URL ``{"url", "expires_in"}`` (404 when the panel is off or HTTP is not served here)."""

    async def login(request: web.Request) -> web.Response:
        ui = auth()
        if ui is None or ui.base_url is None:
            return error(404, "the web panel is off here ([ui] enabled = false, or no HTTP)")
        try:
            body = LoginRequest.model_validate_json(await request.read())
        except ValidationError as exc:
            return error(400, validation_message(exc))
        token = ui.issue(body.operator)
        log.info("ui login url issued operator=%s", body.operator)
        return web.json_response(
            {"url": f"{ui.base_url}{LOGIN_PATH}?token={token}", "expires_in": ui.token_seconds}
        )

    app.router.add_post("/v1/ui/login", login)
