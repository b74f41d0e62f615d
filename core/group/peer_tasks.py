"""The peer's side of delegation: take the tasks other members send, run, answer.

A task for this member is taken from ``group_tasks`` (woken by the group NOTIFY, or
found by the next poll). A caller ``accept_from`` does not name is refused, with a
reason the caller hands back; a caller with ``max_running_per_caller`` tasks running
here waits, its further tasks left queued while other callers' are taken. Any other
becomes an ordinary inbound message on this assistant's own bus, in the session
``group:<caller>:<id>`` on the ``group`` channel: the operator's rules for that channel
(``tools.policy.per_channel.group``) bind it, and every subagent it starts, like any
channel's message; nobody can approve a command there. Its final reply lands in the
outbox of the ``group`` channel, which this service delivers: the answer is written to
the task (``done``, or ``failed`` for an error reply) before the reply is marked
delivered, so a crash in between writes it again (a no-op). While tasks run, their
leases are renewed every heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Collection

from sqlalchemy import Connection

from core.bus.sql import SqlBus
from core.event_data import SessionError
from core.events import Event, EventLog
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.store.engine import Store

from .roster import Roster
from .task_rows import GroupTask, GroupTasks

__all__ = [
    "GROUP_CHANNEL",
    "GROUP_SESSION_PREFIX",
    "MAX_ANSWER_CHARS",
    "MAX_PROMPT_CHARS",
    "PeerTaskService",
    "clip_answer",
    "group_session_key",
]

log = logging.getLogger(__name__)

GROUP_CHANNEL = "group"
"""The channel of delegated tasks: its outbox is delivered by this service."""
GROUP_SESSION_PREFIX = "group:"
_POLL = 1.0
"""Seconds between looks for tasks a lost NOTIFY did not announce."""
_PRUNE_EVERY = 3600.0
"""Seconds between deletions of this member's old ended tasks."""
_TASK_ID = re.compile(r"[0-9a-f]{8,32}")
MAX_PROMPT_CHARS = 100_000
"""The longest prompt a peer runs (a caller checks it too)."""
MAX_ANSWER_CHARS = 100_000
"""The most of an answer (or error) a peer writes back, and a caller reads: the rest is
cut, with a note saying how much (the caller's model sees at most
``tools.subagents.result_max_chars`` of it anyway)."""


def clip_answer(text: str) -> str:
    """``text`` within `MAX_ANSWER_CHARS`, with a note saying how much was cut."""
    if len(text) <= MAX_ANSWER_CHARS:
        return text
    return f"{text[:MAX_ANSWER_CHARS]}\n[... {len(text) - MAX_ANSWER_CHARS} more characters cut]"


def group_session_key(caller: str, task_id: str) -> str:
    """The session a delegated task runs in on the peer: ``group:<caller>:<id>``."""
    return f"{GROUP_SESSION_PREFIX}{caller}:{task_id}"


def _message_id(task_id: str) -> str:
    return f"group-{task_id}"


def _task_id(session_key: str) -> str:
    return session_key.rpartition(":")[2]


