"""The subagent tools: ``sessions_spawn``, ``subagents`` and ``agents_list`` (public names)."""

from __future__ import annotations

from typing import Any, Literal

from core.agent.agents_section import rank
from core.errors import TaskNotFound, TaskRefused, ToolFailed, ToolRetry
from core.tasks.handoff import clip
from core.tasks.peers import Peers, PeerSpawn
from core.tasks.records import PEER_PREFIX
from core.tasks.registry import SpawnRequest, TaskRegistry
from core.tools.base import Tool, ToolContext
from core.tools.decorator import Dep, tool

__all__ = ["agents_list", "sessions_spawn", "subagent_tools", "subagents"]


@tool
async def sessions_spawn(
    ctx: ToolContext,
    registry: Dep[TaskRegistry],
    agent_type: str,
    prompt: str,
    description: str | None = None,
    name: str | None = None,
    mode: Literal["sync", "background"] = "sync",
    model: str | None = None,
) -> dict[str, Any]:
    """Start a subagent on a self-contained task; it does not see this conversation.

    sync (default) waits and returns its result; background returns its agent_id at once
    and its result arrives later as a handoff message. Several spawns in one response
    run at the same time. The system prompt lists agent types; agents_list with a
    query finds the others (and the group's peers, peer:<name>: other assistants).

    Args:
        agent_type: The kind of agent (general-purpose, explore, task, rubber-duck, a
            custom one, or peer:<name> for another assistant of the group).
        prompt: Everything the subagent needs to know to do the task.
        description: A few words on what it does (shown in lists).
        name: Give it a name to keep it for more turns (subagents send wakes it).
        mode: sync (wait for the result) or background (return at once).
        model: A model to use instead of the agent's (an id, or an alias of [models]).
    """
    if agent_type.startswith(PEER_PREFIX):
        peers = ctx.deps.get(Peers)
        if peers is None:
            raise ToolRetry(f"{agent_type!r}: group mode is off here, so there are no peers")
        spawn = PeerSpawn(
            peer=agent_type.removeprefix(PEER_PREFIX),
            prompt=prompt,
            description=description or "",
            mode=mode,
        )
        try:
            return await peers.spawn(ctx, spawn)
        except TaskRefused as exc:
            raise ToolFailed(str(exc)) from None
    request = SpawnRequest(
        owner_key=ctx.session_key,
        owner_depth=ctx.depth,
        agent_type=agent_type,
        prompt=prompt,
        description=description or "",
        name=name,
        mode=mode,
        model=model,
        parent=ctx.message,
    )
    try:
        task, _new = await registry.spawn(request)
    except TaskRefused as exc:
        raise ToolRetry(str(exc)) from None
    if task.mode == "background":
        return {"agent_id": task.id, "agent_type": task.agent_type, "status": task.status}
    outcome = await registry.wait(task, capacity=ctx.capacity)
    return outcome.as_json(registry.config.result_max_chars)


@tool
async def subagents(
    ctx: ToolContext,
    registry: Dep[TaskRegistry],
    action: Literal["list", "read", "send", "cancel"],
    agent_id: str | None = None,
    message: str | None = None,
    wait: bool = False,
) -> Any:
    """Manage the subagents this conversation started.

    list: all of them with status; read: one agent's status, progress and latest result;
    send: another message to a running or idle agent (wait=true returns its answer,
    else it arrives as a handoff); cancel: stop it and every agent it started.

    Args:
        action: list, read, send or cancel.
        agent_id: The agent's id (or name), for read, send and cancel.
        message: The text to send (send only).
        wait: send only: wait for the answer instead of getting it as a handoff.
    """
    limit = registry.config.result_max_chars
    if action == "list":
        tasks = await registry.repo.list(owner_key=ctx.session_key, limit=50)
        return [t.as_json() for t in tasks]
    if not agent_id:
        raise ToolRetry(f"action {action!r} needs agent_id")
    try:
        task = await registry.owned(ctx.session_key, agent_id)
        if action == "read":
            found = task.as_json()
            found["result"] = clip(task.result, limit) if task.result else None
            return found
        if action == "cancel":
            cancelled = await registry.cancel(task.id, reason="cancelled by its parent")
            if not cancelled:
                return f"agent {task.id} had already finished ({task.status})."
            return f"cancelled {', '.join(t.id for t in cancelled)}."
        if not message:
            raise ToolRetry("action 'send' needs a message")
        sent = await registry.send(ctx.session_key, task.id, message, wait=wait)
    except TaskNotFound as exc:
        raise ToolRetry(str(exc)) from None
    except TaskRefused as exc:
        raise ToolFailed(str(exc)) from None
    if not wait:
        return {"agent_id": sent.id, "status": "running"}
    outcome = await registry.wait(sent, capacity=ctx.capacity)
    return outcome.as_json(limit)


@tool
async def agents_list(
    ctx: ToolContext, registry: Dep[TaskRegistry], query: str | None = None, limit: int = 30
) -> dict[str, Any]:
    """The agent types sessions_spawn can start: id, description, tools, memory mode.

    The built-in ones, then the custom ones best matching query (words of the task: a
    language, a framework, a kind of work) first; without a query, by name. In group
    mode, the group's current peers follow as peer:<name> (other assistants).

    Args:
        query: Words to match against the agents' names and descriptions; only
            matching custom agents are listed.
        limit: At most this many agents (1-200).
    """
    limit = max(1, min(limit, 200))
    agents = await registry.catalog.agents()
    listing = await registry.catalog.listing()
    ranked = rank(listing, query)
    if query and query.strip():
        ranked = [(agent, score) for agent, score in ranked if score > 0]
    chosen = [a.name for a in listing if a.group == 0] + [a.name for a, _ in ranked]
    default = registry.config.memory_share_mode
    listed = []
    for name in chosen[:limit]:
        spec = agents.get(name)
        if spec is None:
            continue  # the files changed between the two reads
        item = spec.as_json()
        item["memory_share_mode"] = spec.memory_share_mode or default
        listed.append(item)
    peers = ctx.deps.get(Peers)
    found_peers = await peers.listing(query) if peers is not None else []
    shown_peers = found_peers[: max(0, limit - len(listed))]
    listed.extend(shown_peers)
    found: dict[str, Any] = {"agents": listed, "total": len(agents) + len(found_peers)}
    more = max(0, len(chosen) - limit) + len(found_peers) - len(shown_peers)
    if more:
        found["more"] = f"{more} more match; narrow the query or raise the limit"
    return found


def subagent_tools() -> list[Tool]:
    """The three subagent tools (they need a TaskRegistry in the tool deps)."""
    return [sessions_spawn, subagents, agents_list]
