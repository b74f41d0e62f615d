"""Where an agent turn meets the hooks: prompt, each tool call, the stop, errors."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from core.bus.sql import SqlBus
from core.commands import CommandHandler, CommandRouter
from core.event_data import EventPayload
from core.events import Event, EventLog
from core.messages import InboundMessage
from core.providers.base import ToolCall
from core.tools.base import ToolContext
from core.tools.registry import ToolExecutor, ToolResult

from .dialects import Facts
from .names import HookEvent
from .service import HookOutcome, Hooks, Pending, facts_of

__all__ = ["HookedTools", "TurnHooks", "session_end_on_new"]

log = logging.getLogger(__name__)

Record = Callable[[EventPayload], Awaitable[None]]
"""Appends an event to the turn's session log (the turn's observer)."""
_TOOL_EVENTS = (HookEvent.PRE_TOOL_USE, HookEvent.POST_TOOL_USE, HookEvent.POST_TOOL_USE_FAILURE)


async def _record_all(record: Record, outcome: HookOutcome) -> None:
    for event in outcome.events:
        await record(event)


class HookedTools:
    """A `ToolExecutor` running ``preToolUse`` / ``postToolUse`` hooks around each call.

    A denying (or failing) ``preToolUse`` hook refuses the call with its reason as the
    tool result; one answering new arguments makes the tool run with those. A call that
    fails fires ``postToolUseFailure`` instead of ``postToolUse`` (as in both formats).
    """

    def __init__(
        self, *, tools: ToolExecutor, hooks: Hooks, record: Record, pending: Pending | None = None
    ) -> None:
        self._tools = tools
        self._hooks = hooks
        self._record = record
        self._pending = pending

    def parallel_safe(self, name: str) -> bool:
        return self._tools.parallel_safe(name)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        loaded = await self._hooks.current()
        if not any(loaded.for_event(e) for e in _TOOL_EVENTS):
            return await self._tools.execute(call, ctx)  # no tool hook: nothing to build
        facts = dataclasses.replace(
            facts_of(ctx), tool_name=call.name, tool_args=call.arguments, call_id=call.id
        )
        pending = self._pending
        pre = await self._hooks.fire(
            HookEvent.PRE_TOOL_USE, facts, subject=call.name, pending=pending
        )
        await _record_all(self._record, pre)
        if pre.block is not None:
            log.info("tool call denied by a hook tool=%s call=%s", call.name, call.id)
            content = f"error: denied by a preToolUse hook: {pre.block}"
            return ToolResult(call_id=call.id, name=call.name, content=content, is_error=True)
        if pre.args is not None:
            log.info("tool arguments rewritten by a hook tool=%s call=%s", call.name, call.id)
            call = call.model_copy(update={"arguments": pre.args})
        result = await self._tools.execute(call, ctx)
        facts = dataclasses.replace(facts, tool_args=call.arguments, tool_result=result.content)
        after = HookEvent.POST_TOOL_USE_FAILURE if result.is_error else HookEvent.POST_TOOL_USE
        post = await self._hooks.fire(after, facts, subject=call.name, pending=pending)
        await _record_all(self._record, post)
        if post.context:
            extra = post.context_text
            result = dataclasses.replace(result, content=f"{result.content}\n\n[hook] {extra}")
        return result


class TurnHooks:
    """The hook points of one agent turn (one claimed message).

    With ``hooks=None`` (``hooks.enabled = false``) every point does nothing, at once;
    a point no hook is loaded for builds nothing either (most turns of most gateways).
    """

    def __init__(
        self,
        *,
        hooks: Hooks | None,
        message: InboundMessage,
        ctx: ToolContext,
        record: Record,
        publisher: SqlBus,
        pending: Pending | None = None,
    ) -> None:
        """
        Args:
            pending: the turn's events not in the event log yet (for transcripts).
        """
        self._hooks = hooks
        self._pending = pending
        self._message = message
        self._record = record
        self._publisher = publisher
        self._ctx = ctx
        self._base: Facts | None = None
        self._context: list[str] = []

    @property
    def _facts(self) -> Facts:
        """The facts every event of the turn shares (made at the first event that fires)."""
        if self._base is None:
            self._base = facts_of(self._ctx)
        return self._base

    async def _wanted(self, event: HookEvent) -> bool:
        """Whether a hook is loaded for ``event`` (else firing it would do nothing)."""
        return self._hooks is not None and bool((await self._hooks.current()).for_event(event))

    async def prompt(self, *, fresh: bool, epoch: int) -> str | None:
        """``sessionStart`` (first message of a session or after ``/new``), then
        ``userPromptSubmitted``. Returns the block reason (the reply), or None."""
        if self._hooks is None:
            return None
        prompt = self._message.text
        if fresh and await self._wanted(HookEvent.SESSION_START):
            source = "startup" if epoch == 0 else "new"
            facts = dataclasses.replace(
                self._facts, source=source, prompt=prompt, model=self._hooks.model
            )
            start = await self._hooks.fire(
                HookEvent.SESSION_START, facts, subject=source, pending=self._pending
            )
            await _record_all(self._record, start)
            self._context += start.context
        if not await self._wanted(HookEvent.USER_PROMPT_SUBMITTED):
            return None
        facts = dataclasses.replace(self._facts, prompt=prompt)
        submitted = await self._hooks.fire(
            HookEvent.USER_PROMPT_SUBMITTED, facts, pending=self._pending
        )
        await _record_all(self._record, submitted)
        self._context += submitted.context
        return submitted.block

    def system(self, system: str) -> str:
        """The system prompt with the context the prompt hooks added."""
        if not self._context:
            return system
        return system + "\n\n## Context from hooks\n\n" + "\n\n".join(self._context)

    def tools(self, tools: ToolExecutor) -> ToolExecutor:
        """``tools`` running the tool hooks around each call."""
        if self._hooks is None:
            return tools
        return HookedTools(
            tools=tools, hooks=self._hooks, record=self._record, pending=self._pending
        )

    async def stopped(self, *, text: str, stop: str) -> None:
        """``agentStop``: a block enqueues its reason as a ``system`` message of the session
        (another turn), at most ``hooks.max_consecutive_blocks`` times in a row."""
        if self._hooks is None:
            return
        m = self._message
        done = m.hook_stop_blocks
        cap = self._hooks.config.max_consecutive_blocks
        if done >= cap:
            log.info("agentStop hooks not asked: %d blocks in a row (the cap)", done)
            return
        if not await self._wanted(HookEvent.AGENT_STOP):
            return
        facts = dataclasses.replace(
            self._facts, stop_reason=stop, stop_hook_active=done > 0, last_message=text
        )
        outcome = await self._hooks.fire(HookEvent.AGENT_STOP, facts, pending=self._pending)
        await _record_all(self._record, outcome)
        if outcome.block is None:
            return
        follow = InboundMessage(
            session_key=m.session_key,
            text=outcome.block,
            delivery=m.delivery,
            sender="hook:agentStop",
            origin="system",
            event_id=f"{m.id}:agentStop",  # a rerun of this turn does not enqueue it twice
            autopilot=m.autopilot,
            hook_stop_blocks=done + 1,
        )
        await self._publisher.publish_inbound(follow)
        log.info("agentStop hook blocked: another turn follows message_id=%s", follow.id)

    async def failed(self, error: str, kind: str) -> None:
        """``errorOccurred`` (fire and forget: its answer changes nothing)."""
        if self._hooks is None or not await self._wanted(HookEvent.ERROR_OCCURRED):
            return
        facts = dataclasses.replace(self._facts, error=error, error_kind=kind)
        outcome = await self._hooks.fire(HookEvent.ERROR_OCCURRED, facts, pending=self._pending)
        await _record_all(self._record, outcome)


def session_end_on_new(
    commands: CommandRouter, hooks: Hooks, workspace: Path, events: EventLog
) -> None:
    """Fire ``sessionEnd`` (reason ``new``: Copilot's ``user_exit``, Claude's ``clear``)
    when ``/new`` ends a session's context."""

    def wrapper(handler: CommandHandler) -> CommandHandler:
        async def new(message: InboundMessage, args: str) -> str:
            ctx = ToolContext(
                workspace=workspace,
                session_key=message.session_key,
                channel=message.delivery.channel,
                message_id=message.id,
                message=message,
            )
            outcome = await hooks.session_end(ctx=ctx, reason="new")
            if outcome.events:
                await events.append(
                    *(
                        Event(session_key=message.session_key, message_id=message.id, data=e)
                        for e in outcome.events
                    )
                )
            return await handler(message, args)

        return new

    commands.wrap("new", wrapper)
