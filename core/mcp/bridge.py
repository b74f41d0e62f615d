"""McpTaskBridge: MCP tools that run as tasks become background ``mcp-task`` records.

A tool whose ``execution.taskSupport`` is ``required`` (or ``optional``, where the
server's ``tasks = "optional"``) is called task-augmented: the server answers with a
task at once, which becomes a TaskRegistry record (agent type ``mcp-task``, the
arguments as its prompt) and the model hears "started in background". A poller then
follows the task (``tasks/get`` at the server's ``pollInterval``; progress
notifications and status messages become the record's progress), fetches the result
(``tasks/result``), and hands it to the parent session like a background subagent's
(deduplicated by the task id: a restart in between hands it over once). A record
cancelled by ``familiar tasks cancel`` or ``subagents cancel`` is cancelled on the
server (``tasks/cancel``) by the process that polls it.

Pollers hold a lease on their task (``mcp_tasks.lease_until``): a stopping process gives
its leases back, and every process takes over running tasks whose lease ran out, so a
restart resumes polling. A server that no longer knows the task ends it as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types

from core.background import BackgroundTask
from core.bus.owner import make_owner
from core.bus.sql import SqlBus
from core.errors import McpRefused, ToolFailed
from core.events import EventLog
from core.messages import Delivery
from core.store.engine import Store
from core.tasks.collector import SUBAGENT_CHANNEL
from core.tasks.outside import OutsideTaskEnd
from core.tasks.records import MCP_TASK, TaskRecord, outside_task_values, started_event
from core.tools.base import ToolContext

from .connection import McpConnection
from .host import CallOwner
from .task_store import McpTaskInfo, McpTaskStore
from .tools import McpTool, render_result

__all__ = ["McpTaskBridge"]

log = logging.getLogger(__name__)

LEASE = 90.0
"""Seconds a poller's claim on a task lasts unless renewed (each poll renews it)."""
CLAIM_INTERVAL = 10.0
"""Seconds between looks for running tasks nobody polls."""
_DEFAULT_POLL = 1.0
_MIN_POLL, _MAX_POLL = 0.05, 30.0
_TTL_MS = 86_400_000
"""How long we ask servers to keep a task (a day)."""
_RESULT_TIMEOUT = 86_400.0
"""``tasks/result`` waits until the task ends (an answer to a question may take long)."""
_TERMINAL = ("completed", "failed", "cancelled")
_TOKEN_PREFIX = "familiar-task-"
"""Starts the progress tokens of task calls (a plain call's token is its request id)."""
_LOST = ("lost", "")
"""How `_preflight` says another process polls the task now."""


@dataclass
class _Following:
    """What one poller carries between its polls."""

    fetch: asyncio.Future[mcp_types.CallToolResult] | None = None
    """``tasks/result`` in flight (asked while the server waits for an answer)."""
    failures: int = 0


