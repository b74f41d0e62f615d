"""Memory consolidation by ``rem-agent``: the ``memory_consolidate`` tool and its service.

rem-agent runs as a subagent of the session whose memory it cleans. The scope it
works on is never an argument: it is read from the agent's own task record (its
parent's session key), so it cannot touch another session's entries. ``global`` is
written only when the operator allows it for the channel the chain started from
(``memory.consolidate_global_channels``) and ``memory.allow_global_writes`` is on.
Every change is recorded as a ``memory.consolidated`` event in that session.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from core.errors import MemoryRefused, ToolFailed, ToolRetry
from core.event_data import MemoryConsolidated
from core.events import Event, EventLog
from core.memory.service import GLOBAL, Caller, MemoryEntry, MemoryService
from core.sessions import SessionStore
from core.tasks.handoff import clip
from core.tasks.orchestration_agents import CONSOLIDATE_TOOL
from core.tasks.repository import TaskRepository
from core.tools.base import Tool, ToolContext
from core.tools.decorator import Dep, tool

__all__ = ["REM_AGENT", "Consolidator", "consolidation_tools", "memory_consolidate"]

log = logging.getLogger(__name__)

REM_AGENT = "rem-agent"
_ENTRIES = 200
_HISTORY = 40
_HISTORY_CHARS = 400


class Consolidator:
    """What ``memory_consolidate`` works with; the scope comes from the caller's record."""

    def __init__(
        self,
        *,
        memory: MemoryService,
        sessions: SessionStore,
        events: EventLog,
        tasks: TaskRepository,
        global_channels: Sequence[str] = (),
    ) -> None:
        self.memory = memory
        self._sessions = sessions
        self._events = events
        self._tasks = tasks
        self._global_channels = frozenset(global_channels)

    async def target(self, ctx: ToolContext) -> str:
        """The session whose memory ``ctx``'s agent consolidates.

        Raises:
            ToolFailed: the caller is not a rem-agent started by a session.
        """
        task = await self._tasks.by_child_key(ctx.session_key)
        if ctx.agent_type != REM_AGENT or task is None or task.agent_type != REM_AGENT:
            raise ToolFailed(f"{CONSOLIDATE_TOOL} is only for {REM_AGENT}")
        return task.owner_key

    def global_allowed(self, ctx: ToolContext) -> bool:
        return ctx.root_channel in self._global_channels and self.memory.config.allow_global_writes

    def scopes(self, ctx: ToolContext, owner: str) -> tuple[str, ...]:
        return (owner, GLOBAL) if self.global_allowed(ctx) else (owner,)

    async def overview(self, ctx: ToolContext) -> dict[str, Any]:
        owner = await self.target(ctx)
        entries: list[MemoryEntry] = []
        for scope in self.scopes(ctx, owner):
            entries += await self.memory.list(scope=scope, limit=_ENTRIES)
        entries.sort(key=lambda e: (e.created_at, e.id))
        seen: dict[str, int] = {}
        listed = []
        for entry in entries:
            norm = " ".join(entry.text.lower().split())
            item = {"id": entry.id, "scope": entry.scope, "text": entry.text, "tags": entry.tags}
            if norm in seen:
                item["duplicate_of"] = seen[norm]
            else:
                seen[norm] = entry.id
            listed.append(item)
        history = await self._sessions.all_history(owner, limit=_HISTORY)
        talk = [
            f"{m.role}: {clip(' '.join(m.content.split()), _HISTORY_CHARS)}"
            for m in history
            if m.role in ("user", "assistant") and m.content.strip()
        ]
        return {
            "session": owner,
            "writable_scopes": list(self.scopes(ctx, owner)),
            "entries": listed,
            "recent_conversation": talk,
        }

    async def _owned(self, ctx: ToolContext, owner: str, ids: Sequence[int]) -> list[MemoryEntry]:
        """The entries ``ids``, all in a scope this run may write (else nothing is done)."""
        if not ids:
            raise ToolRetry("give the ids of the entries (action=list shows them)")
        allowed = self.scopes(ctx, owner)
        found = []
        for entry_id in dict.fromkeys(ids):
            entry = await self.memory.get(entry_id)
            if entry is None or entry.scope not in allowed:
                # Another scope's entry is answered like a missing one (as forget does).
                raise ToolRetry(f"there is no memory #{entry_id} in this session's scope")
            if entry.path is not None:
                raise ToolRetry(f"memory #{entry_id} is indexed from {entry.path}: leave it")
            found.append(entry)
        return found

    async def change(
        self,
        ctx: ToolContext,
        action: Literal["merge", "drop", "add"],
        ids: Sequence[int],
        text: str | None,
        reason: str | None,
        scope: Literal["session", "global"],
    ) -> dict[str, Any]:
        owner = await self.target(ctx)
        entries = [] if action == "add" else await self._owned(ctx, owner, ids)
        if action == "merge" and len(entries) < 2:
            raise ToolRetry("merge needs the ids of at least two entries")
        added = None
        target = owner
        if action in ("merge", "add"):
            if not text or not text.strip():
                raise ToolRetry(f"{action} needs the text of the entry to keep")
            if scope == "global" or (entries and all(e.scope == GLOBAL for e in entries)):
                if not self.global_allowed(ctx):
                    raise ToolRetry(
                        "global memory is not writable from here "
                        "(memory.consolidate_global_channels): use scope=session"
                    )
                target = GLOBAL
            tags = sorted({t for e in entries for t in e.tags})[: self.memory.config.max_tags]
            try:
                caller = Caller(owner, top_level=target == GLOBAL)
                new = await self.memory.remember(
                    caller, text, tags=tags, scope=target, source=f"{REM_AGENT}:{ctx.session_key}"
                )
            except MemoryRefused as exc:
                raise ToolRetry(str(exc)) from None
            added = new.id
        for entry in entries:
            await self.memory.delete_any(entry.id)
        removed = [e.id for e in entries]
        data = MemoryConsolidated(
            action={"merge": "merged", "drop": "dropped", "add": "added"}[action],
            scope=target,
            removed=removed,
            added=added,
            reason=reason,
        )
        await self._events.append(Event(session_key=owner, data=data))
        log.info(
            "memory consolidated session=%s action=%s removed=%s added=%s",
            owner,
            data.action,
            removed,
            added,
        )
        return {"action": data.action, "scope": target, "removed": removed, "added": added}


@tool(name=CONSOLIDATE_TOOL)
async def memory_consolidate(
    ctx: ToolContext,
    consolidator: Dep[Consolidator],
    action: Literal["list", "merge", "drop", "add"],
    ids: list[int] | None = None,
    text: str | None = None,
    reason: str | None = None,
    scope: Literal["session", "global"] = "session",
) -> dict[str, Any]:
    """Consolidate the memory of the session that started you (rem-agent only).
    list: its memory entries (exact duplicates flagged) and recent conversation.
    merge: replace the entries ids by one entry with text. drop: delete the entries ids
    (say why in reason: e.g. a newer entry contradicts them). add: remember text.

    Args:
        action: list, merge, drop or add.
        ids: The entries to merge or drop.
        text: The merged entry's text (merge) or the new entry's (add).
        reason: Why (recorded with the change).
        scope: session (default) or global, where the operator allows it.
    """
    if action == "list":
        return await consolidator.overview(ctx)
    return await consolidator.change(ctx, action, ids or [], text, reason, scope)


def consolidation_tools() -> list[Tool]:
    """The ``memory_consolidate`` tool (needs a Consolidator in the tool deps)."""
    return [memory_consolidate]
