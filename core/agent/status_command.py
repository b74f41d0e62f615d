"""``/status``: this conversation at a glance (running or idle, queued, context, model)."""

from __future__ import annotations

from collections.abc import Callable

from core.bus.sql import SqlBus
from core.commands import CommandRouter
from core.messages import InboundMessage
from core.sessions import SessionStore

__all__ = ["register_status_command", "status_text"]


def status_text(
    *, session_key: str, messages: int, epoch: int, running: int, queued: int, provider: str
) -> str:
    """The ``/status`` answer: what this conversation is doing, in user terms."""
    state = "a reply is being worked on (/stop stops it)" if running else "idle"
    waiting = f"{queued} message{'' if queued == 1 else 's'} queued" if queued else "none queued"
    return (
        f"session {session_key} · {messages} message{'' if messages == 1 else 's'}\n"
        f"now: {state} · {waiting}\n"
        f"context #{epoch}: the model sees what was said since the last /new "
        f"(/new starts #{epoch + 1})\n"
        f"provider {provider}"
    )


def register_status_command(
    commands: CommandRouter,
    *,
    sessions: SessionStore,
    queue: SqlBus,
    provider: Callable[[], str | None],
) -> None:
    """Register ``/status`` (a control command: it answers while a turn runs).

    Args:
        commands: the router.
        sessions: the session rows (message count, context number).
        queue: the bus's lookups: this session's queued and running messages, in
            whichever process they run.
        provider: the name of the model in use (None: none configured).
    """

    async def status(message: InboundMessage, _args: str) -> str:
        row = await sessions.get(message.session_key)
        counts = await queue.queue_counts(message.session_key)
        # This /status is itself queued or claimed: it does not count.
        own = (await queue.message_states([message.id])).get(message.id)
        pending = counts.pending - (own == "pending")
        claimed = counts.claimed - (own == "claimed")
        return status_text(
            session_key=message.session_key,
            messages=row.message_count if row else 0,
            epoch=row.epoch if row else 0,
            running=max(0, claimed),
            queued=max(0, pending),
            provider=provider() or "none configured",
        )

    commands.register(
        "status",
        status,
        usage="/status",
        summary="this conversation: running or idle, queued messages, context, model",
    )
