"""The agent runtime: claims messages; one turn per session at a time, many sessions at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import AsyncIterator

from core.agent.config import AgentConfig
from core.agent.store_retry import StoreRetries
from core.agent.turn import TurnControl, TurnHandler
from core.bus.base import Claim
from core.bus.sql import SqlBus
from core.commands import CommandRouter
from core.errors import StoreError
from core.logctx import log_context
from core.messages import InboundMessage
from core.sessions import SessionStore

__all__ = ["AgentRuntime"]

log = logging.getLogger(__name__)


class _Running:
    """A running turn, and whether it holds one of the concurrency slots right now."""

    __slots__ = ("control", "holding", "message", "task")

    def __init__(self, message: InboundMessage, task: asyncio.Task[None]) -> None:
        self.message = message
        self.task = task
        self.control = TurnControl()
        self.holding = True


class _Slot:
    """A turn's `Capacity`: giving the slot back while waiting, taking it back after.

    Several tool calls of one response may wait at once (parallel sync subagents): the
    slot goes back with the first and is taken back after the last.
    """

    def __init__(self, runtime: AgentRuntime, running: _Running) -> None:
        self._runtime = runtime
        self._running = running
        self._lent = 0

    @contextlib.asynccontextmanager
    async def released(self) -> AsyncIterator[None]:
        self._lent += 1
        self._runtime._give_back(self._running)
        try:
            yield
        finally:
            self._lent -= 1
            if self._lent == 0:
                await self._runtime._take_back(self._running)
                if self._lent > 0:  # another call began waiting while this one took it
                    self._runtime._give_back(self._running)


class AgentRuntime:
    """Owns the claim loop, lease renewal, /stop, and graceful shutdown.

    At most ``agent.max_concurrent_sessions`` turns hold a slot. A turn waiting on
    another session's work (a sync subagent) gives its slot back for the wait and
    takes it back afterwards ahead of new claims, so parents waiting on children can
    hold every slot without deadlocking them.

    A message whose last attempt was interrupted (a *suspect*, `core.bus.suspects`)
    runs alone: it is claimed only while no other turn runs here, and nothing else is
    claimed while it holds its slot. While suspects wait, no new work is claimed until
    the running turns (those holding slots) are done. A suspect waiting on a subagent
    holds no slot, so the subagent's message (a suspect too when both were interrupted)
    can run; a crash then charges the chain, never an unrelated message.
    """

    def __init__(
        self,
        *,
        inbox: SqlBus,
        turns: TurnHandler,
        owner: str,
        config: AgentConfig,
        commands: CommandRouter,
        sessions: SessionStore,
    ) -> None:
        self._inbox = inbox
        self._turns = turns
        self.owner = owner
        self._config = config
        self._sessions = sessions
        self._running: dict[str, _Running] = {}
        """By message id."""
        self._reclaiming: deque[tuple[_Running, asyncio.Future[None]]] = deque()
        self._slot_freed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._alone: set[str] = set()
        """The suspects running alone (message ids): one, or a chain of them when a
        suspect waits on a subagent whose message is a suspect too."""
        self.draining = False
        """Taking no new work until the running turns end, so a suspect can run alone."""
        self._suspects = False
        self._suspects_read = -math.inf
        """Whether suspects wait, as last read (`loop.time()`), read at most per poll."""
        self._store_retries = StoreRetries(inbox=inbox, owner=owner)
        commands.register(
            "stop",
            self._stop_command,
            usage="/stop",
            summary="stop the running turn of this session",
        )
        commands.register(
            "new",
            self._new_command,
            usage="/new",
            summary="start a fresh conversation (history is kept, not shown to the model)",
        )

    @property
    def busy_sessions(self) -> int:
        return len(self._running)

    @property
    def slots_in_use(self) -> int:
        """Turns holding a slot (running turns minus those waiting on other sessions)."""
        return sum(1 for r in self._running.values() if r.holding)

    def _free_slots(self) -> int:
        return self._config.max_concurrent_sessions - self.slots_in_use - len(self._reclaiming)

    def _give_back(self, running: _Running) -> None:
        if running.holding:
            running.holding = False
            self._slot_freed.set()
            self._grant()

    async def _take_back(self, running: _Running) -> None:
        if running.holding:
            return
        if not self._reclaiming and self._free_slots() > 0:
            running.holding = True
            return
        granted = asyncio.get_running_loop().create_future()
        entry = (running, granted)
        self._reclaiming.append(entry)
        try:
            await granted
        finally:
            if not granted.done():
                self._reclaiming.remove(entry)
                self._slot_freed.set()

    def _grant(self) -> None:
        """Hand free slots to turns taking theirs back, oldest first."""
        while self._reclaiming and self.slots_in_use < self._config.max_concurrent_sessions:
            running, granted = self._reclaiming.popleft()
            running.holding = True
            granted.set_result(None)

    async def start(self) -> None:
        released = await self._inbox.release_dead_owners()
        if released:
            log.info("recovered messages of a previous run count=%d", released)
        self._tasks = [
            asyncio.create_task(self._claim_loop(), name="familiar-claim-loop"),
            asyncio.create_task(self._renew_loop(), name="familiar-lease-renewal"),
        ]

    async def stop(self, *, grace: float | None = None) -> None:
        """Stop claiming; let running turns finish within ``grace``; release the rest.

        The claim loop is let finish (not cancelled), so a claim in flight becomes a
        running turn rather than a stranded lease; leases are renewed through the grace.
        """
        self._stopping.set()
        self._slot_freed.set()
        claim_loop, renewal = self._tasks or (None, None)
        if claim_loop is not None:
            await asyncio.gather(claim_loop, return_exceptions=True)
        try:
            await self._finish_running(grace)
            await self._store_retries.stop()
        finally:
            if renewal is not None:
                renewal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewal

    async def _finish_running(self, grace: float | None) -> None:
        grace = self._config.shutdown_grace if grace is None else grace
        pending = [r.task for r in self._running.values()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace)
            leftover = [r.message.id for r in self._running.values() if r.task in still]
            for task in still:
                task.cancel()
            await asyncio.gather(*still, return_exceptions=True)
            await self._inbox.release(leftover, owner=self.owner)
            if leftover:
                log.info("released unfinished messages count=%d", len(leftover))

    async def _claim_loop(self) -> None:
        cfg = self._config
        while not self._stopping.is_set():
            if await self._suspect_first():
                continue
            free = self._free_slots()
            if free > 0:
                try:
                    claims = await self._inbox.claim(
                        owner=self.owner, limit=free, lease_seconds=cfg.lease_seconds
                    )
                except Exception:
                    log.exception("claim failed; retrying")
                    claims = []
                    await asyncio.sleep(cfg.poll_interval)
                for claim in claims:
                    if claim.message.id in self._running:
                        # Our own lease lapsed and we re-claimed it: the turn still runs.
                        continue
                    self._start_turn(claim)
                if len(claims) >= free:
                    continue  # there may be more; fewer than asked means none was left
            await self._wait_for_work(cfg.poll_interval if free > 0 else None)

    async def _suspect_first(self) -> bool:
        """Run a suspect alone, or wait for that; False: claim as usual now."""
        alone = [r for m in self._alone if (r := self._running.get(m)) is not None]
        if any(r.holding for r in alone):
            await self._wait_for_work(None)  # it runs alone: nothing else meanwhile
            return True
        if self._running and self.slots_in_use > 0:
            self.draining = await self._suspects_waiting()  # drain while suspects wait
            if self.draining:
                await self._wait_for_work(None)
            return self.draining
        # Nothing here holds a slot: every running turn (if any) waits on other sessions'
        # work, which may itself be a suspect (a subagent's message interrupted with its
        # parent's); it runs alone beside those that wait.
        self.draining = False
        try:
            claim = await self._inbox.claim_suspect(
                owner=self.owner, lease_seconds=self._config.lease_seconds
            )
        except Exception:
            log.exception("claiming a suspect failed")
            return False
        if claim is None:
            self._suspects = False
            return False
        self._alone.add(claim.message.id)
        self._start_turn(claim)
        return True

    async def _suspects_waiting(self) -> bool:
        now = asyncio.get_running_loop().time()
        if now - self._suspects_read >= self._config.poll_interval:
            self._suspects_read = now
            try:
                self._suspects = await self._inbox.suspect_waiting()
            except Exception:
                log.exception("looking for suspects failed")
                self._suspects = False
        return self._suspects

    async def _wait_for_work(self, timeout: float | None) -> None:
        """Until something may be claimable (``timeout`` None: until a slot is free).

        With free slots left, a turn ending frees nothing claimable by itself: its
        settle wakes the inbox when its session has more queued. Waking on it anyway
        sent this loop to an empty claim after every turn.
        """
        self._slot_freed.clear()
        waiters: list[asyncio.Future[object]] = [asyncio.ensure_future(self._stopping.wait())]
        if timeout is None:
            waiters.append(asyncio.ensure_future(self._slot_freed.wait()))
        else:
            waiters.append(asyncio.ensure_future(self._inbox.wait_inbound(timeout)))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    def _start_turn(self, claim: Claim) -> None:
        message = claim.message
        running: _Running

        async def turn() -> None:
            with log_context(session_key=message.session_key, message_id=message.id):
                try:
                    await self._turns.handle(claim, control=running.control)
                except asyncio.CancelledError:
                    if not running.control.stop.is_set() or self._stopping.is_set():
                        raise
                    # /stop cancelled the task before its turn began: settle it here.
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()
                    await self._turns.stopped(claim)
                except StoreError as exc:  # nothing of it was stored: run it again soon
                    log.warning("turn failed on the store; releasing it: %s", exc)
                    self._store_retries.release_later(message.id)
                except Exception:
                    log.exception("turn crashed; the message stays claimable after its lease")
                finally:
                    self._running.pop(message.id, None)
                    self._alone.discard(message.id)
                    self._grant()
                    self._slot_freed.set()

        task = asyncio.create_task(turn(), name=f"turn-{message.id}")
        running = _Running(message, task)
        running.control.capacity = _Slot(self, running)
        self._running[message.id] = running

    async def _renew_loop(self) -> None:
        lease = self._config.lease_seconds
        while True:
            await asyncio.sleep(lease / 3)
            ids = list(self._running)
            try:
                held = await self._inbox.renew(ids, owner=self.owner, lease_seconds=lease)
            except Exception:
                log.exception("lease renewal failed")
                continue
            for message_id in set(ids) - held:
                running = self._running.get(message_id)
                if running is not None and not running.control.settling:
                    # Another attempt owns it now (our lease lapsed): stop this one.
                    log.warning("lease lost; abandoning the turn message_id=%s", message_id)
                    running.task.cancel()

    # -- commands that need the runtime -------------------------------------------------

    async def _stop_command(self, message: InboundMessage, _args: str) -> str:
        stopped = 0
        for running in list(self._running.values()):
            if (
                running.message.session_key == message.session_key
                and running.message.id != message.id
                and not running.control.settling
            ):
                running.control.stop.set()
                running.task.cancel()
                stopped += 1
        return "Stopping the running turn." if stopped else "Nothing is running in this session."

    async def _new_command(self, message: InboundMessage, _args: str) -> str:
        epoch = await self._sessions.new_epoch(message.session_key, message.delivery.channel)
        return f"Started a fresh conversation (context #{epoch}); earlier messages stay in the log."
