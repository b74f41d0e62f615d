"""The optional heartbeat: a periodic check-in driven by the workspace's HEARTBEAT.md."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, time
from pathlib import Path
from zoneinfo import ZoneInfo

from core.bus.delivery import DeliveryWorker, Send
from core.bus.sql import SqlBus
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.scheduling.config import HeartbeatConfig, parse_active_hours
from core.scheduling.service import ScheduleService
from core.scheduling.units import parse_duration
from core.store.engine import Store
from core.workspace import heartbeat_is_actionable
from core.workspace_read import read_workspace_text

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
        scheduler: the running schedule service (timer, clock, timezone, targets).
        bus: where check-ins are published and their replies read.
        store: for the check whether the previous check-in is still queued.
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
        return (await self._bus.queue_counts(self.config.session)).depth > 0

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
        target = await self._scheduler.target_for(self.config.deliver_to)
        # Addressed to the target session: a channel that cannot show it now keeps it
        # there (unread), where the user will look, not in the heartbeat's own session.
        update = {"delivery": target.delivery, "session_key": target.session_key}
        await self._deliver(message.model_copy(update=update))


def _read(path: Path) -> str | None:
    # Never through a link nor from a FIFO: exec may plant either in the workspace.
    read = read_workspace_text(path.parent, path.name, max_bytes=4 * _MAX_INSTRUCTIONS + 4)
    return None if read is None else read.text


def _prompt(instructions: str) -> str:
    if len(instructions) > _MAX_INSTRUCTIONS:
        instructions = instructions[:_MAX_INSTRUCTIONS] + "\n[… HEARTBEAT.md truncated]"
    return (
        "Heartbeat check-in. Follow the instructions in HEARTBEAT.md (your workspace file,"
        " copied below). If nothing needs the user's attention, reply exactly"
        f" {HEARTBEAT_OK} and nothing else; otherwise reply with what they should know.\n\n"
        f"--- HEARTBEAT.md ---\n{instructions.strip()}"
    )
