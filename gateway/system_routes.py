"""Control routes for what the web panel's System page shows beyond ``/v1/status``, and
its trust action (registered on the control app by `gateway.serve`).

``GET /v1/system``: hooks (loaded commands by event, files, problems), agents (as
``familiar agents list --json``), skills, the workspace's hook and MCP files with their
trust state (as ``familiar trust --json``) and this process's recent warnings and
errors. ``POST /v1/trust/allow`` ``{"path": ..., "fingerprint": ...}`` trusts one of those
files with its current content (as ``familiar trust allow``), and, given the
``fingerprint`` the listing showed, only if the file and the files it runs still have
it (409 if not).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from core.app import CoreApp
from core.errors import ConfigError
from core.skills.files import load_skills
from core.skills.model import default_skill_sources
from gateway.agent_report import agent_report
from gateway.config import FamiliarConfig, workspace_dir
from gateway.control.messages import error
from gateway.control.requests import validation_message
from gateway.recent_errors import RecentErrors
from gateway.trust import workspace_control

__all__ = ["TrustAllowRequest", "add_system_routes"]

log = logging.getLogger(__name__)


class TrustAllowRequest(BaseModel):
    """The body of ``POST /v1/trust/allow``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    """A control file's path exactly as ``GET /v1/system`` lists it (``trust.files``)."""
    fingerprint: str | None = None
    """The fingerprint the listing showed (of the file and the files it runs): what the
    operator reviewed. A file changed since then is not trusted."""


def add_system_routes(
    app: web.Application, home: Path, config: FamiliarConfig, core: CoreApp | None
) -> None:
    """Add ``GET /v1/system`` and ``POST /v1/trust/allow`` to the control app."""
    errors = RecentErrors()

    async def keep_errors(_app: web.Application) -> AsyncIterator[None]:
        logging.getLogger().addHandler(errors)
        try:
            yield
        finally:
            logging.getLogger().removeHandler(errors)

    async def system(_request: web.Request) -> web.Response:
        assert core is not None  # (the control app is built after the core)
        report = await asyncio.to_thread(_files_report, home, config)
        report["hooks"] = await _hooks(core)
        report["errors"] = errors.recent()
        return web.json_response(report)

    async def allow(request: web.Request) -> web.Response:
        try:
            body = TrustAllowRequest.model_validate_json(await request.read())
        except ValidationError as exc:
            return error(400, validation_message(exc))
        try:
            trusted = await asyncio.to_thread(_allow, home, config, body.path, body.fingerprint)
        except ConfigError as exc:
            return error(400, str(exc))
        if trusted is None:
            return error(404, f"{body.path} is not a hook or MCP file of the workspace")
        if "changed" in trusted:
            log.warning("workspace file not trusted: changed since shown path=%s", body.path)
            return error(
                409,
                f"{body.path} (or a file it runs) changed since it was shown: "
                "nothing was trusted; review it again",
            )
        log.info("workspace file trusted path=%s", body.path)
        return web.json_response(trusted)

    app.cleanup_ctx.append(keep_errors)
    app.router.add_get("/v1/system", system)
    app.router.add_post("/v1/trust/allow", allow)


def _files_report(home: Path, config: FamiliarConfig) -> dict[str, Any]:
    """Agents, skills and trust: read from the files, as the CLI reads them."""
    report: dict[str, Any] = {"agents": agent_report(home, config)}
    skills, problems = load_skills(default_skill_sources(workspace_dir(home, config), home))
    report["skills"] = {
        "enabled": config.skills.enabled,
        "skills": [
            {"name": s.name, "description": s.description, "file": str(s.file)} for s in skills
        ],
        "problems": [p.as_json() for p in problems],
    }
    try:
        report["trust"] = workspace_control(home, config).as_json()
    except ConfigError as exc:
        report["trust"] = {"error": str(exc), "files": []}
    return report


async def _hooks(core: CoreApp) -> dict[str, Any]:
    if core.hooks is None:
        return {"enabled": False, "commands": [], "files": [], "problems": []}
    loaded = await core.hooks.current()
    return {
        "enabled": True,
        "disabled_by": None if loaded.disabled_by is None else str(loaded.disabled_by),
        "commands": [
            {"event": c.event_name, "source": str(c.source), "command": " ".join(c.argv)}
            for commands in loaded.commands.values()
            for c in commands
        ],
        "files": [str(path) for path in loaded.files],
        "problems": [{"path": str(p.path), "reason": p.reason} for p in loaded.problems],
    }


def _allow(
    home: Path, config: FamiliarConfig, given: str, expected: str | None
) -> dict[str, Any] | None:
    control = workspace_control(home, config)
    found = next((f for f in control.files if str(f.check.path) == given), None)
    if found is None:
        return None
    if expected is not None and found.check.fingerprint.whole != expected:
        return {"changed": given, "fingerprint": found.check.fingerprint.whole}
    control.trust.allow([found.check])
    return {"trusted": given, "fingerprint": found.check.fingerprint.whole}
