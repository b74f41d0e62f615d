"""Hooks: fires one lifecycle event at the matching hook commands and merges their answers."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import StoreError
from core.event_data import EventPayload, HookBlocked, HookError
from core.events import Event
from core.tools.base import ToolContext
from core.tools.sandbox import command_env
from core.trust import WorkspaceTrust, digest

from .config import HooksConfig
from .dialects import Answer, Facts, from_claude_args, parse_answer
from .loader import HookCommand, HookFileProblem, HookSet, HookSource, fingerprint, load_hooks
from .names import HookEvent
from .payloads import payload
from .process import run_hook_process
from .transcript import Transcripts

__all__ = ["FAILED", "HookOutcome", "Hooks", "Pending", "facts_of"]

log = logging.getLogger(__name__)

FAILED = "hook failed"
"""The start of the reason a tool call is refused with when a preToolUse hook fails."""

_BLOCKABLE = {
    HookEvent.PRE_TOOL_USE,
    HookEvent.USER_PROMPT_SUBMITTED,
    HookEvent.AGENT_STOP,
    HookEvent.SUBAGENT_STOP,
}
_STDERR_PREVIEW = 300
_COPILOT_TRANSCRIPT = {HookEvent.AGENT_STOP, HookEvent.SUBAGENT_START, HookEvent.SUBAGENT_STOP}
"""Copilot events whose payload GitHub documents with a ``transcriptPath`` (Claude's
all have ``transcript_path``)."""
_CONTEXT_ON_EXIT_2 = {HookEvent.POST_TOOL_USE, HookEvent.POST_TOOL_USE_FAILURE}
"""Where exit 2's stderr is shown to the model rather than blocking: Claude's
PostToolUse, Copilot's postToolUseFailure ("recovery guidance")."""

Pending = Callable[[], Iterable[Event]]
"""The running turn's events not in the event log yet (for the transcript)."""


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """The merged answer of every hook that ran for one event.

    Attributes:
        block: the reasons of every deny/block (declared order, one per line), or None
            (any deny wins over allows and rewrites).
        context: ``additionalContext`` texts, in declared order.
        args: replacement tool arguments (preToolUse; the last hook's wins).
        events: ``hook.blocked`` / ``hook.error`` events for the caller's session log.
        ran: how many hooks ran.
    """

    block: str | None = None
    context: tuple[str, ...] = ()
    args: dict[str, Any] | None = None
    events: tuple[EventPayload, ...] = ()
    ran: int = 0

    @property
    def context_text(self) -> str:
        return "\n\n".join(self.context)


NOTHING = HookOutcome()


@dataclass(frozen=True, slots=True)
class _Result:
    hook: HookCommand
    answer: Answer | None
    error: str | None = None


def facts_of(ctx: ToolContext) -> Facts:
    """The facts every event of a turn shares: session, channel, agent, message."""
    m = ctx.message
    return Facts(
        session_key=ctx.session_key,
        cwd=str(ctx.workspace),
        channel=ctx.channel,
        agent_type=ctx.agent_type,
        depth=ctx.depth,
        message_id=ctx.message_id,
        origin=m.origin if m is not None else None,
    )


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} chars cut by hooks.max_context_chars ...]"


