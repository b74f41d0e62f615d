"""Control API routes for memory: list, search, scopes and forget on ``/v1/memory`` (any scope)."""

from __future__ import annotations

from aiohttp import web

from core.errors import MemoryNotFound, MemoryRefused
from core.memory import MemoryEntry, MemoryService

__all__ = ["add_memory_routes"]

_MAX_LIMIT = 1000


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _entries(found: list[MemoryEntry]) -> web.Response:
    return web.json_response({"entries": [e.as_json() for e in found]})


def _limit(request: web.Request, default: int, cap: int) -> int:
    raw = request.query.get("limit", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= cap:
        raise ValueError(f"'limit' must be a whole number from 1 to {cap}")
    return int(raw)


def add_memory_routes(app: web.Application, memory: MemoryService) -> None:
    """Add the memory routes to the control app (the user manages every scope).

    - ``GET /v1/memory?scope=KEY&limit=N`` -> ``{"entries": [...]}``, newest first.
    - ``GET /v1/memory/search?q=QUERY&scope=KEY&limit=N`` -> ``{"entries": [...]}``, best
      first; 400 ``{"error"}`` for a query without words.
    - ``GET /v1/memory/scopes`` -> ``{"scopes": [{"scope", "entries", "updated_at"}]}``,
      the most recently changed first.
    - ``DELETE /v1/memory/{id}`` -> the forgotten entry; 404 when unknown, 400 for a chunk
      of a memory file (edit the file).
    """
    routes = _MemoryRoutes(memory)
    app.router.add_get("/v1/memory", routes.list)
    app.router.add_get("/v1/memory/search", routes.search)
    app.router.add_get("/v1/memory/scopes", routes.scopes)
    app.router.add_delete("/v1/memory/{id}", routes.forget)


class _MemoryRoutes:
    def __init__(self, memory: MemoryService) -> None:
        self._memory = memory

    async def list(self, request: web.Request) -> web.Response:
        try:
            limit = _limit(request, 100, _MAX_LIMIT)
        except ValueError as exc:
            return _error(400, str(exc))
        scope = request.query.get("scope") or None
        return _entries(await self._memory.list(scope=scope, limit=limit))

    async def search(self, request: web.Request) -> web.Response:
        query = request.query.get("q", "")
        scope = request.query.get("scope") or None
        try:
            limit = _limit(request, 20, 100)
            found = await self._memory.search(
                query, scopes=None if scope is None else [scope], limit=limit
            )
        except (ValueError, MemoryRefused) as exc:
            return _error(400, str(exc))
        return _entries(found)

    async def scopes(self, _request: web.Request) -> web.Response:
        found = await self._memory.scopes()
        return web.json_response(
            {"scopes": [{"scope": s, "entries": n, "updated_at": t} for s, n, t in found]}
        )

    async def forget(self, request: web.Request) -> web.Response:
        raw = request.match_info["id"].lstrip("#")
        if not raw.isdigit() or len(raw) > 18:
            return _error(404, f"no memory {request.match_info['id']!r}")
        try:
            entry = await self._memory.delete_any(int(raw))
        except MemoryNotFound as exc:
            return _error(404, str(exc))
        except MemoryRefused as exc:
            return _error(400, str(exc))
        return web.json_response(entry.as_json())
