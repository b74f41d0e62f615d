"""Live page parts for state the control API can only be asked about: poll, push changes.

Approvals, schedules, tasks and processes change in the store or in other processes,
where no event reaches the HTTP process; a stream asks the control API every few
seconds and sends a ``replace`` event only when the rendered fragment changed (a comment
line now and then keeps the stream open).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.control.client import ControlError, DaemonUnavailable
from gateway.ui.routes import EventStream

__all__ = ["LIVE_EVERY", "push_changes", "push_views"]

log = logging.getLogger(__name__)

_KEEPALIVE = 15.0
LIVE_EVERY = 2.0
"""Seconds between two looks of a live part (approvals, schedules, the process table)."""


async def push_changes(
    stream: EventStream,
    render: Callable[[], Awaitable[str]],
    failed: Callable[[str], str],
    *,
    every: float = LIVE_EVERY,
) -> None:
    """Send ``render()`` as a ``replace`` event whenever it differs from the last one.

    Args:
        stream: the browser's event stream (this returns when the gateway stops; the
            browser leaving ends it with ConnectionResetError).
        render: the fragment, from fresh control API answers.
        failed: the fragment saying why the control API did not answer.
        every: seconds between looks.
    """

    async def view() -> tuple[str, bool]:
        try:
            return await render(), False
        except (ControlError, DaemonUnavailable) as exc:
            log.warning("ui live view could not read the control API: %s", exc)
            return failed(str(exc)), False

    await push_views(stream, view, every=every)


async def push_views(
    stream: EventStream, view: Callable[[], Awaitable[tuple[str, bool]]], *, every: float
) -> None:
    """Send ``view()``'s fragment as a ``replace`` event whenever it changed, until the
    view says it is the last one (then ``close``) or the gateway stops.

    Args:
        stream: the browser's event stream.
        view: the fragment, and whether nothing will change any more.
        every: seconds between looks.
    """
    last: str | None = None
    quiet = 0.0
    while True:
        html, final = await view()
        if html != last:
            await stream.send("replace", html)
            last, quiet = html, 0.0
        elif quiet >= _KEEPALIVE:
            await stream.keepalive()
            quiet = 0.0
        if final:
            await stream.send("close")
            return
        if not await stream.wait(every):
            return  # the gateway is stopping
        quiet += every
