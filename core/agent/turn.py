"""The turn layer: one claimed message -> persisted history, events and one final reply."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from sqlalchemy import Connection

from core.agent.runner import RunLimits, RunResult, run_agent
from core.agent.services import TurnProfile, TurnServices
from core.bus.base import Claim
from core.bus.ephemeral import EphemeralHub
from core.commands import Macro
from core.errors import CommandError, ProviderError
from core.event_data import (
    EventPayload,
    Idle,
    OrchestrationStarted,
    SessionError,
    TaskComplete,
    ToolComplete,
    ToolStart,
    TurnEnd,
    UserMessage,
)
from core.events import Event, EventLog
from core.hooks import TurnHooks
from core.messages import (
    InboundMessage,
    OutboundKind,
    OutboundMessage,
    Progress,
    ReplyFormat,
    StreamDelta,
)
from core.providers.base import ChatMessage, Provider
from core.sessions import HistoryEntry, SessionState
from core.skills.prompt import SKILL_TOOL
from core.tools.base import NO_CAPACITY_HANDOVER, Capacity, ToolContext

__all__ = ["TurnControl", "TurnHandler"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TurnControl:
    """Shared by a running turn and the runtime: /stop asks, settling ends the asking."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    settling: bool = False
    """Set once the turn writes its outcome; from then on it must not be cancelled."""
    capacity: Capacity = NO_CAPACITY_HANDOVER
    """The turn's slot, which tools waiting on other sessions give back meanwhile."""


@dataclass(slots=True)
class _Outcome:
    """How a message ends: the reply, the events closing it, and any other writes."""

    text: str
    kind: OutboundKind = "reply"
    events: list[Event] = field(default_factory=list)
    write: Callable[[Connection], None] | None = None
    compacts: bool = False
    """Whether ``write`` queues a compaction job (the worker is woken after the commit)."""
    idle: Idle = field(default_factory=Idle)
    """The ``session.idle`` event that closes the message."""
    format: ReplyFormat = "markdown"


class _TurnObserver:
    """Buffers events (written with the turn's next transaction) and streams deltas out."""

    def __init__(self, *, hub: EphemeralHub, events: EventLog, message: InboundMessage) -> None:
        self._hub = hub
        self._events = events
        self._message = message
        self.pending: list[Event] = []

    @property
    def _stream(self) -> bool:
        # Asked at each emit: a sender may attach to the message while it runs.
        return self._hub.has_subscribers(self._message.id)

    async def event(self, data: EventPayload) -> None:
        m = self._message
        self.pending.append(Event(session_key=m.session_key, message_id=m.id, data=data))
        if isinstance(data, ToolStart) and self._stream:
            self._emit(Progress, f"running {data.tool}…")
        if isinstance(data, TurnEnd) and any(
            isinstance(e.data, ToolComplete) for e in self.pending
        ):
            await self.flush()  # a tool loop can be long: keep the log current

    async def delta(self, text: str) -> None:
        if self._stream:
            self._emit(StreamDelta, text)

    def _emit(self, kind: type[StreamDelta] | type[Progress], text: str) -> None:
        m = self._message
        self._hub.emit(
            kind(inbound_id=m.id, session_key=m.session_key, delivery=m.delivery, text=text)
        )

    def take(self) -> list[Event]:
        events, self.pending = self.pending, []
        return events

    async def flush(self) -> None:
        if self.pending:
            await self._events.append(*self.take())


