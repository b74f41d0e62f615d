"""Peers: the group members ``sessions_spawn`` and ``agents_list`` can reach.

The tools live here, below group mode (`core.group`), which implements this and is
handed to the tools as a dependency when ``[group] enabled`` is on; without it there
are no peers and ``peer:<name>`` is a clear refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.tools.base import ToolContext

__all__ = ["PeerSpawn", "Peers"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerSpawn:
    """A ``sessions_spawn`` of ``peer:<name>``."""

    peer: str
    prompt: str
    description: str = ""
    mode: str = "sync"


class Peers:
    """The current group peers, and delegation to them (a base the tools look up by
    type; `core.group.delegate.GroupDelegation` is the one that does the work)."""

    async def listing(self, query: str | None) -> list[dict[str, Any]]:
        """The peers to list as agent types (``peer:<name>``), best matches first."""
        raise NotImplementedError

    async def spawn(self, ctx: ToolContext, request: PeerSpawn) -> dict[str, Any]:
        """Delegate a task; the peer's answer (sync) or the task's id (background).

        Raises:
            TaskRefused: no such peer, it is gone, or the request is not valid.
        """
        raise NotImplementedError
