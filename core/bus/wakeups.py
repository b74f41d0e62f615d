"""Wake-ups between processes: what one process tells the others after a commit.

The bus and the store are the only shared state between the gateway's role processes;
a wake-up carries no data that matters for correctness (every reader re-reads the
store, and polls as a fallback). It only saves the poll's latency.

A wake-up is a ``topic`` and a short ``data`` string:

- ``inbound``: something may be claimable (a publish, a settle, a release);
- ``outbound`` with a channel name: that channel may have a reply to deliver;
- ``reply`` with an inbound message id: its final reply was stored;
- ``schedules``: schedule rows changed (the scheduler re-reads them);
- ``sub`` / ``unsub`` with a message id, ``eph`` with a JSON ephemeral: the
  ephemeral relay (`core.bus.ephemeral.EphemeralHub.connect`);
- ``metric``: a measurement for the process that serves ``/metrics``.

`core.bus.wake_socket.SocketWakeups` implements it on one host (a Unix datagram
socket per process, for SQLite), `core.bus.wake_pg.PgWakeups` across hosts
(PostgreSQL ``LISTEN``/``NOTIFY``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["Handler", "WakeupService", "Wakeups"]

Handler = Callable[[str, str], None]
"""Called with ``(data, sender)`` for each wake-up of a topic; ``sender`` names the peer."""


class Wakeups(Protocol):
    """Fire-and-forget notes to the other processes sharing the bus."""

    def announce(self, *notes: tuple[str, str]) -> None:
        """Send ``(topic, data)`` notes to every other process; never blocks or raises."""
        ...

    def send_to(self, peer: str, *notes: tuple[str, str]) -> bool:
        """Send notes to one peer (a ``sender`` a handler was given); False if it is gone."""
        ...

    def on(self, topic: str, handler: Handler) -> None:
        """Call ``handler`` for every note of ``topic`` from another process."""
        ...


class WakeupService(Wakeups, Protocol):
    """A `Wakeups` implementation with its lifecycle (what the composition root holds)."""

    async def start(self) -> None:
        """Start listening (and say hello: peers learn about this process)."""
        ...

    async def stop(self) -> None:
        """Send what is queued, stop listening."""
        ...
