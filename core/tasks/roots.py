"""The session that started a chain of subagents (`core.tools.origin.SessionRoots`)."""

from __future__ import annotations

from core.messages import Delivery
from core.tasks.profiles import SUBAGENT_PREFIX
from core.tasks.repository import TaskRepository
from core.tools.origin import SessionRoot

__all__ = ["TaskRoots"]

_MAX_HOPS = 64
"""More than any ``tools.subagents.max_depth``: a longer chain is a loop in the records."""


class TaskRoots:
    """Walks ``subagent:`` sessions up through their task records (one read per level).

    A child's record keeps its parent's session (``owner_key``) and the delivery of the
    message that spawned it, so the top record names the root session and its channel.
    A record that is missing, or a chain that loops, ends the walk at the ``subagent:``
    session reached, which is no local session: callers that trust the root refuse.
    """

    def __init__(self, repo: TaskRepository) -> None:
        self._repo = repo

    async def root(self, session_key: str, channel: str) -> SessionRoot:
        found = SessionRoot(session_key, channel)
        for _ in range(_MAX_HOPS):
            if not found.session_key.startswith(SUBAGENT_PREFIX):
                return found
            task = await self._repo.by_child_key(found.session_key)
            if task is None:
                return found
            parent = Delivery.model_validate_json(task.delivery)
            found = SessionRoot(task.owner_key, parent.channel)
        return found
