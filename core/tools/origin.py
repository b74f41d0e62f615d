"""Where a tool call's conversation started: the root of a chain of subagents.

A subagent's own session says little about who asked for it: its channel is always
``subagent``. What matters for trust is the session at the top of the chain, and the
channel its message came in on. One lookup answers that (`SessionRoots`, implemented in
``core.tasks.roots``); `root_of` is the single place tools ask it.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from .base import ToolContext

__all__ = ["LOCAL_CHANNEL", "SessionRoot", "SessionRoots", "is_local", "root_of"]

LOCAL_CHANNEL = "cli"
"""The channel of the operator's own terminal (``familiar chat`` / ``send``)."""


class SessionRoot(NamedTuple):
    """The session at the top of a chain, and the channel its message came in on."""

    session_key: str
    channel: str


class SessionRoots(Protocol):
    """Follows ``subagent:`` sessions up to the session that started the chain."""

    async def root(self, session_key: str, channel: str) -> SessionRoot:
        """The root of ``session_key`` (itself when it is no subagent); a chain that
        cannot be followed ends at the last session found, never at a guess."""
        ...


async def root_of(ctx: ToolContext, roots: SessionRoots | None) -> SessionRoot:
    """The root session of the call in ``ctx``; without a lookup, the session itself."""
    if roots is None:
        return SessionRoot(ctx.session_key, ctx.channel)
    return await roots.root(ctx.session_key, ctx.channel)


def is_local(root: SessionRoot) -> bool:
    """Whether the chain started in the operator's terminal (a ``cli:`` session, on the
    CLI channel): not Slack, Teams, a webhook, a heartbeat or an unknown subagent."""
    return root.channel == LOCAL_CHANNEL and root.session_key.startswith(LOCAL_CHANNEL + ":")