class Hooks:
    """The hooks of one gateway: loads the files (re-read when they change) and fires events.

    Hooks of one event run concurrently, each in its own process group with its
    timeout, in the workspace, with the allow-listed environment of ``exec`` (no
    ``FAMILIAR_*`` variables, no provider keys) plus ``hooks.env_passthrough``.

    A hook file in the workspace runs only while ``trust`` holds its content and that of
    the workspace files it runs: the files are checked when they (or the record) change,
    and the files a hook runs once more right before it runs.
    """

    def __init__(
        self,
        *,
        config: HooksConfig,
        workspace: Path,
        sources: Sequence[HookSource],
        trust: WorkspaceTrust,
        transcripts: Transcripts | None = None,
        model: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """
        Args:
            transcripts: where the session transcripts hooks read are written (None:
                ``transcript_path`` is null).
            model: the provider's model (Claude's SessionStart ``model``).
        """
        self.config = config
        self.model = model
        self._transcripts = transcripts
        self._workspace = workspace
        self._sources = tuple(sources)
        self._trust = trust
        self._clock = clock
        self._set: HookSet | None = None
        self._fingerprint: tuple[object, ...] = ()
        self._checked = 0.0
        self._lock = asyncio.Lock()
        env = command_env(workspace, config.env_passthrough)
        # HOME is not the workspace, which the agent writes: git (~/.gitconfig), npm
        # (~/.npmrc) and Python (user site-packages, *.pth) read commands and code there,
        # and a hook runs unsandboxed, wherever its own script lives.
        env["HOME"] = os.path.expanduser("~")
        env["CLAUDE_PROJECT_DIR"] = str(workspace)
        self._env = env

    async def current(self) -> HookSet:
        """The loaded hooks, re-read first if a file changed (checked every
        ``hooks.reload_interval`` seconds at most)."""
        loaded = self._set
        if loaded is not None and self._clock() - self._checked < self.config.reload_interval:
            return loaded
        async with self._lock:
            if self._set is None or self._clock() - self._checked >= self.config.reload_interval:
                self._set = await asyncio.to_thread(self._refresh)
                self._checked = self._clock()
            return self._set

    def _refresh(self) -> HookSet:
        seen = self._seen(self._set)
        if self._set is not None and seen == self._fingerprint:
            return self._set
        hooks = load_hooks(self._sources, trust=self._trust)
        self._fingerprint = self._seen(hooks)
        log.info(
            "hooks loaded count=%d files=%d problems=%d untrusted=%d",
            hooks.count,
            len(hooks.files),
            len(hooks.problems),
            len(hooks.untrusted),
        )
        return hooks

    def _seen(self, hooks: HookSet | None) -> tuple[object, ...]:
        """The hook files, the files they run and the trust record, as stats."""
        checks = () if hooks is None else (*hooks.trusted, *hooks.untrusted)
        named = [Path(p) for check in checks for p in check.named]
        return (fingerprint(self._sources, named), self._trust.stamp())

    def _changed_since_load(self, hooks: Sequence[HookCommand], loaded: HookSet) -> set[Path]:
        """Sources of ``hooks`` whose named workspace files no longer hash as trusted."""
        sources = {h.source.absolute() for h in hooks}
        stale: set[Path] = set()
        for check in loaded.trusted:
            if check.path in sources and any(
                digest(Path(p)) != d for p, d in check.fingerprint.named
            ):
                stale.add(check.path)
        return stale

    async def problems(self) -> tuple[HookFileProblem, ...]:
        """Hook files that did not load, and why."""
        return (await self.current()).problems

    async def fire(
        self,
        event: HookEvent,
        facts: Facts,
        *,
        subject: str | None = None,
        pending: Pending | None = None,
    ) -> HookOutcome:
        """Run the hooks of ``event`` whose matcher accepts ``subject`` (a tool name, an
        agent type, a session start source; None: every hook of the event).

        Args:
            pending: the running turn's unwritten events, for the transcript.
        """
        loaded = await self.current()
        hooks = [
            h for h in loaded.for_event(event) if subject is None or h.matcher.matches(subject)
        ]
        sources = {h.source.absolute() for h in hooks}
        if any(c.named and c.path in sources for c in loaded.trusted):
            stale = await asyncio.to_thread(self._changed_since_load, hooks, loaded)
            if stale:
                # A script changed between two reloads: not one more run; reload next time.
                log.warning("hook files skipped, a file they run changed: %s", sorted(stale))
                self._checked = float("-inf")
                hooks = [h for h in hooks if h.source.absolute() not in stale]
        if not hooks:
            return NOTHING
        facts = await self._with_transcripts(event, facts, hooks, pending)
        results = await asyncio.gather(*(self._run(h, facts) for h in hooks))
        return self._merge(event, facts, results)

    async def _with_transcripts(
        self, event: HookEvent, facts: Facts, hooks: Sequence[HookCommand], pending: Pending | None
    ) -> Facts:
        """``facts`` with the transcript paths, rendered now, if a hook gets them."""
        if self._transcripts is None or not any(
            h.dialect == "claude" or event in _COPILOT_TRANSCRIPT for h in hooks
        ):
            return facts
        unwritten = list(pending()) if pending is not None else []  # before the log is read
        try:
            path = await self._transcripts.write(
                facts.session_key, cwd=facts.cwd, pending=unwritten
            )
            child = None
            if event is HookEvent.SUBAGENT_STOP and facts.agent_id is not None:
                child = await self._transcripts.write(facts.agent_id, cwd=facts.cwd)
        except (OSError, StoreError) as exc:  # the hooks still run, with a null path
            log.warning("hook transcript not written: %s", exc)
            return facts
        return dataclasses.replace(
            facts,
            transcript_path=str(path),
            agent_transcript_path=str(child) if child is not None else None,
        )

    async def subagent_start(
        self, *, parent: ToolContext, child_session_key: str, agent_type: str, prompt: str
    ) -> HookOutcome:
        """``subagentStart``: ``outcome.context`` goes before the child's prompt.

        Args:
            parent: the tool context of the ``sessions_spawn`` call.
            child_session_key: ``subagent:<id>``.
            agent_type: the child's agent type (what matchers see).
            prompt: the child's prompt.
        """
        facts = dataclasses.replace(
            facts_of(parent),
            agent_id=child_session_key,
            agent_type=agent_type,
            depth=parent.depth + 1,
            prompt=prompt,
        )
        return await self.fire(HookEvent.SUBAGENT_START, facts, subject=agent_type)

    async def subagent_stop(
        self,
        *,
        parent: ToolContext,
        child_session_key: str,
        agent_type: str,
        response: str,
        blocks_so_far: int = 0,
    ) -> HookOutcome:
        """``subagentStop``: ``outcome.block`` is the prompt of another child turn.

        Args:
            blocks_so_far: how many subagentStop blocks in a row led here (the caller
                stops asking at ``hooks.max_consecutive_blocks``).
        """
        facts = dataclasses.replace(
            facts_of(parent),
            agent_id=child_session_key,
            agent_type=agent_type,
            depth=parent.depth + 1,
            last_message=response,
            stop_hook_active=blocks_so_far > 0,
        )
        return await self.fire(HookEvent.SUBAGENT_STOP, facts, subject=agent_type)

    async def session_end(self, *, ctx: ToolContext, reason: str) -> HookOutcome:
        """``sessionEnd`` (``reason``: ``new`` when ``/new`` starts a fresh context; each
        dialect names it its way, `core.hooks.payloads`)."""
        facts = dataclasses.replace(facts_of(ctx), reason=reason)
        return await self.fire(HookEvent.SESSION_END, facts)

    async def _run(self, hook: HookCommand, facts: Facts) -> _Result:
        cwd = self._workspace / hook.cwd if hook.cwd else self._workspace
        env = {**self._env, **dict(hook.env)} if hook.env else self._env
        started = time.perf_counter()
        run = await run_hook_process(
            hook.argv,
            payload=payload(
                facts, event=hook.event, event_name=hook.event_name, dialect=hook.dialect
            ),
            cwd=cwd,
            env=env,
            timeout=hook.timeout or self.config.default_timeout,
            max_output=self.config.max_output,
        )
        took = (time.perf_counter() - started) * 1000
        stderr = run.stderr.decode("utf-8", "replace").strip()
        log.info(
            "hook ran event=%s source=%s exit=%s ms=%.1f",
            hook.event_name,
            hook.source,
            run.exit_code,
            took,
        )
        if run.failure is not None:
            return _Result(hook, None, run.failure)
        if run.exit_code == 2:
            reason = stderr or f"blocked by a {hook.event.value} hook"
            return _Result(hook, Answer(block=_cap(reason, self.config.max_context_chars)))
        if run.exit_code != 0:
            detail = f": {stderr[:_STDERR_PREVIEW]}" if stderr else ""
            return _Result(hook, None, f"exited with status {run.exit_code}{detail}")
        try:
            answer = parse_answer(
                run.stdout.decode("utf-8", "replace"), event=hook.event, dialect=hook.dialect
            )
        except ValueError as exc:
            return _Result(hook, None, f"unreadable answer: {exc}")
        tool = facts.tool_name
        if answer.args is not None and hook.dialect == "claude" and tool is not None:
            answer = dataclasses.replace(answer, args=from_claude_args(tool, answer.args))
        return _Result(hook, answer)

    def _merge(self, event: HookEvent, facts: Facts, results: Sequence[_Result]) -> HookOutcome:
        limit = self.config.max_context_chars
        blocks: list[str] = []
        context: list[str] = []
        args: dict[str, Any] | None = None
        events: list[EventPayload] = []
        for r in results:
            source = str(r.hook.source)
            if r.error is not None:
                log.warning(
                    "hook failed event=%s source=%s error=%s", r.hook.event_name, source, r.error
                )
                events.append(
                    HookError(hook=event.value, source=source, error=r.error, tool=facts.tool_name)
                )
                if event is HookEvent.PRE_TOOL_USE:  # fails closed
                    reason = f"{FAILED}: {r.error}"
                    blocks.append(reason)
                    events.append(
                        HookBlocked(
                            hook=event.value, source=source, reason=reason, tool=facts.tool_name
                        )
                    )
                continue
            answer = r.answer or Answer()
            if answer.block is not None:
                if event in _BLOCKABLE:
                    blocks.append(answer.block)
                    events.append(
                        HookBlocked(
                            hook=event.value,
                            source=source,
                            reason=answer.block,
                            tool=facts.tool_name,
                        )
                    )
                elif event in _CONTEXT_ON_EXIT_2:
                    context.append(answer.block)  # shown to the model
                else:
                    log.warning(
                        "hook asked to block %s, which cannot be blocked; source=%s",
                        r.hook.event_name,
                        source,
                    )
            if answer.context:
                context.append(_cap(answer.context, limit))
            if answer.args is not None:
                args = answer.args
        block = "\n".join(blocks) if blocks else None
        if block is not None:
            args = None
        return HookOutcome(
            block=block, context=tuple(context), args=args, events=tuple(events), ran=len(results)
        )
