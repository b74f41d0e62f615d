"""One message through the control API and what came back (send, chat, MCP send_message)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

from gateway.control.client import ControlClient, DaemonUnavailable
from gateway.control.protocol import (
    Accepted,
    DeltaLine,
    ProgressLine,
    ReplyLine,
    StreamLine,
    TimeoutLine,
)

__all__ = ["Outcome", "converse", "no_reply_text"]


@dataclass
class Outcome:
    """What one POST /v1/messages produced."""

    message_id: str | None = None
    final: ReplyLine | TimeoutLine | None = None
    deltas: list[str] = field(default_factory=list)
    lost: str | None = None
    """Why the connection ended after the message was accepted, with no reply."""

    @property
    def streamed(self) -> str:
        return "".join(self.deltas)

    @property
    def reply(self) -> dict[str, str] | None:
        if not isinstance(self.final, ReplyLine):
            return None
        return {"kind": self.final.kind, "text": self.final.text, "format": self.final.format}

    @property
    def queued(self) -> bool:
        """Accepted, and neither answered nor waited for: the gateway stopped, or the
        connection to it was lost (the message is answered once it runs again)."""
        stopping = isinstance(self.final, TimeoutLine) and self.final.reason == "stopping"
        return self.reply is None and (stopping or self.lost is not None)

    @property
    def status(self) -> str:
        """``done``, ``failed`` (an error reply), ``timeout`` (no reply in time) or
        ``queued`` (see `queued`)."""
        reply = self.reply
        if reply is None:
            return "queued" if self.queued else "timeout"
        return "done" if reply["kind"] == "reply" else "failed"


async def converse(
    client: ControlClient,
    key: str,
    text: str,
    *,
    stream: bool,
    wait: float | None,
    on_delta: Callable[[str], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> Outcome:
    """Send ``text`` to session ``key`` and collect what comes back.

    Args:
        client: an open control client.
        key: the session key, e.g. ``cli:default``.
        text: the message.
        stream: ask for deltas and progress notes.
        wait: seconds the gateway waits for the reply; None waits as long as it takes.
        on_delta: called with each piece of the streaming reply.
        on_progress: called with each progress note.

    Raises:
        DaemonUnavailable: no gateway took the message (once it has, a lost connection
            is `Outcome.lost`).
    """
    outcome = Outcome()
    items = client.send(key, text, stream=stream, timeout=wait)
    try:
        await _collect(items, outcome, on_delta, on_progress)
    except DaemonUnavailable as exc:
        if outcome.message_id is None:
            raise
        outcome.lost = str(exc)
    return outcome


async def _collect(
    items: AsyncGenerator[StreamLine, None],
    outcome: Outcome,
    on_delta: Callable[[str], None] | None,
    on_progress: Callable[[str], None] | None,
) -> None:
    async with contextlib.aclosing(items):
        async for item in items:
            if isinstance(item, Accepted):
                outcome.message_id = item.message_id
            elif isinstance(item, DeltaLine):
                outcome.deltas.append(item.text)
                if on_delta is not None:
                    on_delta(item.text)
            elif isinstance(item, ProgressLine):
                if on_progress is not None:
                    on_progress(item.text)
            else:
                outcome.final = item


def no_reply_text(outcome: Outcome, key: str, wait: float | None) -> str:
    """What to say when the wait for a reply ended without one."""
    see = f"see: familiar sessions show {key} --events"
    if outcome.lost is not None:
        return (
            f"the connection to the gateway was lost; message {outcome.message_id} stays "
            f"queued and will be answered once the gateway runs again ({see})"
        )
    if outcome.queued:
        return (
            f"the gateway is stopping; message {outcome.message_id} stays queued and will "
            f"be answered after it restarts ({see})"
        )
    return f"no reply within {wait or 0:g} s; message {outcome.message_id} stays queued ({see})"