class McpTaskBridge:
    """Starts, follows, hands over and cancels MCP tasks.

    Args:
        store: the open store.
        bus: where handoffs are published.
        events: the session event log.
        connections: the connection of a server by name (None: not configured).
        max_output: characters of a result kept (``mcp.max_output``).
        result_max_chars: characters of a result in a handoff
            (``tools.subagents.result_max_chars``).
        clock: unix "now".
        lease: seconds a poller's claim lasts.
        claim_interval: seconds between looks for tasks nobody polls.
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        connections: Callable[[str], McpConnection | None],
        max_output: int,
        result_max_chars: int,
        clock: Callable[[], float] = time.time,
        lease: float = LEASE,
        claim_interval: float = CLAIM_INTERVAL,
    ) -> None:
        self.tasks = McpTaskStore(store=store, events=events, clock=clock)
        self._end = OutsideTaskEnd(
            store=store, bus=bus, events=events, result_max_chars=result_max_chars, clock=clock
        )
        self._connections = connections
        self._max_output = max_output
        self._clock = clock
        self._lease = lease
        self._claim_interval = claim_interval
        self._owner = make_owner()
        self._pollers: dict[str, asyncio.Task[tuple[str, str] | None]] = {}
        self._claimer = BackgroundTask("familiar-mcp-tasks")

    # -- starting ------------------------------------------------------------------------

    async def call_as_task(self, ctx: ToolContext, tool: McpTool, arguments: dict[str, Any]) -> str:
        """Call ``tool`` task-augmented and record the task; in a root session return at
        once (the result comes as a handoff), in a subagent wait for the result."""
        server = tool.connection.name
        spawn_key = _spawn_key(ctx, server, tool.remote_name, arguments)
        if spawn_key is not None and (found := await self.tasks.by_spawn_key(spawn_key)):
            return self._started(found, new=False)  # a rerun of the same call after a crash
        token = f"{_TOKEN_PREFIX}{uuid.uuid4().hex}"
        raw = await tool.connection.request(
            "tools/call",
            {
                "name": tool.remote_name,
                "arguments": arguments,
                "task": {"ttl": _TTL_MS},
                "_meta": {"progressToken": token},
            },
            what=tool.remote_name,
        )
        if "task" not in raw:  # the server ran it at once after all
            result = mcp_types.CallToolResult.model_validate(raw, by_name=False)
            text = tool.render(result)
            if result.is_error:
                raise ToolFailed(text or f"{tool.name} failed")
            return text
        created = mcp_types.CreateTaskResult.model_validate(raw, by_name=False).task
        record = await self._record(ctx, tool, arguments, created, token, spawn_key)
        if record.mode == "background":
            self._poll(record.id)
            return self._started(record, new=True)
        async with ctx.capacity.released():
            outcome = await self._follow(record.id)
        status, text = outcome or ("failed", "the task was taken over by another process")
        if status != "completed":
            raise ToolFailed(f"MCP task {record.id} ({tool.name}) {status}: {text}")
        return text

    async def _record(
        self,
        ctx: ToolContext,
        tool: McpTool,
        arguments: dict[str, Any],
        created: mcp_types.Task,
        token: str,
        spawn_key: str | None,
    ) -> TaskRecord:
        now = self._clock()
        task_id = uuid.uuid4().hex[:12]
        # Inside a subagent the call is awaited: a child answers with one result.
        mode = "sync" if ctx.depth > 0 else "background"
        parent = ctx.message
        delivery = parent.delivery if parent is not None else Delivery(channel=SUBAGENT_CHANNEL)
        what = f"{tool.connection.name}/{tool.remote_name}"
        values = outside_task_values(
            task_id=task_id,
            owner_key=ctx.session_key,
            child_key=f"{MCP_TASK}:{task_id}",
            spawn_key=spawn_key,
            agent_type=MCP_TASK,
            description=what,
            prompt=json.dumps(arguments, ensure_ascii=False, sort_keys=True),
            mode=mode,
            depth=ctx.depth + 1,
            delivery=delivery.model_dump_json(),
            now=now,
        )
        values["last_intent"] = (created.status_message or created.status)[:256]
        row = {
            "id": task_id,
            "server": tool.connection.name,
            "tool": tool.remote_name,
            "remote_id": created.task_id,
            "remote_status": created.status,
            "status_message": created.status_message,
            "poll_ms": created.poll_interval,
            "progress_token": token,
            "root_key": ctx.root_session_key,
            "lease_owner": self._owner,
            "lease_until": now + self._lease,
            "created_at": now,
        }
        event = started_event(
            ctx.session_key,
            parent.id if parent is not None else None,
            agent_id=task_id,
            agent_type=MCP_TASK,
            mode=mode,
            depth=ctx.depth + 1,
            description=what,
        )
        record, _new = await self.tasks.create(values, row, [event])
        log.info(
            "mcp task started agent_id=%s server=%s tool=%s remote=%s mode=%s owner=%s",
            record.id,
            tool.connection.name,
            tool.remote_name,
            created.task_id,
            mode,
            ctx.session_key,
        )
        return record

    @staticmethod
    def _started(record: TaskRecord, *, new: bool) -> str:
        return json.dumps(
            {
                "agent_id": record.id,
                "agent_type": MCP_TASK,
                "status": record.status,
                "note": f"{'started' if new else 'already started'} in background as task "
                f"{record.id}: its result comes as a handoff message; "
                "subagents(action='read') shows its progress, subagents(action='cancel') "
                "stops it",
            }
        )

    # -- the pollers ---------------------------------------------------------------------

    async def start(self) -> None:
        """Take over the running tasks nobody polls now, and keep looking."""
        await self._claim()
        self._claimer.start(self._claim_loop)

    async def stop(self) -> None:
        """Stop polling and give the leases back (the next start resumes at once)."""
        await self._claimer.stop()
        pollers, self._pollers = self._pollers, {}
        for poller in pollers.values():
            poller.cancel()
        for poller in pollers.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await poller
        with contextlib.suppress(Exception):
            await self.tasks.release(self._owner, list(pollers))

    async def _claim_loop(self) -> None:
        while True:
            await asyncio.sleep(self._claim_interval)
            await self._claim()

    async def _claim(self) -> None:
        try:
            taken = await self.tasks.claim(self._owner, lease=self._lease)
        except Exception:
            log.exception("looking for MCP tasks to poll failed; trying again later")
            return
        for task_id in taken:
            log.info("mcp task resumed agent_id=%s", task_id)
            self._poll(task_id)

    def _poll(self, task_id: str) -> None:
        if task_id not in self._pollers:
            poller = asyncio.create_task(self._follow(task_id), name=f"mcp-task:{task_id}")
            self._pollers[task_id] = poller
            poller.add_done_callback(lambda _: self._pollers.pop(task_id, None))

    async def _follow(self, task_id: str) -> tuple[str, str] | None:
        """Poll the task until it ends; its final status and text (None: another process
        polls it now)."""
        state = _Following()
        try:
            while True:
                info = await self.tasks.get(task_id)
                if info is None:
                    return None
                checked = await self._preflight(info)
                if isinstance(checked, tuple):
                    return None if checked is _LOST else checked
                ended, pause = await self._poll_once(checked, info, state)
                if ended is not None:
                    return ended
                await asyncio.sleep(pause)
        finally:
            if state.fetch is not None and not state.fetch.done():
                state.fetch.cancel()

    async def _preflight(self, info: McpTaskInfo) -> tuple[str, str] | McpConnection:
        """The connection to poll on, or how the task ended on our side (cancelled,
        finished, polled by another process: `_LOST`, its server gone)."""
        record = info.record
        if record.status == "cancelled":
            await self._cancel_remote(info)
            return "cancelled", record.error or "cancelled"
        if not record.active:
            return record.status, record.result or record.error or ""
        if not await self.tasks.renew(record.id, self._owner, lease=self._lease):
            return _LOST
        connection = self._connections(info.server)
        if connection is None:
            why = f"MCP server {info.server!r} is no longer configured"
            return await self._finish(info, "failed", why)
        if not connection.started:
            connection.start()
        return connection

    async def _poll_once(
        self, connection: McpConnection, info: McpTaskInfo, state: _Following
    ) -> tuple[tuple[str, str] | None, float]:
        """One ``tasks/get`` and what follows from it: the end, or how long to wait."""
        fetch = state.fetch
        if fetch is not None and fetch.done():
            state.fetch = None
            try:
                return await self._finish_with(info, fetch.result()), 0
            except ToolFailed as exc:
                log.warning("mcp task %s: tasks/result failed: %s", info.record.id, exc)
        try:
            task = await self._get(connection, info)
            state.failures = 0
        except McpRefused as exc:
            why = f"the MCP server no longer knows task {info.remote_id}: {exc}"
            return await self._finish(info, "failed", why), 0
        except ToolFailed as exc:
            state.failures += 1
            log.warning("mcp task %s: polling failed (%s); retrying", info.record.id, exc)
            return None, min(_MAX_POLL, 0.5 * 2**state.failures)
        if task.status == "completed":
            result = await (state.fetch or self._result(connection, info))
            state.fetch = None
            return await self._finish_with(info, result), 0
        if task.status in _TERMINAL:
            text = task.status_message or f"the server reports the task {task.status}"
            return await self._finish(info, task.status, text), 0
        if task.status == "input_required" and state.fetch is None:
            # The server asks its question through the tasks/result stream.
            state.fetch = asyncio.ensure_future(self._result(connection, info))
        seconds = (task.poll_interval or info.poll_ms or _DEFAULT_POLL * 1000) / 1000
        return None, min(_MAX_POLL, max(_MIN_POLL, seconds))

    async def _get(self, connection: McpConnection, info: McpTaskInfo) -> mcp_types.GetTaskResult:
        raw = await connection.request(
            "tasks/get", {"taskId": info.remote_id}, what=f"tasks/get of {info.tool}"
        )
        task = mcp_types.GetTaskResult.model_validate(raw, by_name=False)
        if task.status != info.remote_status or task.status_message != info.status_message:
            await self.tasks.note(
                info.record.id,
                remote_status=task.status,
                message=task.status_message,
                poll_ms=task.poll_interval,
            )
        return task

    async def _result(
        self, connection: McpConnection, info: McpTaskInfo
    ) -> mcp_types.CallToolResult:
        raw = await connection.request(
            "tasks/result",
            {"taskId": info.remote_id},
            what=f"tasks/result of {info.tool}",
            timeout=_RESULT_TIMEOUT,
        )
        return mcp_types.CallToolResult.model_validate(raw, by_name=False)

    async def _finish_with(
        self, info: McpTaskInfo, result: mcp_types.CallToolResult
    ) -> tuple[str, str]:
        text = render_result(result, limit=self._max_output)
        status = "failed" if result.is_error else "completed"
        return await self._finish(info, status, text or f"{info.tool} {status}")

    async def _finish(self, info: McpTaskInfo, status: str, text: str) -> tuple[str, str]:
        record = info.record
        if await self._end.end(record, status, text, handoff_id=f"{MCP_TASK}:{record.id}"):
            log.info("mcp task %s agent_id=%s server=%s", status, record.id, info.server)
        return status, text

    async def _cancel_remote(self, info: McpTaskInfo) -> None:
        connection = self._connections(info.server)
        if connection is None or info.remote_status in _TERMINAL:
            return
        if not connection.started:
            connection.start()
        try:
            await connection.request(
                "tasks/cancel", {"taskId": info.remote_id}, what=f"tasks/cancel of {info.tool}"
            )
        except ToolFailed as exc:
            log.warning("mcp task %s: tasks/cancel failed: %s", info.record.id, exc)
        else:
            log.info("mcp task cancelled on its server agent_id=%s", info.record.id)
        await self.tasks.note(info.record.id, remote_status="cancelled")

    # -- for the host: whose task, its progress ------------------------------------------

    async def owner_of(self, server: str, remote_id: str) -> tuple[CallOwner, str] | None:
        """The conversation a server's task belongs to, and our task id."""
        info = await self.tasks.by_remote(server, remote_id)
        if info is None:
            return None
        record = info.record
        delivery = Delivery.model_validate_json(record.delivery) if record.depth == 1 else None
        owner = CallOwner(session_key=record.owner_key, root_key=info.root_key, delivery=delivery)
        return owner, record.id

    async def progress(self, server: str, notification: mcp_types.ProgressNotification) -> None:
        """A task's progress notification: the record's progress (``last_intent``)."""
        params = notification.params
        token = params.progress_token
        if not (isinstance(token, str) and token.startswith(_TOKEN_PREFIX)):
            return  # a plain call's, taken by its own callback: no store read
        info = await self.tasks.by_token(token)
        if info is None or info.server != server:
            return
        count = f"{params.progress:g}/{params.total:g}" if params.total else f"{params.progress:g}"
        text = f"{params.message} ({count})" if params.message else count
        await self.tasks.note(info.record.id, message=text)


def _spawn_key(ctx: ToolContext, server: str, tool: str, arguments: dict[str, Any]) -> str | None:
    if ctx.message is None:
        return None
    digest = hashlib.sha256(
        json.dumps([server, tool, arguments], sort_keys=True, default=str).encode()
    ).hexdigest()[:24]
    return f"mcp:{ctx.message.id}:{digest}"
