"""The turn layer: one claimed message -> persisted history, events and one final reply."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from core.agent.context import compact
from core.agent.runner import RunLimits, RunResult, run_agent
from core.agent.services import AgentServices
from core.bus.base import Claim
from core.errors import CommandError, ProviderError
from core.events import Event, EventType
from core.messages import (
    InboundMessage,
    OutboundKind,
    OutboundMessage,
    Progress,
    StreamDelta,
    reply_id_for,
)
from core.providers.base import ChatMessage, Provider
from core.tools.base import ToolContext

__all__ = ["TurnHandler"]

log = logging.getLogger(__name__)


class _TurnObserver:
    """Buffers events (flushed with the turn's writes) and streams deltas out."""

    def __init__(self, services: AgentServices, message: InboundMessage) -> None:
        self._services = services
        self._message = message
        self.pending: list[Event] = []
        self._stream = services.hub.has_subscribers(message.delivery.channel)

    async def event(self, type: str, data: dict[str, Any]) -> None:
        self.pending.append(
            Event(session_key=self._message.session_key, type=type, message_id=self._message.id, data=data)
        )
        if type == EventType.TOOL_START and self._stream:
            self._services.hub.emit(
                Progress(
                    inbound_id=self._message.id,
                    session_key=self._message.session_key,
                    delivery=self._message.delivery,
                    text=f"running {data['tool']}…",
                )
            )
        if type == EventType.TURN_END and any(e.type == EventType.TOOL_COMPLETE for e in self.pending):
            await self.flush()  # a tool loop is long: keep the log current

    async def delta(self, text: str) -> None:
        if self._stream:
            self._services.hub.emit(
                StreamDelta(
                    inbound_id=self._message.id,
                    session_key=self._message.session_key,
                    delivery=self._message.delivery,
                    text=text,
                )
            )

    async def flush(self) -> None:
        if self.pending:
            events, self.pending = self.pending, []
            await self._services.events.append(*events)


class TurnHandler:
    """Handles one claimed message end to end and settles it with exactly one reply."""

    def __init__(self, *, services: AgentServices, owner: str) -> None:
        self._s = services
        self._owner = owner

    async def handle(self, claim: Claim, *, stop_requested: asyncio.Event) -> None:
        message = claim.message
        kind: OutboundKind = "reply"
        try:
            if self._s.commands.handles(message.text):
                text = await self._command(message)
            elif self._s.provider is None:
                kind, text = "error", self._s.no_provider_hint
                await self._record(message, [Event(message.session_key, EventType.ERROR, message.id, {"error": "no provider"})])
            else:
                text = await self._agent(claim, self._s.provider)
        except CommandError as exc:
            kind, text = "error", str(exc)
            await self._record(message, [])
        except ProviderError as exc:
            kind, text = "error", f"The LLM provider failed: {exc}"
            log.warning("provider failed status=%s error=%s", exc.status, exc)
            await self._record(message, [self._error_event(message, exc)])
        except asyncio.CancelledError:
            if not stop_requested.is_set():
                raise  # shutdown: leave the message claimable
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            kind, text = "reply", "Stopped."
            await self._record(message, [Event(message.session_key, EventType.ERROR, message.id, {"error": "stopped by user"})])
        except Exception as exc:
            log.exception("turn failed")
            kind, text = "error", f"Something went wrong on my side ({type(exc).__name__}); it is logged."
            await self._record(message, [self._error_event(message, exc)])
        reply = OutboundMessage(
            id=reply_id_for(message.id),
            inbound_id=message.id,
            session_key=message.session_key,
            delivery=message.delivery,
            text=text,
            kind=kind,
        )
        await self._s.bus.settle(message.id, owner=self._owner, reply=reply, failed=kind == "error")

    @staticmethod
    def _error_event(message: InboundMessage, exc: BaseException) -> Event:
        data: dict[str, Any] = {"error": str(exc), "kind": type(exc).__name__}
        return Event(message.session_key, EventType.ERROR, message.id, data)

    async def _record(self, message: InboundMessage, events: Sequence[Event]) -> None:
        """Events of a message that did not reach (or left) the model, closed by idle."""
        idle = Event(message.session_key, EventType.IDLE, message.id, {})
        await self._s.events.append(*events, idle)

    async def _command(self, message: InboundMessage) -> str:
        user = Event(message.session_key, EventType.USER_MESSAGE, message.id, {"text": message.text, "origin": message.origin})
        await self._s.events.append(user)
        text = await self._s.commands.dispatch(message)
        await self._record(message, [])
        return text

    async def _agent(self, claim: Claim, provider: Provider) -> str:
        s, message = self._s, claim.message
        row = await s.sessions.get(message.session_key)
        if row is None:
            row = await s.sessions.ensure(message.session_key, message.delivery.channel)
        async with s.store.write() as tx:
            if claim.attempt > 1:
                dropped = await s.sessions.discard_attempt(tx, key=row.key, inbound_id=message.id)
                log.info("redelivered attempt=%d discarded_rows=%d", claim.attempt, dropped)
            if not await s.sessions.has_user_turn(tx, key=row.key, inbound_id=message.id):
                s.sessions.add_messages(
                    tx,
                    key=row.key,
                    epoch=row.epoch,
                    inbound_id=message.id,
                    messages=[ChatMessage(role="user", content=message.text)],
                )
            s.events.add_to(
                tx,
                [
                    Event(
                        row.key,
                        EventType.USER_MESSAGE,
                        message.id,
                        {
                            "text": message.text,
                            "origin": message.origin,
                            "sender": message.sender,
                            "attempt": claim.attempt,
                            **({"schedule_id": message.schedule_id} if message.schedule_id else {}),
                        },
                    )
                ],
            )
        history = await s.sessions.history(row)
        window = s.context.window([h.message for h in history], summary=row.summary)
        summary, summary_update = row.summary, None
        if window.dropped:
            summary = compact(window.dropped, row.summary, max_chars=s.config.context.summary_max_chars)
            summary_update = (summary, history[len(window.dropped) - 1].id)
        tool_context = ToolContext(
            workspace=s.workspace,
            session_key=row.key,
            channel=message.delivery.channel,
            message_id=message.id,
            extras={**s.tool_extras, "message": message},
        )
        specs = s.tools.specs(ctx=tool_context)
        system = await s.context.system_prompt(
            session_key=row.key, channel=message.delivery.channel, tools=specs, summary=summary
        )
        observer = _TurnObserver(s, message)
        try:
            result = await run_agent(
                provider=provider,
                tools=s.tools,
                specs=specs,
                tool_context=tool_context,
                system=system,
                history=window.messages,
                limits=RunLimits(
                    max_iterations=s.config.max_iterations,
                    max_continuations=s.config.max_continuations,
                    autopilot=message.autopilot,
                    stream=s.config.stream,
                ),
                observer=observer,
            )
        except BaseException:
            await asyncio.shield(observer.flush())
            raise
        await self._finish(message, row.epoch, result, observer, summary_update)
        return self._reply_text(result)

    async def _finish(
        self,
        message: InboundMessage,
        epoch: int,
        result: RunResult,
        observer: _TurnObserver,
        summary_update: tuple[str, int] | None,
    ) -> None:
        s = self._s
        closing = []
        if result.task_complete:
            closing.append(Event(message.session_key, EventType.TASK_COMPLETE, message.id, {"summary": result.text}))
        closing.append(
            Event(message.session_key, EventType.IDLE, message.id, {"llm_calls": result.llm_calls, "stop": result.stop})
        )
        async with s.store.write() as tx:
            s.sessions.add_messages(
                tx, key=message.session_key, epoch=epoch, inbound_id=message.id, messages=result.messages
            )
            s.events.add_to(tx, [*observer.pending, *closing])
            await s.sessions.touch(tx, key=message.session_key, added=len(result.messages) + 1, summary=summary_update)
        observer.pending = []

    def _reply_text(self, result: RunResult) -> str:
        text = result.text.strip() or "(no reply)"
        if result.stop == "max_iterations":
            text += f"\n\n(stopped after {self._s.config.max_iterations} steps: agent.max_iterations)"
        return text
