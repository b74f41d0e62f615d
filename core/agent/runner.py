"""The pure agent runner: provider + tools + messages -> result and events. No storage."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from core.event_data import (
    AssistantMessage,
    EventPayload,
    ToolComplete,
    ToolStart,
    TurnEnd,
    TurnStart,
)
from core.providers.base import (
    ChatMessage,
    ChatRequest,
    Completion,
    Provider,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from core.tools.base import ToolContext
from core.tools.registry import ToolExecutor, ToolResult

__all__ = ["NUDGE", "RunLimits", "RunObserver", "RunResult", "run_agent", "run_tool_calls"]

log = logging.getLogger(__name__)

TASK_COMPLETE_TOOL = "task_complete"
NUDGE = (
    "Continue working on the task on your own. When it is completely done, call the "
    "task_complete tool with a short summary."
)
_PREVIEW_CHARS = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits:
    max_iterations: int
    max_continuations: int = 0
    autopilot: bool = False
    stream: bool = True


class RunObserver(Protocol):
    """Receives what the runner does, as it does it."""

    async def event(self, data: EventPayload) -> None: ...

    async def delta(self, text: str) -> None: ...


@dataclass(slots=True)
class RunResult:
    text: str = ""
    messages: list[ChatMessage] = field(default_factory=list)
    """Everything the run added to the conversation (assistant, tool, nudge messages)."""
    llm_calls: int = 0
    task_complete: bool = False
    stop: Literal["answered", "task_complete", "max_iterations"] = "answered"


async def _call(
    provider: Provider, request: ChatRequest, observer: RunObserver, stream: bool
) -> Completion:
    if not stream:
        return await provider.complete(request)
    completion: Completion | None = None
    async for item in provider.stream(request):
        if isinstance(item, TextDelta):
            if item.text:
                await observer.delta(item.text)
        else:
            completion = item
    if completion is None:  # a provider that broke its contract
        raise RuntimeError(f"provider {provider.name} ended a stream without a completion")
    return completion


async def _run_call(
    call: ToolCall, tools: ToolExecutor, ctx: ToolContext, observer: RunObserver
) -> ToolResult:
    """One tool call with its own start and complete events."""
    await observer.event(ToolStart(tool=call.name, call_id=call.id, arguments=call.arguments))
    outcome = await tools.execute(call, ctx)
    await observer.event(
        ToolComplete(
            tool=call.name,
            call_id=call.id,
            is_error=outcome.is_error,
            result=outcome.content[:_PREVIEW_CHARS],
        )
    )
    return outcome


async def _run_together(
    calls: Sequence[ToolCall], tools: ToolExecutor, ctx: ToolContext, observer: RunObserver
) -> list[ToolResult]:
    if len(calls) <= 1:
        return [await _run_call(c, tools, ctx, observer) for c in calls]
    tasks = [asyncio.ensure_future(_run_call(c, tools, ctx, observer)) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def run_tool_calls(
    calls: Sequence[ToolCall], tools: ToolExecutor, ctx: ToolContext, observer: RunObserver
) -> list[ToolResult]:
    """Run the tool calls of one model response; results come back in the calls' order.

    Consecutive calls of parallel-safe tools (``tools.parallel_tools``: spawning
    subagents, read-only tools) run at the same time; any other call runs alone, after
    the calls before it and before the calls after it.
    """
    results: list[ToolResult] = []
    batch: list[ToolCall] = []
    for call in calls:
        if tools.parallel_safe(call.name):
            batch.append(call)
            continue
        results += await _run_together(batch, tools, ctx, observer)
        batch = []
        results.append(await _run_call(call, tools, ctx, observer))
    results += await _run_together(batch, tools, ctx, observer)
    return results


async def run_agent(
    *,
    provider: Provider,
    tools: ToolExecutor,
    specs: Sequence[ToolSpec],
    tool_context: ToolContext,
    system: str,
    history: Sequence[ChatMessage],
    limits: RunLimits,
    observer: RunObserver,
    model: str | None = None,
    background: Callable[[], Awaitable[str | None]] | None = None,
) -> RunResult:
    """Run LLM turns until the model answers without tool calls (or a limit is hit).

    One turn is exactly one LLM call, bracketed by ``assistant.turn_start`` and
    ``assistant.turn_end`` events. ``model`` overrides the provider's model (a
    subagent's). In autopilot, before the run ends, ``background`` is awaited: it waits
    for background work the run started, and what it returns (what finished) is given
    to the model as the next user message; None lets the run end.
    """
    result = RunResult()
    conversation = list(history)
    continuations = 0
    while True:
        if result.llm_calls >= limits.max_iterations:
            result.stop = "max_iterations"
            break
        result.llm_calls += 1
        await observer.event(TurnStart(iteration=result.llm_calls))
        request = ChatRequest(
            system=system, messages=tuple(conversation), tools=tuple(specs), model=model
        )
        completion = await _call(provider, request, observer, limits.stream)
        reply = ChatMessage(
            role="assistant", content=completion.text, tool_calls=completion.tool_calls
        )
        conversation.append(reply)
        result.messages.append(reply)
        if completion.text:
            result.text = completion.text
        await observer.event(
            AssistantMessage(
                content=completion.text,
                tool_calls=[c.name for c in completion.tool_calls],
                usage=completion.usage.model_dump(),
            )
        )
        outcomes = await run_tool_calls(completion.tool_calls, tools, tool_context, observer)
        for call, outcome in zip(completion.tool_calls, outcomes, strict=True):
            tool_message = ChatMessage(
                role="tool", content=outcome.content, tool_call_id=call.id, name=call.name
            )
            conversation.append(tool_message)
            result.messages.append(tool_message)
            if call.name == TASK_COMPLETE_TOOL and not outcome.is_error:
                result.task_complete = True
                if not completion.text:
                    # The summary is what the user is shown (the tool says so), not an
                    # earlier step's "working on it"; text beside the call wins.
                    summary = str(call.arguments.get("summary") or "").strip()
                    result.text = summary or result.text or "Task complete."
        await observer.event(TurnEnd(iteration=result.llm_calls))
        ending = result.task_complete or not completion.tool_calls
        if ending and limits.autopilot and background is not None:
            finished = await background()
            if finished is not None:
                result.task_complete = False  # not done while its own agents still ran
                report = ChatMessage(role="user", content=finished)
                conversation.append(report)
                result.messages.append(report)
                continue
        if result.task_complete:
            result.stop = "task_complete"
            break
        if completion.tool_calls:
            continue
        if limits.autopilot and continuations < limits.max_continuations:
            continuations += 1
            nudge = ChatMessage(role="user", content=NUDGE)
            conversation.append(nudge)
            result.messages.append(nudge)
            continue
        break
    return result
