"""The TaskRegistry: starts subagents, waits for them, messages and cancels them.

A subagent's turns are ordinary inbound messages on the durable bus in its own session
``subagent:<id>`` (channel ``subagent``), answered by the same agent runtime as every
other session. The child's final replies are "delivered" by the registry itself: it
takes them from the outbox of the ``subagent`` channel, records the result, and (for
background work) publishes the handoff into the parent's session, deduplicated by the
child message it answers, before marking the reply delivered. So a child interrupted by
``kill -9`` is answered after restart like any message, and its parent gets exactly one
result.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from core.bus.sql import SqlBus
from core.errors import TaskNotFound, TaskRefused
from core.event_data import SubagentFailed
from core.events import Event, EventLog
from core.messages import Delivery, InboundMessage
from core.sessions import SessionStore
from core.store.engine import Store
from core.tasks.catalog import AgentCatalog
from core.tasks.collector import SUBAGENT_CHANNEL, AnswerCollector, status_of
from core.tasks.handoff import clip, handoff_fields
from core.tasks.profiles import (
    SUBAGENT_PREFIX,
    SubagentLifecycle,
    SubagentProfiles,
    SubagentStartContext,
)
from core.tasks.records import TaskRecord, no_messages, runs_elsewhere, started_event
from core.tasks.repository import TaskRepository
from core.tasks.spawn_keys import SpawnKeys
from core.tasks.spawn_model import spawn_model
from core.tools.base import NO_CAPACITY_HANDOVER, Capacity
from core.tools.subagents_config import SubagentsConfig

__all__ = [
    "SUBAGENT_CHANNEL",
    "SUBAGENT_PREFIX",
    "SpawnRequest",
    "SubagentStartContext",
    "TaskRegistry",
    "WaitOutcome",
]

log = logging.getLogger(__name__)

_SNAPSHOT_CHARS = 600


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnRequest:
    """What ``sessions_spawn`` asks for, and who asks."""

    owner_key: str
    owner_depth: int
    agent_type: str
    prompt: str
    description: str = ""
    name: str | None = None
    mode: str = "sync"
    model: str | None = None
    parent: InboundMessage | None = None
    """The message the parent answers (where a handoff goes; a rerun finds the same child)."""
    handoff: bool = True
    """False: a background answer is only recorded (the parent collects it), never handed off."""


@dataclass(frozen=True, slots=True)
class WaitOutcome:
    """How waiting for a subagent ended: its record and, unless timed out, the answer."""

    task: TaskRecord
    status: str
    result: str | None
    timed_out: bool = False

    def as_json(self, limit: int) -> dict[str, Any]:
        if self.timed_out:
            return {
                "agent_id": self.task.id,
                "agent_type": self.task.agent_type,
                "status": "running",
                "result": None,
                "note": "still running: its result will come as a handoff; "
                "subagents(action='read') shows progress",
            }
        return handoff_fields(self.task, status=self.status, result=self.result or "", limit=limit)


def _now() -> float:
    return time.time()


class TaskRegistry:
    """Subagent records and operations; also the TurnProfiles of ``subagent:`` sessions."""

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        sessions: SessionStore,
        catalog: AgentCatalog,
        config: SubagentsConfig,
        clock: Callable[[], float] = _now,
    ) -> None:
        self.repo = TaskRepository(store=store)
        self.catalog = catalog
        self.config = config
        self._store = store
        self._bus = bus
        self._events = events
        self._sessions = sessions
        self._clock = clock
        self._spawn_keys = SpawnKeys()
        self.profiles = SubagentProfiles(repo=self.repo, catalog=catalog)
        """The `TurnProfiles` of child sessions (for `TurnServices.profiles`)."""
        self._collector = AnswerCollector(
            store=store, bus=bus, events=events, repo=self.repo, config=config, clock=clock
        )

    def add_start_context(self, provider: SubagentStartContext) -> None:
        """Register a source of extra prompt context for starting subagents: the
        ``subagentStart`` hook's ``additionalContext`` goes into the child's prompt."""
        self.profiles.add_start_context(provider)

    def add_lifecycle(self, hooks: SubagentLifecycle) -> None:
        """Register ``subagentStart`` context and ``subagentStop`` notice (the hooks)."""
        self.profiles.add_start_context(hooks)
        self._collector.add_stop_listener(hooks)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start taking the children's answers from the outbox."""
        await self._collector.start()

    async def stop(self) -> None:
        """Stop collecting. Running children stay on the bus, claimable by the next run."""
        await self._collector.stop()

    # -- starting --------------------------------------------------------------------------

    async def spawn(self, request: SpawnRequest) -> tuple[TaskRecord, bool]:
        """Start a subagent (or find the one a rerun of the same parent call started).

        Returns:
            The record and whether it is new.

        Raises:
            TaskRefused: an unknown agent type (listing the valid ones), a bad prompt or
                mode, or the depth or concurrency cap reached.
        """
        agents = await self.catalog.agents()
        spec = agents.get(request.agent_type)
        if spec is None:
            raise TaskRefused(
                f"unknown agent_type {request.agent_type!r}; valid ones: "
                + ", ".join(sorted(agents))
            )
        prompt = request.prompt.strip()
        if not prompt:
            raise TaskRefused("the prompt is empty: say what the subagent should do")
        if prompt.startswith("/"):
            raise TaskRefused("a prompt may not start with '/' (it would be a slash command)")
        if request.mode not in ("sync", "background"):
            raise TaskRefused(f"mode must be 'sync' or 'background', not {request.mode!r}")
        depth = request.owner_depth + 1
        if depth > self.config.max_depth:
            raise TaskRefused(
                f"subagents may nest at most {self.config.max_depth} levels "
                "(tools.subagents.max_depth): do this work yourself"
            )
        # Inside a subagent, background becomes sync: a child answers with one result.
        mode = "sync" if request.owner_depth > 0 else request.mode
        memory_mode = spec.memory_share_mode or self.config.memory_share_mode
        spawn_key = self._spawn_key(request)
        task_id = uuid.uuid4().hex[:12]
        message_id = uuid.uuid4().hex
        description = request.description.strip()[:2000]
        snapshot = None
        if memory_mode == "inherit-readonly":
            snapshot = await self._snapshot(request.owner_key)
        now = self._clock()
        delivery = request.parent.delivery if request.parent is not None else None
        values = {
            "id": task_id,
            "owner_key": request.owner_key,
            "child_key": f"{SUBAGENT_PREFIX}{task_id}",
            "spawn_key": spawn_key,
            "agent_type": spec.name,
            "name": request.name,
            "description": description,
            "prompt": prompt,
            "model": await spawn_model(
                request.model,
                spec,
                owner_key=request.owner_key,
                aliases=self.catalog.models,
                repo=self.repo,
            ),
            "mode": mode,
            "multi_turn": request.name is not None,
            "memory_mode": memory_mode,
            "status": "running",
            "turns": 0,
            "tool_calls": 0,
            "depth": depth,
            "delivery": (delivery or Delivery(channel=SUBAGENT_CHANNEL)).model_dump_json(),
            "snapshot": snapshot,
            "message_id": message_id,
            "handoff": request.handoff and mode == "background" and memory_mode != "isolated",
            "created_at": now,
            "updated_at": now,
        }
        parent_id = request.parent.id if request.parent is not None else None
        started = started_event(
            request.owner_key,
            parent_id,
            agent_id=task_id,
            agent_type=spec.name,
            mode=mode,
            depth=depth,
            description=description or None,
            memory_share_mode=memory_mode,
        )

        def job(conn: Connection) -> tuple[TaskRecord, bool]:
            if spawn_key is not None:
                found = self.repo.by_spawn_key_in(conn, spawn_key)
                if found is not None:
                    return found, False
            if self.repo.running_in(conn) >= self.config.max_concurrent:
                raise TaskRefused(
                    f"{self.config.max_concurrent} subagents are running already "
                    "(tools.subagents.max_concurrent): wait for one, or do it yourself"
                )
            self.repo.insert_in(conn, values)
            self._events.add_in(conn, [started])
            record = self.repo.get_in(conn, task_id)
            assert record is not None
            return record, True

        record, new = await self._store.transact(job)
        if record.active and record.message_id is not None:
            # Also on a rerun: a crash may have come between the row and the publish.
            await self._publish_work(record, record.prompt if new else None)
        log.info(
            "subagent %s agent_id=%s type=%s mode=%s memory=%s depth=%d owner=%s",
            "started" if new else "found again",
            record.id,
            record.agent_type,
            record.mode,
            record.memory_mode,
            record.depth,
            record.owner_key,
        )
        return record, new

    def _spawn_key(self, request: SpawnRequest) -> str | None:
        if request.parent is None:
            return None
        call = [request.agent_type, request.prompt, request.name, request.mode, request.model]
        return self._spawn_keys.key(request.parent.id, call)

    async def _publish_work(self, task: TaskRecord, text: str | None) -> None:
        """Publish the child's current work message (a duplicate publish is dropped)."""
        assert task.message_id is not None
        if text is None:  # a rerun: the text is the prompt or the last message sent
            status = await self._bus.wait_reply(task.message_id, timeout=0)
            if status is not None:
                return
            text = task.prompt if task.turns == 0 else None
            if text is None:
                return  # a sent message: it was published before its row changed
        await self._bus.publish_inbound(
            InboundMessage(
                id=task.message_id,
                session_key=task.child_key,
                text=text,
                delivery=Delivery(channel=SUBAGENT_CHANNEL, chat_id=task.id),
                sender=task.owner_key,
                origin="subagent",
                event_id=f"work:{task.message_id}",
            )
        )

    async def _snapshot(self, owner_key: str) -> str | None:
        turns = self.config.inherit_turns
        if turns <= 0:
            return None
        stored = await self._sessions.all_history(owner_key, limit=max(50, turns * 8))
        users = [i for i, m in enumerate(stored) if m.role == "user"]
        start = users[-turns] if len(users) >= turns else 0
        lines = []
        for message in stored[start:]:
            if message.role not in ("user", "assistant") or not message.content.strip():
                continue
            text = " ".join(message.content.split())
            lines.append(f"{message.role}: {clip(text, _SNAPSHOT_CHARS)}")
        return "\n".join(lines) or None

    # -- waiting, messaging ------------------------------------------------------------------

    async def wait(
        self,
        task: TaskRecord,
        *,
        timeout: float | None = None,
        capacity: Capacity = NO_CAPACITY_HANDOVER,
    ) -> WaitOutcome:
        """Wait for the answer to the task's current message, the turn's slot given back.

        On timeout the agent keeps running and its answer becomes a handoff.
        """
        assert task.message_id is not None
        limit = self.config.sync_timeout if timeout is None else timeout
        async with capacity.released():
            reply = await self._bus.wait_reply(task.message_id, limit)
        if reply is not None:
            await self._collector.settle(reply)  # the record is current when the parent reads
        current = await self.repo.get(task.id) or task
        if current.status == "cancelled":
            return WaitOutcome(current, "cancelled", current.error or "cancelled")
        if reply is not None:
            return WaitOutcome(current, status_of(current, reply), reply.text)
        # Timed out: the answer becomes a handoff, unless it was recorded meanwhile.
        late = current.memory_mode != "isolated" and await self._store.transact(
            lambda conn: self.repo.update_in(
                conn,
                task.id,
                {"handoff": True},
                when={"message_id": task.message_id, "status": "running"},
            )
        )
        if late or current.status == "running":
            return WaitOutcome(current, "running", None, timed_out=True)
        current = await self.repo.get(task.id) or current
        return WaitOutcome(current, current.status, current.result)

    async def send(self, owner_key: str, ref: str, text: str, *, wait: bool) -> TaskRecord:
        """Give an idle (or running) agent of ``owner_key`` another message.

        Raises:
            TaskNotFound: no such agent of this session.
            TaskRefused: it has finished or was cancelled, the text is empty, or the
                concurrency cap is reached.
        """
        task = await self.owned(owner_key, ref)
        if runs_elsewhere(task.agent_type):
            raise TaskRefused(no_messages(task.id, task.agent_type, task.description))
        body = text.strip()
        if not body:
            raise TaskRefused("the message is empty")
        if body.startswith("/"):
            raise TaskRefused("a message may not start with '/' (it would be a slash command)")
        if not task.active:
            raise TaskRefused(
                f"agent {task.id} is {task.status}: only running or idle agents take messages "
                "(start one with a name to keep it for more turns)"
            )
        message_id = uuid.uuid4().hex
        handoff = not wait and task.memory_mode != "isolated"
        # Publish first: the row then points at a message that exists.
        await self._bus.publish_inbound(
            InboundMessage(
                id=message_id,
                session_key=task.child_key,
                text=body,
                delivery=Delivery(channel=SUBAGENT_CHANNEL, chat_id=task.id),
                sender=owner_key,
                origin="subagent",
                event_id=f"work:{message_id}",
            )
        )

        def job(conn: Connection) -> TaskRecord:
            if task.status == "idle" and self.repo.running_in(conn) >= self.config.max_concurrent:
                raise TaskRefused(
                    f"{self.config.max_concurrent} subagents are running already "
                    "(tools.subagents.max_concurrent)"
                )
            values = {
                "message_id": message_id,
                "status": "running",
                "handoff": handoff,
                "updated_at": self._clock(),
                "finished_at": None,
            }
            if not self.repo.update_in(conn, task.id, values, when={"status": task.status}):
                raise TaskRefused(f"agent {task.id} changed meanwhile; read it and try again")
            found = self.repo.get_in(conn, task.id)
            assert found is not None
            return found

        return await self._store.transact(job)

    async def owned(self, owner_key: str, ref: str) -> TaskRecord:
        """The agent ``ref`` (id or name) started by ``owner_key``.

        Raises:
            TaskNotFound: there is none.
        """
        task = await self.repo.find(ref.strip(), owner_key=owner_key)
        if task is None:
            raise TaskNotFound(f"no subagent {ref!r} of this session (subagents list shows them)")
        return task

    # -- cancelling ------------------------------------------------------------------------

    async def cancel(self, task_id: str, *, reason: str = "cancelled") -> list[TaskRecord]:
        """Cancel an agent and, recursively, every agent it started.

        Returns:
            The records cancelled (the agent first), empty when it had already finished.

        Raises:
            TaskNotFound: no agent has that id.
        """
        task = await self.repo.get(task_id)
        if task is None:
            raise TaskNotFound(f"no subagent {task_id!r}")
        now = self._clock()

        def job(conn: Connection) -> list[tuple[TaskRecord, str]]:
            done: list[tuple[TaskRecord, str]] = []
            queue = [task_id]
            while queue:
                current = self.repo.get_in(conn, queue.pop(0))
                if current is None or not current.active:
                    continue
                values = {
                    "status": "cancelled",
                    "error": reason,
                    "finished_at": now,
                    "updated_at": now,
                }
                if self.repo.update_in(conn, current.id, values, when={"status": current.status}):
                    done.append((current, current.status))
                    queue.extend(
                        c.id for c in self.repo.active_children_in(conn, current.child_key)
                    )
            self._events.add_in(
                conn,
                [
                    Event(
                        session_key=t.owner_key,
                        data=SubagentFailed(
                            agent_id=t.id,
                            agent_type=t.agent_type,
                            status="cancelled",
                            error=reason,
                        ),
                    )
                    for t, _ in done
                    if t.memory_mode != "isolated"
                ],
            )
            return done

        cancelled = await self._store.transact(job)
        for record, was in cancelled:
            if was == "running" and not runs_elsewhere(record.agent_type):
                # A control command overtakes the child's queue and stops its turn; a
                # work message not yet claimed is refused by the profile (cancelled).
                await self._bus.publish_inbound(
                    InboundMessage(
                        session_key=record.child_key,
                        text="/stop",
                        delivery=Delivery(channel=SUBAGENT_CHANNEL, chat_id=record.id),
                        origin="system",
                    )
                )
            log.info("subagent cancelled agent_id=%s owner=%s", record.id, record.owner_key)
        return [r for r, _ in cancelled]