class PeerTaskService:
    """Takes this member's delegated tasks onto its bus and writes their answers back.

    Args:
        store: this assistant's store (the group tables are in the same database).
        bus: this assistant's bus.
        events: this assistant's event log.
        tasks: the group's task rows.
        roster: the group's roster (tasks are taken only while it shows this member's
            name as this assistant's: same ``store.schema``).
        name: this member's name.
        accept_from: the members whose tasks run here (``group.accept_from``).
        max_running_per_caller: the most tasks of one caller running here at once
            (``group.max_running_per_caller``).
        lease: seconds a task's lease lasts without renewal (``group.expire_after``).
        renew_every: seconds between renewals (``group.heartbeat``).
        retention_days: ended tasks sent here or from here are deleted after that many
            days (``group.retention_days``).
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        tasks: GroupTasks,
        roster: Roster,
        name: str,
        accept_from: Collection[str],
        max_running_per_caller: int,
        lease: float,
        renew_every: float,
        retention_days: float,
        poll: float = _POLL,
    ) -> None:
        self._store = store
        self._bus = bus
        self._events = events
        self._tasks = tasks
        self._roster = roster
        self._name_ours: bool | None = None
        self.name = name
        self._accept = frozenset(accept_from)
        self._max_running = max_running_per_caller
        self._lease = lease
        self._renew_every = renew_every
        self._retention_days = retention_days
        self._pruned = -_PRUNE_EVERY
        self._poll = poll
        self._woken = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []

    def poke(self) -> None:
        """A task for this member may be waiting (the group NOTIFY)."""
        self._woken.set()

    async def start(self) -> None:
        if self._workers:
            return
        loops: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("familiar-group-intake", self._intake),
            ("familiar-group-answers", self._collect),
            ("familiar-group-leases", self._renew),
        ]
        for name, loop in loops:
            self._workers.append(asyncio.create_task(_forever(name, loop), name=name))

    async def stop(self) -> None:
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.cancel()
        for worker in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    # -- taking tasks ----------------------------------------------------------------------

    async def _intake(self) -> None:
        self._woken.clear()
        await self.take_queued()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), self._poll)

    async def take_queued(self) -> int:
        """Take (or refuse) the tasks queued for this member; how many.

        None is taken while the roster does not show the name as this assistant's
        (another assistant holds it, or this one has not announced itself yet): a task
        sent to another assistant of the same name is never run here. Nor is one of a
        caller already running ``max_running_per_caller`` tasks here: it stays queued."""
        running = await self._tasks.running_by_caller(self.name)
        queued = await self._tasks.queued_for(self.name, skip_callers=self._full(running))
        if not queued:
            return 0
        member = await self._roster.member(self.name)
        ours = member is not None and member.store_schema == self._store.schema
        if not ours:
            if self._name_ours is not False:
                log.warning(
                    "group tasks for %s left queued: the roster shows that name as another "
                    "assistant's (store.schema %s), or not yet announced",
                    self.name,
                    member.store_schema if member is not None else "-",
                )
            self._name_ours = False
            return 0
        self._name_ours = True
        handled = 0
        while queued:
            waiting = False
            for task in queued:
                if running.get(task.caller, 0) >= self._max_running and task.caller in self._accept:
                    waiting = True  # until one of that caller's running tasks ends
                    continue
                if await self.take(task):
                    running[task.caller] = running.get(task.caller, 0) + 1
                handled += 1
            # A caller that filled up during this look may hide others' tasks past it.
            more = await self._tasks.queued_for(self.name, skip_callers=self._full(running))
            queued = more if waiting else []
        return handled

    def _full(self, running: dict[str, int]) -> set[str]:
        return {caller for caller, count in running.items() if count >= self._max_running}

    async def take(self, task: GroupTask) -> bool:
        """Refuse the task, or put it on the bus and mark it running (publish first: a
        crash in between publishes again, and the bus drops the repeat); whether it
        runs now."""
        session = group_session_key(task.caller, task.id)
        why = self._refusal(task)
        if why is not None:
            refused = {"status": "refused", "error": why}
            if await self._tasks.change(task, refused, when=("queued",), by=self.name):
                await self._note(session, SessionError(error=why, kind="GroupTaskRefused"))
                log.info("group task refused id=%s from=%s", task.id, task.caller)
            return False
        await self._bus.publish_inbound(
            InboundMessage(
                id=_message_id(task.id),
                session_key=session,
                text=task.prompt,
                delivery=Delivery(channel=GROUP_CHANNEL, chat_id=task.id),
                sender=f"peer:{task.caller}",
                origin="user",
                event_id=f"group:{task.id}",
            )
        )
        running = {"status": "running"}
        if not await self._tasks.change(
            task, running, when=("queued",), by=self.name, lease=self._lease
        ):
            return False
        log.info("group task taken id=%s from=%s mode=%s", task.id, task.caller, task.mode)
        return True

    def _refusal(self, task: GroupTask) -> str | None:
        """Why this member does not run ``task`` (checked here, whatever the caller
        checked: the caller is another program)."""
        if not _TASK_ID.fullmatch(task.id):
            return f"{task.id!r} is not a task id: not run"
        if task.caller not in self._accept:
            return (
                f"{self.name} does not run tasks from {task.caller} "
                f"(its group.accept_from does not name {task.caller})"
            )
        prompt = task.prompt.strip()
        if not prompt or prompt.startswith("/"):
            return "the prompt is empty or starts with '/' (a slash command): not run"
        if len(prompt) > MAX_PROMPT_CHARS:
            return f"the prompt is longer than {MAX_PROMPT_CHARS} characters: not run"
        return None

    async def _note(self, session: str, data: SessionError) -> None:
        def job(conn: Connection) -> None:
            self._events.add_in(conn, [Event(session_key=session, data=data)])

        await self._store.transact(job)

    # -- answers ---------------------------------------------------------------------------

    async def _collect(self) -> None:
        for due in await self._bus.due_outbound(GROUP_CHANNEL, limit=100):
            await self.settle(due.message)
            await self._bus.mark_delivered(due.message.id)
        await self._bus.wait_outbound(GROUP_CHANNEL, 1.0)

    async def settle(self, reply: OutboundMessage) -> None:
        """Write a task's answer (idempotent: only a running task changes)."""
        task_id = _task_id(reply.session_key)
        if reply.inbound_id != _message_id(task_id):
            return  # a control command's answer in that session
        task = await self._tasks.get(task_id)
        if task is None or task.peer != self.name:
            return
        text = clip_answer(reply.text)
        if reply.kind == "error":
            values = {"status": "failed", "error": text, "result": None}
        else:
            values = {"status": "done", "result": text, "error": None}
        if await self._tasks.change(task, values, when=("running",), by=self.name):
            status = values["status"]
            log.info("group task answered id=%s from=%s status=%s", task.id, task.caller, status)

    # -- leases ----------------------------------------------------------------------------

    async def _renew(self) -> None:
        await self._tasks.renew(self.name, self._lease)
        now = asyncio.get_running_loop().time()
        if now - self._pruned >= _PRUNE_EVERY:
            self._pruned = now
            await self._tasks.prune(self.name, self._retention_days)
        await asyncio.sleep(self._renew_every)


async def _forever(name: str, step: Callable[[], Awaitable[None]]) -> None:
    while True:
        try:
            await step()
        except Exception:
            log.exception("%s failed; retrying", name)
            await asyncio.sleep(1.0)
