"""Replies no channel can deliver: refused when asked for, shown while pending, expired.

- **Refused at creation**: a schedule made for a session from outside it (``familiar
  schedule add --session KEY``) must name a session whose replies a running channel
  can deliver: an enabled channel whose config accepts the delivery
  (`ChannelConfig.delivery_problem`: Teams needs a stored conversation reference,
  Slack a conversation id).
- **Shown**: pending replies of channels that are not enabled (disabled since, or not
  installed) are counted per channel for ``familiar status`` (``undelivered``) and
  ``doctor``.
- **Expired**: after ``delivery.expire_after`` seconds they are given up on, each with a
  ``delivery.failed`` event; the control API's process sweeps (the one serving status).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from core.app import CORE_CHANNELS
from core.bus.stranded import StrandedReplies
from core.messages import Delivery
from core.store.engine import Store
from gateway.config import ChannelsConfig, FamiliarConfig

__all__ = ["delivery_check", "stranded_reason", "sweep_stranded", "undelivered_report"]

log = logging.getLogger(__name__)

_LONGEST_SWEEP_GAP = 60.0
"""Seconds between two sweeps at most (a shorter ``expire_after`` sweeps more often)."""


def delivering(channels: ChannelsConfig) -> frozenset[str]:
    """The channels whose replies something delivers: the enabled ones and core's own."""
    return frozenset(channels.enabled()) | CORE_CHANNELS


def stranded_reason(channels: ChannelsConfig, channel: str) -> str:
    """Why nothing delivers ``channel``'s replies."""
    if channel in channels.installed():
        return f"the {channel} channel is not enabled ([channels.{channel}] enabled = false)"
    return f"no channel named {channel!r} is installed"


def delivery_check(channels: ChannelsConfig) -> Callable[[str, Delivery], str | None]:
    """Why a reply for session ``key`` with ``delivery`` could not be delivered (None: it
    can be tried), for what addresses a session from outside it."""

    def problem(key: str, delivery: Delivery) -> str | None:
        name = delivery.channel
        if name in CORE_CHANNELS:
            return None
        config = channels.enabled().get(name)
        if config is None:
            why: str | None = stranded_reason(channels, name)
        else:
            why = config.delivery_problem(delivery)
        return None if why is None else f"replies to {key} could not be delivered: {why}"

    return problem


async def undelivered_report(store: Store, config: FamiliarConfig) -> list[dict[str, Any]]:
    """``familiar status``'s ``undelivered``: per channel nothing delivers, its pending
    replies (``count``), the oldest's time (``oldest_at``), ``reason`` and when that
    one is given up on (``expires_at``)."""
    found = await StrandedReplies(store=store).stranded(delivering(config.channels))
    return [
        {
            "channel": s.channel,
            "count": s.count,
            "oldest_at": s.oldest_at,
            "reason": stranded_reason(config.channels, s.channel),
            "expires_at": s.oldest_at + config.delivery.expire_after,
        }
        for s in found
    ]


def sweep_stranded(
    store: Store, config: FamiliarConfig
) -> Callable[[web.Application], AsyncIterator[None]]:
    """An aiohttp ``cleanup_ctx`` that gives up on expired stranded replies while the
    app serves: at start, then every tenth of ``delivery.expire_after`` (at most 60 s)."""
    expire_after = config.delivery.expire_after
    channels = config.channels
    stranded = StrandedReplies(store=store)

    def reason(channel: str) -> str:
        return f"not delivered within {expire_after:g}s: {stranded_reason(channels, channel)}"

    async def sweep() -> None:
        while True:
            try:
                given_up = await stranded.expire(
                    delivering(channels), older_than=expire_after, reason=reason
                )
            except Exception:
                log.exception("giving up on undeliverable replies failed; retrying")
            else:
                if given_up:
                    log.warning("undeliverable replies given up count=%d", given_up)
            await asyncio.sleep(min(_LONGEST_SWEEP_GAP, expire_after / 10))

    async def context(_app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(sweep(), name="sweep-undelivered")
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    return context
