"""Async client of the daemon's control API on the Unix socket ``<home>/run/gateway.sock``."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import aiohttp

from core.errors import FamiliarError

__all__ = ["SOCKET_NAME", "ControlClient", "ControlError", "DaemonUnavailable", "socket_path"]

log = logging.getLogger(__name__)

SOCKET_NAME = "gateway.sock"
_BASE = "http://familiar"
_CONNECT_TIMEOUT = 5.0


def socket_path(home: Path) -> Path:
    """Return where the daemon of ``home`` listens: ``<home>/run/gateway.sock``."""
    return home / "run" / SOCKET_NAME


class DaemonUnavailable(FamiliarError):
    """No daemon answers on the control socket (missing, refused or hung up).

    Attributes:
        socket: the socket path that was tried.
    """

    def __init__(self, message: str, *, socket: Path) -> None:
        super().__init__(message)
        self.socket = socket


class ControlError(FamiliarError):
    """The daemon answered a control request with an error.

    Attributes:
        status: the HTTP status (4xx/5xx).
    """

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class ControlClient:
    """Talks to a running daemon over its control socket (HTTP/1.1, JSON).

    Use as an async context manager, or call `close` when done::

        async with ControlClient(home) as client:
            print(await client.status())

    Args:
        home: FAMILIAR_HOME of the daemon.
        connect_timeout: seconds to wait for the socket to accept a connection.
    """

    def __init__(self, home: Path, *, connect_timeout: float = _CONNECT_TIMEOUT) -> None:
        self.socket = socket_path(home)
        self._connect_timeout = connect_timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                base_url=_BASE,
                connector=aiohttp.UnixConnector(path=str(self.socket)),
                timeout=self._timeout(None),
            )
        return self._session

    def _timeout(self, total: float | None) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=total, sock_connect=self._connect_timeout)

    def _unavailable(self, exc: BaseException) -> DaemonUnavailable:
        reason = getattr(exc, "os_error", None) or exc
        text = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
        return DaemonUnavailable(f"no gateway answers on {self.socket}: {text}", socket=self.socket)

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        total: float | None = 30.0,
    ) -> dict[str, Any]:
        try:
            async with self._http().request(
                method, path, params=params, json=body, timeout=self._timeout(total)
            ) as resp:
                await _raise_for_status(resp)
                answer = await resp.json()
        except (aiohttp.ClientConnectionError, FileNotFoundError) as exc:
            raise self._unavailable(exc) from exc
        if not isinstance(answer, dict):
            raise ControlError(
                f"unexpected answer to {method} {path}: {answer!r}", status=resp.status
            )
        return answer

    async def status(self) -> dict[str, Any]:
        """``GET /v1/status``: uptime, channels, sessions, queue depth, provider."""
        return await self._json("GET", "/v1/status")

    async def message(self, message_id: str) -> dict[str, Any]:
        """``GET /v1/messages/{id}``: the status of one message and its reply, if any."""
        return await self._json("GET", f"/v1/messages/{quote(message_id, safe='')}")

    async def sessions(self) -> list[dict[str, Any]]:
        """``GET /v1/sessions``: every session (key, channel, counts, timestamps)."""
        body = await self._json("GET", "/v1/sessions")
        sessions = body.get("sessions", [])
        return list(sessions) if isinstance(sessions, list) else []

    async def session(self, key: str, *, events: bool = False) -> dict[str, Any]:
        """``GET /v1/sessions/{key}``: the session, its history and optionally its events.

        Raises:
            ControlError: with status 404 when the session is unknown.
        """
        params = {"events": "1"} if events else None
        return await self._json("GET", f"/v1/sessions/{quote(key, safe='')}", params=params)

    async def config(self) -> dict[str, Any]:
        """``GET /v1/config``: the daemon's effective config, secrets masked."""
        return await self._json("GET", "/v1/config")

    async def add_schedule(
        self, *, kind: str, spec: str, prompt: str, session: str, timezone: str | None
    ) -> dict[str, Any]:
        """``POST /v1/schedules``: create a schedule and return it.

        Raises:
            ControlError: with status 400 and the reason when the daemon refuses it.
        """
        body = {"kind": kind, "spec": spec, "prompt": prompt, "session": session}
        if timezone is not None:
            body["timezone"] = timezone
        return await self._json("POST", "/v1/schedules", body=body)

    async def schedules(self) -> list[dict[str, Any]]:
        """``GET /v1/schedules``: the active schedules of every session."""
        body = await self._json("GET", "/v1/schedules")
        schedules = body.get("schedules", [])
        return list(schedules) if isinstance(schedules, list) else []

    async def cancel_schedule(self, schedule_id: int) -> dict[str, Any]:
        """``DELETE /v1/schedules/{id}``: cancel a schedule and return it.

        Raises:
            ControlError: with status 404 when there is no such active schedule.
        """
        return await self._json("DELETE", f"/v1/schedules/{schedule_id}")

    async def send(
        self,
        session: str,
        text: str,
        *,
        stream: bool = True,
        timeout: float | None = None,
        autopilot: bool = False,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """``POST /v1/messages``: publish a message and yield the NDJSON events of its answer.

        Yields ``accepted`` first, then ``delta``/``progress`` (only with ``stream``), and
        last ``reply`` or ``timeout``. Leaving the iteration early disconnects but does
        not cancel the message: the daemon still answers and stores the reply.

        Args:
            session: the session key, e.g. ``cli:default``.
            text: the message text.
            stream: ask for deltas and progress lines.
            timeout: seconds the daemon waits for the reply before answering ``timeout``;
                None waits as long as the turn takes.
            autopilot: run the message in autopilot mode.

        Raises:
            DaemonUnavailable: no daemon answers, or it hung up before the last line.
            ControlError: the daemon refused the message.
        """
        body = {
            "session": session,
            "text": text,
            "stream": stream,
            "timeout": timeout,
            "autopilot": autopilot,
        }
        # The daemon answers "timeout" itself; ours only guards against a hung daemon.
        guard = self._timeout(None if timeout is None else timeout + 30.0)
        final = False
        try:
            async with self._http().post("/v1/messages", json=body, timeout=guard) as resp:
                await _raise_for_status(resp)
                async for item in _ndjson(resp):
                    final = item.get("type") in ("reply", "timeout")
                    yield item
                    if final:
                        return
        except (aiohttp.ClientConnectionError, FileNotFoundError) as exc:
            raise self._unavailable(exc) from exc
        if not final:
            raise DaemonUnavailable(
                f"the gateway on {self.socket} closed the stream before the reply",
                socket=self.socket,
            )

    async def watch(self, session: str) -> AsyncGenerator[dict[str, Any], None]:
        """``GET /v1/watch/{session}``: yield ``reply`` lines nobody else waits for.

        Runs until the daemon goes away (then it returns).
        """
        try:
            async with self._http().get(
                f"/v1/watch/{quote(session, safe='')}", timeout=self._timeout(None)
            ) as resp:
                await _raise_for_status(resp)
                async for item in _ndjson(resp):
                    yield item
        except (aiohttp.ClientConnectionError, FileNotFoundError) as exc:
            raise self._unavailable(exc) from exc


async def _ndjson(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """Yield one JSON object per line; lines may be longer than aiohttp's line limit."""
    buffer = b""
    async for chunk in resp.content.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if item := _parse_line(line):
                yield item
    if item := _parse_line(buffer):
        yield item


def _parse_line(line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        item = json.loads(line)
    except ValueError:
        log.warning("ignoring a malformed line from the gateway: %.200r", line)
        return None
    return item if isinstance(item, dict) else None


async def _raise_for_status(resp: aiohttp.ClientResponse) -> None:
    if resp.status < 400:
        return
    text = await resp.text()
    try:
        body = json.loads(text)
        message = str(body["error"]) if isinstance(body, dict) and "error" in body else text
    except ValueError:
        message = text.strip() or resp.reason or "error"
    raise ControlError(f"gateway answered {resp.status}: {message}", status=resp.status)
