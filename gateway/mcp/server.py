"""familiar as an MCP server: tools that talk to the running gateway over its control socket.

Every tool goes through the control API (as the ``familiar`` CLI does), so messages take
the durable bus and schedules the schedule service; nothing here touches the store.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from core.mcp import McpServeConfig
from core.session_keys import session_key_for
from gateway.control.client import ControlClient, ControlError, DaemonUnavailable
from gateway.control.conversation import converse, no_reply_text
from gateway.home import no_daemon_hint
from gateway.version import package_version

__all__ = ["DEFAULT_SESSION", "build_mcp_server"]

DEFAULT_SESSION = "cli:mcp"
"""Where ``send_message`` talks when no session is given."""
_KINDS = ("every", "after", "at", "cron")
_READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
"""Tools that only read the gateway's state."""
_ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_ANNOTATIONS = {
    "send_message": ToolAnnotations(
        # the assistant answering may use its tools (exec, web...): the open world
        read_only_hint=False,
        destructive_hint=False,
        open_world_hint=True,
    ),
    "list_sessions": _READS,
    "read_session": _READS,
    "schedule_add": _ADDS,
    "schedule_list": _READS,
    "schedule_cancel": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
    "tasks_list": _READS,
}
"""Hints for clients (MCP's ``ToolAnnotations``): which tools only read, so a client may
run them without asking, and which one removes something."""
T = TypeVar("T")


def _key(session: str | None) -> str:
    try:
        return session_key_for(session or DEFAULT_SESSION)
    except ValueError as exc:
        raise ToolError(f"bad session: {exc}") from None


def _schedule_spec(spec: str) -> tuple[str, str]:
    kind, _, rest = spec.strip().lstrip("/").partition(" ")
    if kind not in _KINDS or not rest.strip():
        raise ToolError(
            f"spec {spec!r}: write 'every 30m', 'after 2h', 'at 2030-01-01T09:00' "
            "or 'cron 0 9 * * mon-fri'"
        )
    return kind, rest.strip()


class _GatewayTools:
    """The tools, each one control-API call (or a few) on the gateway of ``home``."""

    def __init__(self, home: Path, config: McpServeConfig) -> None:
        self._home = home
        self._config = config

    @contextlib.asynccontextmanager
    async def _control(self) -> AsyncIterator[ControlClient]:
        try:
            async with ControlClient(self._home) as client:
                yield client
        except DaemonUnavailable:
            raise ToolError(no_daemon_hint(self._home)) from None
        except ControlError as exc:
            raise ToolError(f"the gateway refused: {exc}") from None

    async def _ask(self, fn: Callable[[ControlClient], Awaitable[T]]) -> T:
        async with self._control() as client:
            return await fn(client)

    async def send_message(
        self, text: str, session: str | None = None, wait: bool = True
    ) -> dict[str, Any]:
        """Send a message to the assistant and (with wait) return its reply.

        Args:
            text: the message.
            session: the session key (a bare NAME means cli:NAME; default cli:mcp).
            wait: wait for the reply; false returns once the message is queued.
        """
        if not text.strip():
            raise ToolError("the message is empty")
        key = _key(session)
        timeout = self._config.reply_timeout if wait else 0.001
        async with self._control() as client:
            outcome = await converse(client, key, text, stream=False, wait=timeout)
        answer: dict[str, Any] = {"session": key, "message_id": outcome.message_id}
        reply = outcome.reply
        if reply is not None and reply["kind"] != "reply":
            raise ToolError(reply["text"])
        if reply is not None:
            return {**answer, "status": "done", "reply": reply["text"]}
        if not wait:
            return {**answer, "status": "queued"}
        return {**answer, "status": "timeout", "note": no_reply_text(outcome, key, timeout)}

    async def list_sessions(self) -> list[dict[str, Any]]:
        """Every session of the gateway: key, channel, message counts, last activity."""
        return await self._ask(ControlClient.sessions)

    async def read_session(self, key: str, limit: int = 20) -> dict[str, Any]:
        """The newest messages of one session.

        Args:
            key: the session key (e.g. cli:default, slack:T1:C1).
            limit: how many of the newest history entries to return.
        """
        session = _key(key)
        detail = await self._ask(lambda c: c.session(session))
        history = detail.get("history")
        if isinstance(history, list):
            detail["history"] = history[-max(limit, 1) :]
        return detail

    async def schedule_add(
        self, spec: str, prompt: str, session: str | None = None, timezone: str | None = None
    ) -> dict[str, Any]:
        """Schedule a prompt on a session.

        Args:
            spec: 'every 30m', 'after 2h', 'at 2030-01-01T09:00' or 'cron 0 9 * * mon-fri'.
            prompt: the plain message to run (not a slash command).
            session: the session key (default cli:mcp).
            timezone: IANA timezone for 'at' and 'cron'.
        """
        kind, rest = _schedule_spec(spec)
        key = _key(session)
        return await self._ask(
            lambda c: c.add_schedule(
                kind=kind, spec=rest, prompt=prompt, session=key, timezone=timezone
            )
        )

    async def schedule_list(self) -> list[dict[str, Any]]:
        """The active schedules of every session."""
        return await self._ask(ControlClient.schedules)

    async def schedule_cancel(self, id: int) -> dict[str, Any]:
        """Cancel a schedule by its id."""
        return await self._ask(lambda c: c.cancel_schedule(id))

    async def tasks_list(self, owner: str | None = None) -> list[dict[str, Any]]:
        """The subagents, newest first (of one parent session when ``owner`` is given):
        id, agent type, status, mode, parent session and progress."""
        key = _key(owner) if owner else None
        return await self._ask(lambda c: c.tasks(owner=key))


def build_mcp_server(home: Path, config: McpServeConfig) -> MCPServer:
    """The MCP server of ``familiar mcp serve``, for the gateway of ``home``."""
    server = MCPServer(
        "familiar",
        instructions="Talk to the familiar assistant gateway: send messages, read "
        "sessions, manage scheduled prompts, list subagents.",
        log_level="WARNING",
        version=package_version(),
    )
    tools = _GatewayTools(home, config)
    for fn in (
        tools.send_message,
        tools.list_sessions,
        tools.read_session,
        tools.schedule_add,
        tools.schedule_list,
        tools.schedule_cancel,
        tools.tasks_list,
    ):
        server.add_tool(fn, annotations=_ANNOTATIONS[fn.__name__])
    return server
