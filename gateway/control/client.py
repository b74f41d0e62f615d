"""Async client of the daemon's control API on the Unix socket ``<home>/run/gateway.sock``.

It speaks HTTP/1.1 with `gateway.control.http1` (stdlib only): ``familiar send`` starts
without importing aiohttp or pydantic.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote, urlencode

from gateway.control.client_errors import (
    ControlError,
    DaemonUnavailable,
    RequestTooLarge,
    body_lines,
    check_size,
    nobody_listens,
    raise_for_status,
)
from gateway.control.http1 import Exchange
from gateway.control.protocol import ReplyLine, StreamLine, TimeoutLine, parse_line, send_body
from gateway.home import RUN_DIR

__all__ = [
    "SOCKET_NAME",
    "ControlClient",
    "ControlError",
    "DaemonUnavailable",
    "RequestTooLarge",
    "socket_path",
]

log = logging.getLogger(__name__)

SOCKET_NAME = "gateway.sock"
_CONNECT_TIMEOUT = 5.0
_HUNG_UP = (OSError, TimeoutError)
"""No daemon, or it went away (also mid-body: a killed daemon cuts a chunked answer), or
it did not answer in time. `http1.HungUp` is an OSError."""
_JSON = {"Content-Type": "application/json"}


def socket_path(home: Path) -> Path:
    """Return where the daemon of ``home`` listens: ``<home>/run/gateway.sock``."""
    return home / RUN_DIR / SOCKET_NAME


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
        """Nothing to release: each request has its own connection, closed when it ends.

        (A connection per request is cheap on a Unix socket, and thousands of concurrent
        sends need no pool.)
        """

    def _exchange(
        self,
        method: str,
        target: str,
        *,
        body: bytes | None = None,
        total: float | None,
    ) -> Exchange:
        return Exchange(
            self.socket,
            method,
            target,
            body=body,
            headers=_JSON if body is not None else None,
            connect_timeout=self._connect_timeout,
            total=total,
        )

    def _unavailable(self, exc: BaseException) -> DaemonUnavailable:
        if isinstance(exc, TimeoutError):
            text = "no answer in time"
        else:
            text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
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
        data = None
        if body is not None:
            # ensure_ascii=False: UTF-8 is half or a third the size of \u escapes.
            data = json.dumps(body, ensure_ascii=False).encode(errors="surrogatepass")
            check_size(data)
        target = f"{path}?{urlencode(params)}" if params else path
        try:
            async with self._exchange(method, target, body=data, total=total) as resp:
                await raise_for_status(resp)
                raw = await resp.read()
        except _HUNG_UP as exc:
            raise self._unavailable(exc) from exc
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = raw[:200]
        if not isinstance(answer, dict):
            raise ControlError(
                f"unexpected answer to {method} {path}: {answer!r}", status=resp.status
            )
        return answer

    async def status(self) -> dict[str, Any]:
        """``GET /v1/status``: uptime, channels, sessions, queue depth, provider."""
        return await self._json("GET", "/v1/status")

    async def ui_login(self, operator: str) -> dict[str, Any]:
        """``POST /v1/ui/login``: a one-time login URL of the web panel for ``operator``
        (``url``, ``expires_in`` seconds)."""
        return await self._json("POST", "/v1/ui/login", body={"operator": operator})

    async def system(self) -> dict[str, Any]:
        """``GET /v1/system``: hooks, agents, skills, workspace trust, recent errors."""
        return await self._json("GET", "/v1/system")

    async def trust_allow(self, path: str, fingerprint: str | None = None) -> dict[str, Any]:
        """``POST /v1/trust/allow``: trust a workspace hook or MCP file (as listed by
        `system`) with its current content; given the ``fingerprint`` the listing showed,
        only if that is still its fingerprint."""
        body: dict[str, Any] = {"path": path}
        if fingerprint is not None:
            body["fingerprint"] = fingerprint
        return await self._json("POST", "/v1/trust/allow", body=body)

    async def message(self, message_id: str) -> dict[str, Any]:
        """``GET /v1/messages/{id}``: the status of one message and its reply, if any."""
        return await self._json("GET", f"/v1/messages/{quote(message_id, safe='')}")

    async def sessions(self) -> list[dict[str, Any]]:
        """``GET /v1/sessions``: every session (key, channel, counts, timestamps)."""
        sessions = (await self.find_sessions()).get("sessions", [])
        return list(sessions) if isinstance(sessions, list) else []

    async def find_sessions(
        self, *, channel: str = "", query: str = "", limit: int = 1000
    ) -> dict[str, Any]:
        """``GET /v1/sessions``: ``sessions`` (newest first, with ``unread`` counts) of
        ``channel`` whose key or messages contain ``query``, and every ``channels``."""
        params = {"channel": channel, "q": query, "limit": str(limit)}
        return await self._json(
            "GET", "/v1/sessions", params={k: v for k, v in params.items() if v}
        )

    async def session(
        self, key: str, *, events: bool = False, message_id: str | None = None, history: bool = True
    ) -> dict[str, Any]:
        """``GET /v1/sessions/{key}``: the session, its history and optionally its events.

        Args:
            key: the session key.
            events: include the newest events (up to 10,000) of the session.
            message_id: with ``events``, only the events of that message.
            history: include the history (else an empty list).

        Raises:
            ControlError: with status 404 when the session is unknown.
        """
        params = {"events": "1"} if events else {}
        if events and message_id is not None:
            params["message_id"] = message_id
        if not history:
            params["history"] = "0"
        return await self._json("GET", f"/v1/sessions/{quote(key, safe='')}", params=params)

    async def mark_read(self, key: str, *, upto: int) -> int:
        """``POST /v1/sessions/{key}/read``: mark unread replies up to id ``upto`` read."""
        path = f"/v1/sessions/{quote(key, safe='')}/read"
        answer = await self._json("POST", path, body={"upto": upto})
        return int(answer.get("marked_read", 0))

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

    async def schedule_list(self) -> dict[str, Any]:
        """``GET /v1/schedules`` whole: ``schedules`` and the default ``timezone``."""
        return await self._json("GET", "/v1/schedules")

    async def cancel_schedule(self, schedule_id: int) -> dict[str, Any]:
        """``DELETE /v1/schedules/{id}``: cancel a schedule and return it.

        Raises:
            ControlError: with status 404 when there is no such active schedule.
        """
        return await self._json("DELETE", f"/v1/schedules/{schedule_id}")

    async def approvals(self, *, decided: int = 20) -> dict[str, Any]:
        """``GET /v1/approvals``: ``pending`` (every session's) and the latest ``decided``."""
        return await self._json("GET", "/v1/approvals", params={"decided": str(decided)})

    async def decide_approval(
        self, approval_id: str, decision: str, *, operator: str, wait: float = 10.0
    ) -> dict[str, Any]:
        """``POST /v1/approvals/{id}``: approve or deny as ``ui:<operator>``; ``message_id``,
        ``reply`` (null if none within ``wait`` s), ``approval``. ControlError 404/409/400."""
        body = {"decision": decision, "operator": operator, "wait": wait}
        path = f"/v1/approvals/{quote(approval_id, safe='')}"
        return await self._json("POST", path, body=body, total=wait + 30.0)

    async def memory(self, *, scope: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """``GET /v1/memory``: the newest memory entries (of one scope, if given)."""
        params = {"limit": str(limit)} | ({"scope": scope} if scope else {})
        body = await self._json("GET", "/v1/memory", params=params)
        entries = body.get("entries", [])
        return list(entries) if isinstance(entries, list) else []

    async def search_memory(
        self, query: str, *, scope: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        """``GET /v1/memory/search``: entries matching ``query``, best first.

        Raises:
            ControlError: with status 400 when the query has no words.
        """
        params = {"q": query, "limit": str(limit)} | ({"scope": scope} if scope else {})
        body = await self._json("GET", "/v1/memory/search", params=params)
        entries = body.get("entries", [])
        return list(entries) if isinstance(entries, list) else []

    async def memory_scopes(self) -> list[dict[str, Any]]:
        """``GET /v1/memory/scopes``: each scope with its entry count, newest first."""
        body = await self._json("GET", "/v1/memory/scopes")
        scopes = body.get("scopes", [])
        return list(scopes) if isinstance(scopes, list) else []

    async def forget_memory(self, entry_id: int) -> dict[str, Any]:
        """``DELETE /v1/memory/{id}``: delete a memory entry of any scope and return it.

        Raises:
            ControlError: 404 when there is no such entry, 400 for a memory file's chunk.
        """
        return await self._json("DELETE", f"/v1/memory/{entry_id}")

    async def tasks(self, *, owner: str | None = None) -> list[dict[str, Any]]:
        """``GET /v1/tasks``: subagents, newest first (of one parent session, if given)."""
        params = {"owner": owner} if owner else None
        body = await self._json("GET", "/v1/tasks", params=params)
        tasks = body.get("tasks", [])
        return list(tasks) if isinstance(tasks, list) else []

    async def task(self, task_id: str) -> dict[str, Any]:
        """``GET /v1/tasks/{id}``: one subagent with its prompt, result and history.

        Raises:
            ControlError: 404 when there is no such task.
        """
        return await self._json("GET", f"/v1/tasks/{quote(task_id, safe='')}")

    async def todos(self, *, session: str | None = None) -> list[dict[str, Any]]:
        """``GET /v1/todos``: fleet todos (of one session, if given), in order."""
        params = {"session": session} if session else None
        body = await self._json("GET", "/v1/todos", params=params)
        todos = body.get("todos", [])
        return list(todos) if isinstance(todos, list) else []

    async def cancel_task(self, task_id: str, *, by: str | None = None) -> dict[str, Any]:
        """``DELETE /v1/tasks/{id}``: cancel a subagent and the ones it started.

        Args:
            task_id: the subagent's id.
            by: who cancels it (e.g. ``ui:alice``), recorded with it; default the user.

        Raises:
            ControlError: 404 when there is no such task, 400 for a bad ``by``.
        """
        params = {"by": by} if by else None
        return await self._json("DELETE", f"/v1/tasks/{quote(task_id, safe='')}", params=params)

    async def task_trees(self, *, session: str | None = None) -> list[dict[str, Any]]:
        """``GET /v1/tasks/tree``: per parent session its subagent tree, live progress.

        Each item has ``session``, ``total``, ``active``, ``updated_at`` and ``tasks``
        (as `tasks` lists them, each with its ``children``).

        Raises:
            ControlError: 400 for a bad session key.
        """
        params = {"session": session} if session else None
        body = await self._json("GET", "/v1/tasks/tree", params=params)
        trees = body.get("sessions", [])
        return list(trees) if isinstance(trees, list) else []

    async def send(
        self,
        session: str,
        text: str,
        *,
        stream: bool = True,
        timeout: float | None = None,
        autopilot: bool = False,
        client_id: str | None = None,
        operator: str | None = None,
    ) -> AsyncGenerator[StreamLine, None]:
        """``POST /v1/messages``: publish a message and yield the NDJSON lines of its answer.

        Yields `Accepted` first, then `DeltaLine`/`ProgressLine` (only with ``stream``),
        and last `ReplyLine` or `TimeoutLine`. Leaving the iteration early disconnects but
        does not cancel the message: the daemon still answers and stores the reply.

        Each call sends a ``client_id`` (a fresh one unless given); when the connection
        breaks before ``accepted`` arrives, the request is sent once more with the same
        id, so the daemon stores the message once whether or not the first attempt
        reached it. A caller that sends the same message again later (say, once a
        restarted daemon is back) passes the same ``client_id`` for the same guarantee:
        the daemon may have stored it and died before saying ``accepted``.

        Args:
            session: the session key, e.g. ``cli:default``.
            text: the message text.
            stream: ask for deltas and progress lines.
            timeout: seconds the daemon waits for the reply before answering ``timeout``;
                None waits as long as the turn takes.
            autopilot: run the message in autopilot mode.
            client_id: the message's idempotency id (1-128 of ``[A-Za-z0-9._:-]``);
                default a fresh one.
            operator: the web panel's operator: sends to a ``ui:NAME`` session through
                ``POST /v1/ui/messages`` (only the gateway's own process may).

        Raises:
            ValueError: ``text`` is not valid text (a lone surrogate); nothing was sent.
            RequestTooLarge: the request would be over `MAX_BODY_BYTES`; nothing was sent.
            DaemonUnavailable: no daemon answers, or it hung up before the last line.
            ControlError: the daemon refused the message.
        """
        body = send_body(
            session=session,
            text=text,
            stream=stream,
            timeout=timeout,
            autopilot=autopilot,
            client_id=client_id or uuid.uuid4().hex,
            operator=operator,
        )
        check_size(body)
        path = "/v1/messages" if operator is None else "/v1/ui/messages"
        for attempt in (1, 2):
            accepted = False
            try:
                async for line in self._send_once(path, body, timeout):
                    accepted = True
                    yield line
                return
            except DaemonUnavailable as exc:
                if accepted or attempt == 2 or nobody_listens(exc):
                    raise
                log.info("connection broke before accepted; sending again: %s", exc)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_once(
        self, path: str, body: bytes, timeout: float | None
    ) -> AsyncGenerator[StreamLine, None]:
        # The daemon answers "timeout" itself; ours only guards against a hung daemon.
        guard = None if timeout is None else timeout + 30.0
        final = False
        try:
            async with self._exchange("POST", path, body=body, total=guard) as resp:
                await raise_for_status(resp)
                async for raw in body_lines(resp):
                    line = parse_line(raw)
                    if line is None:
                        continue
                    final = isinstance(line, ReplyLine | TimeoutLine)
                    yield line
                    if final:
                        return
        except _HUNG_UP as exc:
            raise self._unavailable(exc) from exc
        if not final:
            raise DaemonUnavailable(
                f"the gateway on {self.socket} closed the stream before the reply",
                socket=self.socket,
            )

    async def watch(self, session: str) -> AsyncGenerator[ReplyLine, None]:
        """``GET /v1/watch/{session}``: yield the replies no sender received.

        Runs until the daemon goes away (then it returns).
        """
        try:
            target = f"/v1/watch/{quote(session, safe='')}"
            async with self._exchange("GET", target, total=None) as resp:
                await raise_for_status(resp)
                async for raw in body_lines(resp):
                    if isinstance(line := parse_line(raw), ReplyLine):
                        yield line
        except _HUNG_UP as exc:
            raise self._unavailable(exc) from exc
