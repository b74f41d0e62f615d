"""Compaction the model writes: history that left the window, summarised after the reply.

A turn whose history passes its budget answers with an interim extractive fold in
its prompt and records a job row (``compaction_jobs``, one per session) in the same
transaction that settles its reply. This worker leases jobs, asks the provider to
fold the turns that fall out of the window into the session's summary, and writes
summary and ``summary_upto`` in one transaction that also deletes the job. A crash
leaves the job to be leased again; the raw history is never touched. When the
provider fails the extractive fold is written instead. Either way the session's event
log gets a ``session.compaction`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, delete, select, update

from core.agent.context import ContextBuilder, compact
from core.background import BackgroundTask
from core.event_data import Compaction
from core.events import Event, EventLog
from core.memory.config import MemoryConfig
from core.memory.models import CompactionJobRow
from core.providers.base import ChatMessage, ChatRequest, Provider
from core.sessions import HistoryEntry, SessionState, SessionStore
from core.store.engine import Store
from core.store.models import SessionRow
from core.store.sql import insert_ignore

__all__ = ["SUMMARY_SYSTEM_PROMPT", "CompactionWorker"]

log = logging.getLogger(__name__)

SUMMARY_SYSTEM_PROMPT = (
    "You keep the running summary of a long conversation between a user and an "
    "assistant. Fold the new turns into the summary so far. Keep facts, names, numbers, "
    "decisions, preferences and open tasks; drop small talk and tool noise. Write plain "
    "text, newest information last, at most {max_chars} characters. Answer with the "
    "summary only."
)
_MESSAGE_CHARS = 2000
_LEASE_SECONDS = 120.0
_BATCH = 8
_jobs = CompactionJobRow.__table__  # type: ignore[attr-defined]
_sessions = SessionRow.__table__  # type: ignore[attr-defined]
_RAISE_UPTO = (
    update(_jobs)
    .where(_jobs.c.session_key == bindparam("b_key"))
    .values(upto=bindparam("b_upto"), epoch=bindparam("b_epoch"))
)


@dataclass(frozen=True, slots=True)
class _Job:
    session_key: str
    epoch: int


def _transcript(messages: Sequence[ChatMessage]) -> str:
    lines = []
    for m in messages:
        text = m.content if len(m.content) <= _MESSAGE_CHARS else m.content[:_MESSAGE_CHARS] + "…"
        if m.role == "tool":
            lines.append(f"[tool {m.name or 'result'}] {text}")
        elif m.tool_calls:
            called = ", ".join(c.name for c in m.tool_calls)
            lines.append(f"assistant: {text} [called {called}]".replace(":  [", ": ["))
        else:
            lines.append(f"{m.role}: {text}")
    return "\n".join(lines)


class CompactionWorker:
    """Runs compaction jobs; implements the turn's `CompactionQueue`."""

    def __init__(
        self,
        *,
        store: Store,
        sessions: SessionStore,
        events: EventLog,
        provider: Provider | None,
        context: ContextBuilder,
        config: MemoryConfig,
        history_budget: int,
        summary_max_chars: int,
        owner: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._events = events
        self._provider = provider
        self._context = context
        self._config = config
        self._target = max(1, int(history_budget * config.compaction_target))
        self._max_chars = summary_max_chars
        self._owner = owner
        self._clock = clock
        self._wake = asyncio.Event()
        self._worker = BackgroundTask("familiar-compaction")
        self.completed = 0

    # -- CompactionQueue ---------------------------------------------------------------------

    def request_in(self, conn: Connection, *, key: str, epoch: int, upto: int) -> None:
        row = {"session_key": key, "epoch": epoch, "upto": upto, "requested_at": self._clock()}
        row |= {"attempts": 0, "owner": None, "leased_until": 0.0}
        if insert_ignore(self._store.dialect, _jobs).run(conn, row) == 0:
            conn.execute(_RAISE_UPTO, {"b_key": key, "b_upto": upto, "b_epoch": epoch})

    def wake(self) -> None:
        self._wake.set()

    # -- the worker --------------------------------------------------------------------------

    async def start(self) -> None:
        self._worker.start(self._loop)

    async def stop(self) -> None:
        await self._worker.stop()

    async def _loop(self) -> None:
        while True:
            try:
                jobs = await self._claim()
                for job in jobs:
                    await self.run(job.session_key, job.epoch)
            except Exception:
                log.exception("compaction failed; the job is retried after its lease")
                jobs = []
            if not jobs:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._config.compaction_poll_seconds)
                self._wake.clear()

    async def _claim(self) -> list[_Job]:
        def job(conn: Connection) -> list[_Job]:
            now = self._clock()
            due = conn.execute(
                select(_jobs.c.session_key, _jobs.c.epoch)
                .where(_jobs.c.leased_until < now)
                .order_by(_jobs.c.requested_at)
                .limit(_BATCH)
            ).all()
            claimed = []
            for key, epoch in due:
                lease = (
                    update(_jobs)
                    .where(_jobs.c.session_key == key, _jobs.c.leased_until < now)
                    .values(
                        owner=self._owner,
                        leased_until=now + _LEASE_SECONDS,
                        attempts=_jobs.c.attempts + 1,
                    )
                )
                if conn.execute(lease).rowcount == 1:
                    claimed.append(_Job(key, epoch))
            return claimed

        return await self._store.transact(job)

    async def run(self, key: str, epoch: int) -> Compaction | None:
        """Compact session ``key`` now (the job's lease is held); None if nothing to do."""

        def load(conn: Connection) -> tuple[SessionState | None, list[HistoryEntry]]:
            row = conn.execute(select(_sessions.c.channel).where(_sessions.c.key == key)).first()
            if row is None:
                return None, []
            state = self._sessions.ensure_in(conn, key, row[0])
            return state, self._sessions.history_in(conn, state)

        state, history = await self._store.transact(load)
        if state is None or state.epoch != epoch:
            await self._store.transact(lambda conn: self._finish_in(conn, key, None, None))
            return None
        messages = [h.message for h in history]
        window = self._context.window(messages, summary=state.summary, budget=self._target)
        if not window.dropped:
            await self._store.transact(lambda conn: self._finish_in(conn, key, None, None))
            return None
        started = time.monotonic()
        summary, error = await self._summarise(window.dropped, state.summary)
        method = "model"
        if summary is None:
            method = "extractive"
            summary = compact(window.dropped, state.summary, max_chars=self._max_chars)
        upto = history[len(window.dropped) - 1].id
        data = Compaction(
            method=method,
            messages=len(window.dropped),
            upto=upto,
            summary_chars=len(summary),
            duration_s=round(time.monotonic() - started, 3),
            error=error,
        )
        event = Event(session_key=key, data=data)
        written = await self._store.transact(
            lambda conn: self._finish_in(conn, key, (state, summary, upto), event)
        )
        self.completed += 1
        log.info("compacted session=%s method=%s messages=%d", key, method, len(window.dropped))
        return data if written else None

    async def _summarise(
        self, dropped: Sequence[ChatMessage], previous: str | None
    ) -> tuple[str | None, str | None]:
        if self._provider is None:
            return None, "no provider configured"
        request = ChatRequest(
            system=SUMMARY_SYSTEM_PROMPT.format(max_chars=self._max_chars),
            messages=(
                ChatMessage(
                    role="user",
                    content=f"Summary so far:\n{previous or '(none)'}\n\n"
                    f"New turns to fold in:\n{_transcript(dropped)}",
                ),
            ),
        )
        try:
            completion = await self._provider.complete(request)
        except Exception as exc:  # any failure falls back to the extractive fold
            log.warning("summarising call failed; extractive fold instead: %s", exc)
            return None, f"{type(exc).__name__}: {exc}"
        text = completion.text.strip()
        if not text:
            return None, "the model returned an empty summary"
        if len(text) > self._max_chars:
            text = "…" + text[len(text) - self._max_chars + 1 :]
        return text, None

    def _finish_in(
        self,
        conn: Connection,
        key: str,
        fold: tuple[SessionState, str, int] | None,
        event: Event | None,
    ) -> bool:
        conn.execute(delete(_jobs).where(_jobs.c.session_key == key))
        if fold is None:
            return False
        state, summary, upto = fold
        moved = conn.execute(
            update(_sessions)
            .where(
                _sessions.c.key == key,
                _sessions.c.epoch == state.epoch,
                _sessions.c.summary_upto == state.summary_upto,
            )
            .values(summary=summary, summary_upto=upto)
        )
        if moved.rowcount != 1:  # /new or another compaction got there first
            return False
        if event is not None:
            self._events.add_in(conn, [event])
        return True
