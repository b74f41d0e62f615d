"""The optional heartbeat: a periodic check-in driven by the workspace's HEARTBEAT.md."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, time
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy import func
from sqlmodel import col, select

from core.bus.sql import SqlBus
from core.delivery import DeliveryWorker, Send
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.schedule_spec import parse_duration
from core.scheduler import HeartbeatConfig, ScheduleService, parse_active_hours, target_for_session
from core.store.engine import Store
from core.store.models import InboundRow
from core.workspace import heartbeat_is_actionable

__all__ = [
    "HEARTBEAT_CHANNEL",
    "HEARTBEAT_FILE",
    "HEARTBEAT_OK",
    "HeartbeatService",
    "within_hours",
]

log = logging.getLogger(__name__)

HEARTBEAT_OK = "HEARTBEAT_OK"
"""The whole reply that means "nothing needs attention": it is never delivered."""
HEARTBEAT_CHANNEL = "heartbeat"
"""Heartbeat messages carry this delivery channel; its replies come back to this service."""
HEARTBEAT_FILE = "HEARTBEAT.md"
_MAX_INSTRUCTIONS = 8_000


def within_hours(moment: datetime, window: tuple[time, time] | None) -> bool:
    """Tell whether ``moment`` (already in the right zone) falls in ``window`` [start, end).

    A window may wrap midnight (``22:00-06:00``); start == end means all day.
    """
    if window is None:
        return True
    start, end = window
    now = moment.time().replace(tzinfo=None)
    if start == end:
        return True
    if start < end:
        return start <= now < end
    return now >= start or now < end


class HeartbeatService:
    """Checks in every ``heartbeat.every``, but only when HEARTBEAT.md asks for something.

    A check-in publishes one message (origin ``system``) on the heartbeat's own session,
    whose delivery channel is ``heartbeat``: its reply comes back to this service's
    DeliveryWorker instead of a chat. A reply of exactly ``HEARTBEAT_OK`` is dropped
    (marked delivered, never sent); any other reply goes to ``deliver`` addressed to
    the chat of the ``deliver_to`` session. Error replies (e.g. the provider is down)
    are only logged, so an outage does not page the user every interval.

    Args:
        config: the ``scheduler.heartbeat`` section.
        scheduler: the running schedule service (timer, clock and timezone).
        bus: where check-ins are published and their replies read.
        store: for the deliver_to session's latest chat and the queue check.
        workspace: the directory holding HEARTBEAT.md.
        deliver: sends an outbound message through the channel named in its delivery;
            None keeps replies in the heartbeat session only.
        poll_interval: how often the reply worker looks for replies without a wake-up.
    """

    def __init__(
        self,
        *,
        config: HeartbeatConfig,
        scheduler: ScheduleService,
        bus: SqlBus,
        store: Store,
        workspace: Path,
        deliver: Send | None = None,
        poll_interval: float = 1.0,
    ) -> None:
        self.config = config
        self._scheduler = scheduler
        self._bus = bus
        self._store = store
        self._path = workspace / HEARTBEAT_FILE
        self._deliver = deliver
        self._window = (
            None if config.active_hours is None else parse_active_hours(config.active_hours)
        )
        self._worker = DeliveryWorker(
            bus=bus, channel=HEARTBEAT_CHANNEL, send=self._send, poll_interval=poll_interval
        )
        self._started = False

    async def start(self) -> None:
        """Start the reply worker and, when ``every`` is set, the periodic check-in."""
        if self._started:
            return
        self._worker.start()
        self._started = True
        if self.config.every is not None:
            seconds = parse_duration(self.config.every)
            self._scheduler.add_interval_job("heartbeat", self.beat, seconds=seconds)
            log.info(
                "heartbeat on every=%s session=%s active_hours=%s deliver_to=%s",
                self.config.every,
                self.config.session,
                self.config.active_hours,
                self.config.deliver_to,
            )

    async def stop(self) -> None:
        if self._started:
            await self._worker.stop()
            self._started = False

    async def beat(self) -> str | None:
        """One check-in: publish the heartbeat prompt if it is due and actionable.

        Returns:
            The published message id, or None when nothing was published (outside the
            active hours, HEARTBEAT.md missing or not actionable, previous one still queued).
        """
        now = self._scheduler.now()
        local = now.astimezone(ZoneInfo(self._scheduler.default_timezone))
        if not within_hours(local, self._window):
            log.debug("heartbeat outside active hours local=%s", local.isoformat())
            return None
        text = await asyncio.to_thread(_read, self._path)
        if text is None or not heartbeat_is_actionable(text):
            log.debug("heartbeat: %s has nothing to do", self._path)
            return None
        if await self._queued():
            log.info("heartbeat skipped: the previous check-in is still queued or running")
            return None
        message = InboundMessage(
            session_key=self.config.session,
            text=_prompt(text),
            delivery=Delivery(channel=HEARTBEAT_CHANNEL, chat_id=self.config.session),
            sender="heartbeat",
            origin="system",
            event_id=f"{self.config.session}:{now.replace(microsecond=0).isoformat()}",
        )
        published = await self._bus.publish_inbound(message)
        log.info("heartbeat published message_id=%s", published.message_id)
        return None if published.duplicate else published.message_id

    async def _queued(self) -> bool:
        query = select(func.count()).where(
            col(InboundRow.session_key) == self.config.session,
            col(InboundRow.status).in_(("pending", "claimed")),
        )
        async with self._store.read() as s:
            return bool((await s.exec(query)).one())

    async def _send(self, message: OutboundMessage) -> None:
        """The heartbeat channel's delivery: drop HEARTBEAT_OK, forward anything else."""
        if message.text.strip() == HEARTBEAT_OK:
            log.info("heartbeat: nothing needs attention")
            return
        if message.kind == "error":
            log.warning("heartbeat check-in failed: %s", message.text)
            return
        if self.config.deliver_to is None or self._deliver is None:
            log.info(
                "heartbeat reply kept in session %s (set scheduler.heartbeat.deliver_to to"
                " receive it)",
                message.session_key,
            )
            return
        target = await target_for_session(self._store, self.config.deliver_to)
        await self._deliver(message.model_copy(update={"delivery": target.delivery}))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _prompt(instructions: str) -> str:
    if len(instructions) > _MAX_INSTRUCTIONS:
        instructions = instructions[:_MAX_INSTRUCTIONS] + "\n[… HEARTBEAT.md truncated]"
    return (
        "Heartbeat check-in. Follow the instructions in HEARTBEAT.md (your workspace file,"
        " copied below). If nothing needs the user's attention, reply exactly"
        f" {HEARTBEAT_OK} and nothing else; otherwise reply with what they should know.\n\n"
        f"--- HEARTBEAT.md ---\n{instructions.strip()}"
    )
