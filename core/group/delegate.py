"""The caller's side of delegation: ``sessions_spawn(agent_type="peer:<name>")``.

A spawn checks the roster (a peer that is gone or has left fails at once), then writes
in one transaction the caller's own task record (agent type ``peer:<name>``, listed and
cancelled like a subagent's), its ``subagent.started`` event and the ``queued`` row of
``group_tasks`` (the NOTIFY that wakes the peer goes out at commit). A sync spawn waits
for the row to end; a background one returns its id, and the follower hands the answer
to the caller's session like a background subagent's (deduplicated by the task id).

The follower looks at every task of this member still open: at start (so a restart
re-watches them), on each group NOTIFY for this member, and every poll. A task whose
lease ran out (its peer died, or never took it) is ended as failed with that reason, so
the caller always gets an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, select

from core.background import BackgroundTask
from core.bus.sql import SqlBus
from core.errors import TaskRefused
from core.events import EventLog
from core.group.config import member_name_problem
from core.group.roster import Member, Roster
from core.messages import Delivery
from core.store.engine import Store
from core.tasks.collector import SUBAGENT_CHANNEL
from core.tasks.peers import Peers, PeerSpawn
from core.tasks.records import PEER_PREFIX, TaskRecord, TaskRow, outside_task_values, started_event
from core.tasks.registry import WaitOutcome
from core.tasks.repository import TaskRepository
from core.tasks.spawn_keys import SpawnKeys
from core.tools.base import ToolContext
from core.tools.subagents_config import SubagentsConfig

from .peer_tasks import GROUP_SESSION_PREFIX, MAX_PROMPT_CHARS, group_session_key
from .settle import Settler
from .tables import group_tasks
from .task_rows import ACTIVE_STATES, GroupTasks

__all__ = ["GroupDelegation"]

log = logging.getLogger(__name__)

_POLL = 1.0
_tasks = TaskRow.__table__  # type: ignore[attr-defined]


class GroupDelegation(Peers):
    """Delegation from this member to its peers (the `Peers` the subagent tools use).

    Args:
        store: this assistant's store.
        bus: this assistant's bus (handoffs go there).
        events: this assistant's event log.
        roster: the group's roster.
        tasks: the group's task rows.
        name: this member's name.
        subagents: ``[tools.subagents]`` (depth cap, sync timeout, result size).
        lease: seconds a queued task waits for its peer (``group.expire_after``).
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        events: EventLog,
        roster: Roster,
        tasks: GroupTasks,
        name: str,
        subagents: SubagentsConfig,
        lease: float,
        poll: float = _POLL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._roster = roster
        self._tasks = tasks
        self.name = name
        self._config = subagents
        self._lease = lease
        self._poll = poll
        self._clock = clock
        self._settler = Settler(
            store=store, bus=bus, events=events, tasks=tasks, subagents=subagents, clock=clock
        )
        self._changed = asyncio.Event()
        self._worker = BackgroundTask("familiar-group-follow")
        self._spawn_keys = SpawnKeys()

    def poke(self) -> None:
        """A task of this member changed (the group NOTIFY): look now."""
        self._changed.set()
        self._changed = asyncio.Event()

    # -- the listing -----------------------------------------------------------------------

    async def listing(self, query: str | None) -> list[dict[str, Any]]:
        words = {w for w in re.findall(r"\w+", (query or "").lower()) if len(w) > 1}
        found: list[tuple[int, dict[str, Any]]] = []
        for member in await self._roster.members():
            if member.name == self.name or member.state != "active":
                continue
            text = " ".join([member.name, member.description, json.dumps(member.capabilities)])
            score = sum(w in text.lower() for w in words)
            if words and not score:
                continue
            found.append((score, _as_agent(member)))
        found.sort(key=lambda pair: (-pair[0], pair[1]["name"]))
        return [item for _, item in found]

    # -- spawning --------------------------------------------------------------------------

    async def spawn(self, ctx: ToolContext, request: PeerSpawn) -> dict[str, Any]:
        record = await self._record(ctx, request)
        self.poke()
        if record.mode == "background":
            return {
                "agent_id": record.id,
                "agent_type": record.agent_type,
                "status": record.status,
                "note": "the peer works on it; its answer comes as a handoff message",
            }
        async with ctx.capacity.released():
            return await self._wait(record)

    async def _checked_peer(self, ctx: ToolContext, request: PeerSpawn) -> Member:
        peer = request.peer
        if (problem := member_name_problem(peer)) is not None:
            raise TaskRefused(problem)
        if peer == self.name:
            raise TaskRefused(f"{peer!r} is this assistant itself: do the task yourself")
        if ctx.root_session_key.startswith(GROUP_SESSION_PREFIX):
            raise TaskRefused(
                "this conversation is a task another member delegated: it may not "
                "delegate to peers in turn (do it yourself, or answer what you can)"
            )
        if ctx.depth + 1 > self._config.max_depth:
            raise TaskRefused(
                f"subagents may nest at most {self._config.max_depth} levels "
                "(tools.subagents.max_depth): do this work yourself"
            )
        if request.mode not in ("sync", "background"):
            raise TaskRefused(f"mode must be 'sync' or 'background', not {request.mode!r}")
        prompt = request.prompt.strip()
        if not prompt:
            raise TaskRefused("the prompt is empty: say what the peer should do")
        if prompt.startswith("/"):
            raise TaskRefused("a prompt may not start with '/' (it would be a slash command)")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise TaskRefused(f"the prompt is longer than {MAX_PROMPT_CHARS} characters")
        member = await self._roster.member(peer)
        if member is None:
            names = [m.name for m in await self._roster.members() if m.state == "active"]
            others = ", ".join(f"{PEER_PREFIX}{n}" for n in sorted(names) if n != self.name)
            raise TaskRefused(f"no member {peer!r} in the group (peers now: {others or 'none'})")
        if member.state != "active":
            since = member.last_heartbeat.strftime("%Y-%m-%d %H:%M:%S %Z")
            if member.state == "left":
                why = f"has left the group (its gateway stopped; last heartbeat {since})"
            else:
                why = f"is gone: no heartbeat since {since} (group.expire_after)"
            raise TaskRefused(f"peer {peer!r} {why}; it cannot take tasks now")
        return member

    async def _record(self, ctx: ToolContext, request: PeerSpawn) -> TaskRecord:
        member = await self._checked_peer(ctx, request)
        prompt = request.prompt.strip()
        mode = "sync" if ctx.depth > 0 else request.mode  # a subagent answers with one result
        spawn_key = self._spawn_key(ctx, request)
        task_id = uuid.uuid4().hex[:16]
        now = self._clock()
        agent_type = f"{PEER_PREFIX}{member.name}"
        description = request.description.strip()[:2000] or f"a task for {member.name}"
        parent = ctx.message
        delivery = parent.delivery if parent is not None else Delivery(channel=SUBAGENT_CHANNEL)
        record = outside_task_values(
            task_id=task_id,
            owner_key=ctx.session_key,
            child_key=group_session_key(self.name, task_id),
            spawn_key=spawn_key,
            agent_type=agent_type,
            description=description,
            prompt=prompt,
            mode=mode,
            depth=ctx.depth + 1,
            delivery=delivery.model_dump_json(),
            now=now,
        )
        row = {
            "id": task_id,
            "caller": self.name,
            "peer": member.name,
            "prompt": prompt,
            "description": description,
            "mode": mode,
            "status": "queued",
            "created_at": now,
            "updated_at": now,
        }
        event = started_event(
            ctx.session_key,
            parent.id if parent is not None else None,
            agent_id=task_id,
            agent_type=agent_type,
            mode=mode,
            depth=ctx.depth + 1,
            description=description,
        )

        def job(conn: Connection) -> TaskRecord:
            if spawn_key is not None and (found := TaskRepository.by_spawn_key_in(conn, spawn_key)):
                return found  # a rerun of the same call after a crash
            TaskRepository.insert_in(conn, record)
            GroupTasks.insert_in(conn, row, lease=self._lease)
            self._settler.events.add_in(conn, [event])
            created = TaskRepository.get_in(conn, task_id)
            assert created is not None
            return created

        found = await self._store.transact(job)
        log.info(
            "group task sent id=%s peer=%s mode=%s owner=%s new=%s",
            found.id,
            member.name,
            found.mode,
            found.owner_key,
            found.id == task_id,
        )
        return found

    def _spawn_key(self, ctx: ToolContext, request: PeerSpawn) -> str | None:
        if ctx.message is None:
            return None
        call = [request.peer, request.prompt, request.mode]
        return self._spawn_keys.key(f"peer:{ctx.message.id}", call)

    # -- waiting ---------------------------------------------------------------------------

    async def _wait(self, record: TaskRecord) -> dict[str, Any]:
        limit = self._config.result_max_chars
        deadline = self._clock() + self._config.sync_timeout
        while True:
            changed = self._changed
            ended = await self._settler.check(record)
            if ended is not None:
                status, text = ended
                current = await self._settler.repo.get(record.id) or record
                return WaitOutcome(current, status, text).as_json(limit)
            left = deadline - self._clock()
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), min(self._poll, left))
        if await self._settler.hand_off_later(record):
            return WaitOutcome(record, "running", None, timed_out=True).as_json(limit)
        return await self._wait(record)  # it ended just now: read it

    # -- following -------------------------------------------------------------------------

    async def start(self) -> None:
        self._worker.start(self._follow)

    async def stop(self) -> None:
        await self._worker.stop()

    async def _follow(self) -> None:
        while True:
            changed = self._changed
            try:
                for record in await self._open_records():
                    await self._settler.check(record)
            except Exception:
                log.exception("following group tasks failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), self._poll)

    async def _open_records(self) -> list[TaskRecord]:
        """This member's peer tasks whose record runs, or whose row is still open (a
        record cancelled here: its row is ended as failed)."""
        open_rows = select(group_tasks.c.id).where(
            group_tasks.c.caller == self.name, group_tasks.c.status.in_(ACTIVE_STATES)
        )
        query = select(_tasks).where(
            _tasks.c.agent_type.like(f"{PEER_PREFIX}%"),
            (_tasks.c.status == "running") | _tasks.c.id.in_(open_rows),
        )
        async with self._store.read() as conn:
            rows = (await conn.execute(query)).all()
        return [TaskRecord.of(row) for row in rows]


def _as_agent(member: Member) -> dict[str, Any]:
    return {
        "name": f"{PEER_PREFIX}{member.name}",
        "description": member.description or f"the assistant {member.name} of this group",
        "kind": "peer",
        "capabilities": member.capabilities,
        "host": member.host,
    }
