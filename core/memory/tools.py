"""The memory tools: ``remember``, ``recall`` and ``forget`` (public names and arguments)."""

from __future__ import annotations

from core.errors import MemoryRefused, ToolFailed, ToolRetry
from core.memory.service import Caller, MemoryService, ReadScope, WriteScope
from core.tools.base import Tool, ToolContext
from core.tools.decorator import Dep, tool

__all__ = ["caller_of", "forget", "memory_tools", "recall", "remember"]


def caller_of(ctx: ToolContext) -> Caller:
    """Who a tool context is to memory: its scope, whether a subagent, what it also reads."""
    return Caller.of(ctx.session_key, depth=ctx.depth, read_also=ctx.read_scopes)


@tool
async def remember(
    ctx: ToolContext,
    memory: Dep[MemoryService],
    text: str,
    tags: list[str] | None = None,
    scope: WriteScope = "session",
) -> str:
    """Remember a fact, preference or decision for later conversations.

    Returns the new entry's id. Keep one fact per entry, in words you would search for.

    Args:
        text: What to remember (plain text).
        tags: Optional short labels (at most 20), e.g. ["preference", "travel"].
        scope: session (default: only this conversation sees it) or global (every
            conversation sees it).
    """
    try:
        entry = await memory.remember(
            caller_of(ctx),
            text,
            tags=tags or (),
            scope=scope,
            source=f"message:{ctx.message_id}" if ctx.message_id else None,
        )
    except MemoryRefused as exc:
        raise ToolRetry(str(exc)) from None
    return f"Remembered as #{entry.id} ({entry.scope})."


@tool
async def recall(
    ctx: ToolContext,
    memory: Dep[MemoryService],
    query: str,
    limit: int = 5,
    scope: ReadScope = "all",
) -> list[dict[str, object]]:
    """Search what was remembered; best matches first.

    Args:
        query: A few keywords to look for.
        limit: How many matches to return (1 to 50).
        scope: session (this conversation), global, or all (this conversation and global).
    """
    if not 1 <= limit <= 50:
        raise ToolRetry("limit must be between 1 and 50")
    try:
        found = await memory.recall(caller_of(ctx), query, limit=limit, scope=scope)
    except MemoryRefused as exc:
        raise ToolRetry(str(exc)) from None
    return [
        {"id": e.id, "scope": e.scope, "text": e.text, "tags": list(e.tags), "date": d}
        for e in found
        for d in [e.as_json()["date"]]
    ]


@tool
async def forget(ctx: ToolContext, memory: Dep[MemoryService], id: int) -> str:
    """Delete a remembered entry by its id (as remember or recall gave it).

    Args:
        id: The entry's id.
    """
    try:
        entry = await memory.forget(caller_of(ctx), id)
    except MemoryRefused as exc:
        raise ToolFailed(str(exc)) from None
    return f"Forgot #{entry.id}."


def memory_tools() -> list[Tool]:
    """The three memory tools (they need a MemoryService in the tool deps)."""
    return [remember, recall, forget]