class TurnHandler:
    """Handles one claimed message end to end and settles it with exactly one reply."""

    def __init__(self, *, services: TurnServices, owner: str) -> None:
        self._s = services
        self._owner = owner

    async def handle(self, claim: Claim, *, control: TurnControl) -> None:
        message = claim.message
        if claim.attempt > self._s.config.max_attempts:
            error = f"gave up after {claim.attempt - 1} interrupted attempts"
            log.error("message %s: %s", message.id, error)
            outcome = _Outcome(
                f"Sorry, I could not finish this message: I {error}. It is logged.",
                "error",
                [self._user_event(claim), self._error_event(message, error, "GaveUp")],
            )
        elif self._s.commands.handles(message.text):
            outcome = await self._slash(claim, control)
        else:
            outcome = await self._model(claim, control)
        control.settling = True
        await self._settle(message, outcome)

    async def _slash(self, claim: Claim, control: TurnControl) -> _Outcome:
        """A slash command: answered by itself, or (an orchestration macro) by the agent
        on the prompt the command writes."""
        try:
            macro = await self._s.commands.expand(claim.message)
        except CommandError as exc:  # its arguments are refused: so is the command
            return await self._command(claim.message, refused=exc)
        if macro is None:
            return await self._command(claim.message)
        return await self._model(claim, control, macro)

    async def _model(
        self, claim: Claim, control: TurnControl, macro: Macro | None = None
    ) -> _Outcome:
        message = claim.message
        if self._s.provider is None:
            return _Outcome(
                self._s.no_provider_hint,
                "error",
                [self._user_event(claim), self._error_event(message, "no provider configured")],
            )
        profile = None
        if self._s.profiles is not None:
            profile = await self._s.profiles.profile(message.session_key)
        if profile is not None and profile.refuse is not None:
            return _Outcome(
                profile.refuse,
                "error",
                [self._user_event(claim), self._error_event(message, profile.refuse)],
            )
        profile = profile or TurnProfile()
        if macro is not None:
            claim = Claim(message.model_copy(update={"text": macro.prompt}), claim.attempt)
            if macro.tools is not None:
                profile = replace(profile, tools=macro.tools)
        return await self._agent(claim, self._s.provider, control, profile, macro)

    async def stopped(self, claim: Claim) -> None:
        """Settle a message whose turn was stopped before it began."""
        message = claim.message
        stopped = self._error_event(message, "stopped by user", "TurnCancelled")
        await self._settle(
            message, _Outcome("Stopped.", "reply", [self._user_event(claim), stopped])
        )

    async def _settle(self, message: InboundMessage, outcome: _Outcome) -> None:
        reply = OutboundMessage.answering(
            message, outcome.text, outcome.kind, format=outcome.format
        )
        idle = Event(session_key=message.session_key, message_id=message.id, data=outcome.idle)
        events = [*outcome.events, idle]

        def job(conn: Connection) -> bool:
            kept = self._s.inbox.settle_in(
                conn, message.id, owner=self._owner, reply=reply, failed=outcome.kind == "error"
            )
            if kept:  # else another attempt owns the message and writes its own outcome
                if outcome.write is not None:
                    outcome.write(conn)
                self._s.events.add_in(conn, events)
            return kept

        if await self._s.store.transact(job):
            self._s.inbox.notify_reply(reply)
            if self._s.compaction is not None and outcome.compacts:
                self._s.compaction.wake()
        else:
            log.warning("lease lost before settling; this attempt's outcome is dropped")

    @staticmethod
    def _error_event(message: InboundMessage, error: str, kind: str | None = None) -> Event:
        data = SessionError(error=error, kind=kind)
        return Event(session_key=message.session_key, message_id=message.id, data=data)

    @staticmethod
    def _user_event(claim: Claim) -> Event:
        m = claim.message
        data = UserMessage(
            text=m.text,
            origin=m.origin,
            sender=m.sender,
            attempt=claim.attempt if claim.attempt > 1 else None,
            schedule_id=m.schedule_id,
        )
        return Event(session_key=m.session_key, message_id=m.id, data=data)

    async def _command(
        self, message: InboundMessage, refused: CommandError | None = None
    ) -> _Outcome:
        user = Event(
            session_key=message.session_key,
            message_id=message.id,
            data=UserMessage(text=message.text, origin=message.origin),
        )
        await self._s.events.append(user)  # before the command's own events (schedule_created)
        if refused is not None:
            return _Outcome(str(refused), "error", format="text")
        try:
            return _Outcome(await self._s.commands.dispatch(message), format="text")
        except CommandError as exc:
            return _Outcome(str(exc), "error", format="text")

    async def _begin(self, claim: Claim) -> tuple[SessionState, list[HistoryEntry], bool]:
        """Record the user turn (once, even on redelivery) and load the session's history
        and whether the session is in autopilot (``/autopilot on``)."""
        s, message = self._s, claim.message
        user_event = self._user_event(claim)

        def job(conn: Connection) -> tuple[SessionState, list[HistoryEntry], bool]:
            state = s.sessions.ensure_in(conn, message.session_key, message.delivery.channel)
            # Not ``claim.attempt > 1``: a turn released at shutdown got its attempt back,
            # so its rerun is attempt 1 again although the user turn is already recorded.
            history = s.sessions.begin_turn_in(
                conn, state, inbound_id=message.id, text=message.text
            )
            s.events.add_in(conn, [user_event])
            standing = s.modes is not None and s.modes.autopilot_in(conn, message.session_key)
            return state, history, standing

        return await s.store.transact(job)

    async def _agent(
        self,
        claim: Claim,
        provider: Provider,
        control: TurnControl,
        profile: TurnProfile,
        macro: Macro | None = None,
    ) -> _Outcome:
        s, message = self._s, claim.message
        state, history, standing = await self._begin(claim)
        window, summary = s.context.fit(
            [h.message for h in history],
            summary=state.summary,
            max_chars=s.config.context.summary_max_chars,
        )
        summary_update = None
        if window.dropped and summary is not None:
            summary_update = (summary, history[len(window.dropped) - 1].id)
        tool_context = ToolContext(
            workspace=s.workspace,
            session_key=state.key,
            channel=message.delivery.channel,
            message_id=message.id,
            message=message,
            depth=profile.depth,
            agent_type=profile.agent_type,
            tool_allow=profile.tools,
            read_scopes=profile.read_scopes,
            lineage=profile.lineage,
            deps=s.tool_deps,
            capacity=control.capacity,
            skills=profile.skills,
        )
        if s.before_tools is not None:
            await s.before_tools()
        specs = s.tools.specs(ctx=tool_context)
        skills = await s.skills.section(profile.skills) if s.skills is not None else None
        if skills is None:  # nothing to load: the tool is not offered (agentskills.io)
            specs = [spec for spec in specs if spec.name != SKILL_TOOL]
        if s.reserved_tools:
            specs = [
                spec
                for spec in specs
                if s.reserved_tools.get(spec.name, profile.agent_type) == profile.agent_type
            ]
        system = await s.context.system_prompt(
            session_key=state.key,
            channel=message.delivery.channel,
            tools=specs,
            agents=profile.agents,
            agents_query=message.text,
            extra="\n\n".join(profile.instructions) or None,
            summary=summary,
            skills=skills,
        )
        observer = _TurnObserver(hub=s.hub, events=s.events, message=message)
        autopilot, background = await self._autopilot(
            tool_context, standing and profile.depth == 0, macro, observer
        )
        hooks = TurnHooks(
            hooks=s.hooks,
            message=message,
            ctx=tool_context,
            record=observer.event,
            publisher=s.inbox,
            pending=lambda: list(observer.pending),
        )
        try:
            fresh = len(history) == 1 and state.summary is None
            blocked = await hooks.prompt(fresh=fresh, epoch=state.epoch)
            if blocked is not None:
                return self._prompt_blocked(message, state, blocked, observer.take())
            result = await run_agent(
                provider=provider,
                tools=hooks.tools(s.tools),
                specs=specs,
                tool_context=tool_context,
                system=hooks.system(system),
                history=window.messages,
                limits=RunLimits(
                    max_iterations=s.config.max_iterations,
                    max_continuations=s.config.max_continuations,
                    autopilot=autopilot,
                    stream=s.config.stream,
                ),
                observer=observer,
                model=profile.model,
                background=background,
            )
            await hooks.stopped(text=result.text, stop=result.stop)
        except ProviderError as exc:
            log.warning("provider failed status=%s error=%s", exc.status, exc)
            await hooks.failed(str(exc), type(exc).__name__)
            error = self._error_event(message, str(exc), type(exc).__name__)
            return _Outcome(f"The LLM provider failed: {exc}", "error", [*observer.take(), error])
        except asyncio.CancelledError:
            if not control.stop.is_set():
                await asyncio.shield(observer.flush())
                raise  # shutdown: the message stays claimable
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            stopped = self._error_event(message, "stopped by user", "TurnCancelled")
            return _Outcome("Stopped.", "reply", [*observer.take(), stopped])
        except Exception as exc:
            log.exception("turn failed")
            await hooks.failed(str(exc), type(exc).__name__)
            error = self._error_event(message, str(exc), type(exc).__name__)
            text = f"Something went wrong on my side ({type(exc).__name__}); it is logged."
            return _Outcome(text, "error", [*observer.take(), error])
        outcome = self._finished(message, state, result, observer.take(), summary_update)
        if s.notices is not None:
            outcome.text += await s.notices.notice(message.id)
        return outcome

    async def _autopilot(
        self,
        ctx: ToolContext,
        standing: bool,
        macro: Macro | None,
        observer: _TurnObserver,
    ) -> tuple[bool, Callable[[], Awaitable[str | None]] | None]:
        """Whether the message runs in autopilot (its own flag, its macro's, or the
        session's mode), and what it waits for before it ends."""
        assert ctx.message is not None
        if macro is not None:
            await observer.event(
                OrchestrationStarted(
                    command=macro.command,
                    argument=macro.argument,
                    tools=list(macro.tools) if macro.tools is not None else None,
                    report=macro.report,
                )
            )
            await observer.flush()  # logged before what the run starts (subagents)
        autopilot = standing or ctx.message.autopilot or (macro is not None and macro.autopilot)
        waiter = self._s.background
        if not autopilot or waiter is None:
            return autopilot, None

        async def background() -> str | None:
            return await waiter.settle(ctx)

        return True, background

    def _prompt_blocked(
        self, message: InboundMessage, state: SessionState, reason: str, events: list[Event]
    ) -> _Outcome:
        """A userPromptSubmitted hook blocked the prompt: its reason is the reply."""
        s = self._s

        def write(conn: Connection) -> None:
            reply = ChatMessage(role="assistant", content=reason)
            s.sessions.add_messages_in(
                conn, key=state.key, epoch=state.epoch, inbound_id=message.id, messages=[reply]
            )
            s.sessions.touch_in(conn, key=state.key, added=2)

        return _Outcome(reason, "reply", events, write, idle=Idle(llm_calls=0, stop="hook_blocked"))

    def _finished(
        self,
        message: InboundMessage,
        state: SessionState,
        result: RunResult,
        events: list[Event],
        summary_update: tuple[str, int] | None,
    ) -> _Outcome:
        s = self._s
        if result.task_complete:
            events.append(
                Event(
                    session_key=message.session_key,
                    message_id=message.id,
                    data=TaskComplete(summary=result.text),
                )
            )

        fold = summary_update
        if summary_update is not None and s.compaction is not None:
            fold = None  # the compaction job writes the model's summary after the reply

        def write(conn: Connection) -> None:
            s.sessions.add_messages_in(
                conn,
                key=state.key,
                epoch=state.epoch,
                inbound_id=message.id,
                messages=result.messages,
            )
            s.sessions.touch_in(conn, key=state.key, added=len(result.messages) + 1, summary=fold)
            if summary_update is not None and s.compaction is not None:
                s.compaction.request_in(
                    conn, key=state.key, epoch=state.epoch, upto=summary_update[1]
                )

        text = result.text.strip() or "(no reply)"
        if result.stop == "max_iterations":
            text += f"\n\n(stopped after {s.config.max_iterations} steps: agent.max_iterations)"
        return _Outcome(
            text,
            "reply",
            events,
            write,
            compacts=summary_update is not None and s.compaction is not None,
            idle=Idle(llm_calls=result.llm_calls, stop=result.stop),
        )
