"""Context building: the system prompt, the history window and its compaction."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.agent.agents_section import AgentListing, agents_section
from core.agent.tokens import ESTIMATE, TokenCounter, message_tokens
from core.providers.base import ChatMessage, ToolSpec
from core.workspace_read import read_workspace_text

__all__ = [
    "WORKSPACE_FILES",
    "ContextBuilder",
    "ContextConfig",
    "Window",
    "compact",
    "estimate_tokens",
]

logger = logging.getLogger(__name__)

WORKSPACE_FILES: tuple[str, ...] = (
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "TOOLS.md",
    "IDENTITY.md",
    "memory/MEMORY.md",
)
"""Workspace files put into the system prompt, in prompt order (relative paths)."""

_SUMMARY_USER_CHARS = 200
_SUMMARY_TOOL_CHARS = 80
_ELLIPSIS = "…"
_RECHECK_SECONDS = 1.0
"""How stale the workspace files in the prompt may be (edits show up within this)."""
_FIT_ROUNDS = 4
_MAX_TOOLS_BLOCKS = 256


class ContextConfig(BaseModel):
    """How much context goes into each LLM call."""

    model_config = ConfigDict(extra="forbid")

    file_max_chars: int = Field(default=12000, ge=0)
    """Cap per workspace file in the system prompt; longer files are truncated."""
    history_token_budget: int = Field(default=12000, ge=0)
    """Estimated tokens of history (plus summary) sent per call."""
    summary_max_chars: int = Field(default=4000, ge=0)
    """Cap of the compacted summary of older turns."""
    timezone: str | None = None
    """IANA timezone shown to the model; None means the host's local time."""
    agents_max_chars: int = Field(default=4000, ge=200)
    """Cap of the ``## Agents`` section (the agent catalog), however many agents exist."""

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"unknown IANA timezone {value!r}") from exc
        return value


@dataclass(frozen=True, slots=True)
class Window:
    """The part of the history sent to the model, and what fell out of it.

    ``dropped`` is always a prefix of the history (oldest first), so a caller can
    fold it into the summary and advance a "summarised up to" counter by
    ``len(dropped)``. ``messages`` is the rest, minus tool results whose call is
    not in the window (every provider rejects those).
    """

    messages: tuple[ChatMessage, ...]
    dropped: tuple[ChatMessage, ...]


@dataclass(frozen=True, slots=True)
class _CachedSection:
    mtime_ns: int
    size: int
    section: str | None


class ContextBuilder:
    """Builds the system prompt and windows the history for one workspace.

    One builder serves every session: workspace files are cached by
    ``(path, mtime_ns, size)`` and re-checked (one ``stat`` per file, in a worker
    thread) at most once a second, however many turns start meanwhile.
    """

    def __init__(
        self,
        *,
        workspace: Path,
        config: ContextConfig,
        agent_name: str = "familiar",
        clock: Callable[[], datetime] | None = None,
        recheck_seconds: float = _RECHECK_SECONDS,
        tokens: TokenCounter = ESTIMATE,
    ) -> None:
        """Create a builder.

        Args:
            workspace: The workspace root holding ``AGENTS.md`` and friends.
            config: Budgets and timezone.
            agent_name: The name shown in the runtime block.
            clock: Returns the current time; naive results are taken as host local.
                Defaults to the system clock.
            recheck_seconds: How often workspace files are checked for changes.
            tokens: Counts tokens for the history budget (`core.agent.tokens.for_model`).
        """
        self.tokens = tokens
        self._workspace = workspace
        self._config = config
        self._agent_name = agent_name
        self._clock = clock or (lambda: datetime.now(UTC))
        self._zone = ZoneInfo(config.timezone) if config.timezone else None
        self._cache: dict[str, _CachedSection] = {}
        self._sections: list[str] = []
        self._checked_at = -math.inf
        self._recheck_seconds = recheck_seconds
        self._refresh: asyncio.Future[list[str]] | None = None
        self._time_lines: tuple[int, str] = (0, "")
        """The runtime block's time lines, and the second (epoch) they show."""
        self._tools_blocks: dict[tuple[int, ...], tuple[Sequence[ToolSpec], str]] = {}
        """Tools blocks by the ids of their specs (held, so an id is not reused meanwhile)."""

    async def system_prompt(
        self,
        *,
        session_key: str,
        channel: str,
        tools: Sequence[ToolSpec],
        agents: Sequence[AgentListing] = (),
        agents_query: str | None = None,
        extra: str | None = None,
        summary: str | None = None,
        skills: str | None = None,
    ) -> str:
        """Build the system prompt for one LLM call.

        Order: runtime block, workspace files (see :data:`WORKSPACE_FILES`, missing
        ones skipped, each capped at ``file_max_chars``), tools, custom agents, skills,
        ``extra``, then the summary of earlier turns.

        Args:
            session_key: The session the call belongs to.
            channel: The channel name (``cli``, ``slack``, ...).
            tools: The tools offered in this call.
            agents: The agent catalog, listed when it has custom agents (within
                ``agents_max_chars``, see `core.agent.agents_section`).
            agents_query: The text being answered: agents it mentions are listed first.
            extra: Free text appended after the catalogs (e.g. subagent instructions).
            summary: The compacted summary of turns outside the window.
            skills: The Agent Skills section (`core.skills.prompt`), after the agents.

        Returns:
            The system prompt, sections separated by blank lines.
        """
        sections = [self._runtime_block(session_key=session_key, channel=channel)]
        sections.extend(await self._workspace_sections())
        if tools:
            sections.append(self._tools_block(tools))
        if any(a.group > 0 for a in agents):
            sections.append(
                agents_section(agents, query=agents_query, max_chars=self._config.agents_max_chars)
            )
        if skills:
            sections.append(skills)
        if extra and extra.strip():
            sections.append(extra.strip())
        if summary and summary.strip():
            text = _keep_tail(summary.strip(), self._config.summary_max_chars)
            sections.append(f"## Earlier in this conversation (summary)\n\n{text}")
        return "\n\n".join(sections) + "\n"

    def window(
        self,
        history: Sequence[ChatMessage],
        *,
        summary: str | None = None,
        budget: int | None = None,
    ) -> Window:
        """Keep the newest history that fits the token budget.

        Tool calls stay with their results: the window starts at a message boundary
        that is not a tool result, and the last user message (with everything after
        it) is always kept, even over budget. The summary, if any, counts against
        the budget because it travels in the system prompt.

        Args:
            history: The session's messages, oldest first.
            summary: The current summary of older turns.
            budget: Tokens to fit in, instead of ``history_token_budget`` (a compaction
                aims lower, so that the next one is not due at once).

        Returns:
            The window and the dropped prefix.
        """
        budget = self._config.history_token_budget if budget is None else budget
        if summary:
            budget -= self.tokens.count(summary)
        starts = _group_starts(history)
        last_user = _last_index(history, "user")
        # The window must start at or before this index: the last user message.
        latest_allowed = len(history) if last_user is None else last_user
        start = len(history)
        used = 0
        for group_start in reversed(starts):
            cost = sum(message_tokens(m, self.tokens) for m in history[group_start:start])
            must_extend = start > latest_allowed
            if not must_extend and used + cost > budget:
                break
            used += cost
            start = group_start
        start = _skip_leading_tool_results(history, start)
        return Window(
            messages=tuple(_drop_orphan_results(history[start:])),
            dropped=tuple(history[:start]),
        )

    def fit(
        self, history: Sequence[ChatMessage], *, summary: str | None, max_chars: int
    ) -> tuple[Window, str | None]:
        """The window and the summary for a prompt, together within the budget.

        What falls out of the window is folded (extractively) into the summary for this
        prompt; as the folded summary costs budget too, the window is recomputed with it
        until the two agree (the summary is capped, so this ends quickly).

        Returns:
            The window and the summary to send (``summary`` itself when nothing fell out).
        """
        window = self.window(history, summary=summary)
        for _ in range(_FIT_ROUNDS):
            if not window.dropped:
                return window, summary
            folded = compact(window.dropped, summary, max_chars=max_chars)
            wider = self.window(history, summary=folded)
            if len(wider.dropped) <= len(window.dropped):
                return window, folded
            window = wider
        window = self.window(history, summary="x" * max_chars)  # the cap, reserved
        return window, compact(window.dropped, summary, max_chars=max_chars)

    def _runtime_block(self, *, session_key: str, channel: str) -> str:
        now = self._clock()
        second = math.floor(now.timestamp())  # a naive ``now`` is host local, as below
        cached_second, time_lines = self._time_lines
        if second != cached_second or not time_lines:
            time_lines = self._format_time(now)
            self._time_lines = (second, time_lines)
        return (
            f"## Runtime\n- Name: {self._agent_name}\n{time_lines}\n"
            f"- Channel: {channel}\n- Session: {session_key}"
        )

    def _format_time(self, now: datetime) -> str:
        """The current time and timezone lines (the same through one second)."""
        if self._zone is not None:
            now = now.astimezone(self._zone)
            zone_name = self._config.timezone
        else:
            now = now.astimezone()
            zone_name = f"{now.tzname()} (host local time)"
        return (
            f"- Current time: {now.isoformat(timespec='seconds')} ({now:%A})\n"
            f"- Timezone: {zone_name}"
        )

    def _tools_block(self, tools: Sequence[ToolSpec]) -> str:
        """`_tools_block` of ``tools``, kept: the registry hands out the same spec objects
        (frozen) on every turn."""
        key = tuple(map(id, tools))
        entry = self._tools_blocks.get(key)
        if entry is None:
            if len(self._tools_blocks) >= _MAX_TOOLS_BLOCKS:
                self._tools_blocks.clear()  # callers that build specs afresh every call
            entry = (tuple(tools), _tools_block(tools))
            self._tools_blocks[key] = entry
        return entry[1]

    async def _workspace_sections(self) -> list[str]:
        """The workspace file sections, re-checked at most every _RECHECK_SECONDS.

        Concurrent turns share one check (single flight), so a thousand sessions
        starting at once cost one round of ``stat`` calls, not a thousand.
        """
        if time.monotonic() - self._checked_at < self._recheck_seconds:
            return self._sections
        if self._refresh is None:
            self._refresh = asyncio.ensure_future(asyncio.to_thread(self._read_sections))
        refresh = self._refresh
        try:
            sections = await asyncio.shield(refresh)
        finally:
            if self._refresh is refresh and refresh.done():
                self._refresh = None
        self._sections, self._checked_at = sections, time.monotonic()
        return sections

    def _read_sections(self) -> list[str]:
        # Runs in a worker thread: stat and (when changed) read each file.
        sections: list[str] = []
        for name in WORKSPACE_FILES:
            section = self._section(name)
            if section:
                sections.append(section)
        return sections

    def _section(self, name: str) -> str | None:
        path = self._workspace / name
        try:
            info = os.lstat(path)  # a link is not followed: exec may plant one
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cannot stat workspace file %s: %s", path, exc)
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        cached = self._cache.get(name)
        if cached and cached.mtime_ns == info.st_mtime_ns and cached.size == info.st_size:
            return cached.section
        try:
            # Bytes: a UTF-8 character is at most 4, so this is enough for the cap.
            read = read_workspace_text(
                self._workspace, name, max_bytes=4 * self._config.file_max_chars + 4
            )
        except OSError as exc:
            logger.warning("cannot read workspace file %s: %s", path, exc)
            return None
        if read is None:
            return None
        section = _file_section(name, read.text, self._config.file_max_chars)
        self._cache[name] = _CachedSection(read.mtime_ns, read.size, section)
        return section


def estimate_tokens(message: ChatMessage) -> int:
    """The estimated tokens ``message`` costs (see `core.agent.tokens`)."""
    return message_tokens(message, ESTIMATE)


def compact(dropped: Sequence[ChatMessage], previous_summary: str | None, *, max_chars: int) -> str:
    """Fold dropped messages into the running summary, without an LLM call.

    One line per message (``user: ...``, ``assistant: ...``, ``tool <name>: ...``)
    is appended to the previous summary; when the result exceeds ``max_chars`` the
    oldest lines go first and the summary starts with ``…``. Deterministic, so a
    session costs the same per turn on day 300 as on day 1.

    Args:
        dropped: Messages that left the window, oldest first.
        previous_summary: The summary so far, if any.
        max_chars: The cap of the returned summary.

    Returns:
        The new summary, at most ``max_chars`` characters.
    """
    lines = [line for line in (previous_summary or "").splitlines() if line.strip()]
    lines.extend(line for line in map(_summary_line, dropped) if line)
    if max_chars <= 0 or not lines:
        return ""
    total = sum(len(line) + 1 for line in lines) - 1
    marker = len(_ELLIPSIS) + 1  # the "…" line announcing dropped lines
    first = 0
    while first < len(lines) - 1 and total + (marker if first else 0) > max_chars:
        total -= len(lines[first]) + 1
        first += 1
    kept = lines[first:]
    if first > 0 and kept[0] != _ELLIPSIS:
        kept.insert(0, _ELLIPSIS)
    return _keep_tail("\n".join(kept), max_chars)


def _summary_line(message: ChatMessage) -> str:
    text = _clip(" ".join(message.content.split()), _SUMMARY_USER_CHARS)
    if message.role == "tool":
        result = _clip(" ".join(message.content.split()), _SUMMARY_TOOL_CHARS)
        return f"tool {message.name or 'result'}: {result}"
    if message.role == "assistant" and message.tool_calls:
        called = ", ".join(call.name for call in message.tool_calls)
        text = f"{text} [called {called}]".strip()
    return f"{message.role}: {text}" if text else ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + _ELLIPSIS


def _keep_tail(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    if max_chars <= len(_ELLIPSIS):
        return text[len(text) - max_chars :] if max_chars > 0 else ""
    return _ELLIPSIS + text[len(text) - max_chars + len(_ELLIPSIS) :]


def _file_section(name: str, text: str, max_chars: int) -> str | None:
    body = text.strip()
    if not body:
        return None
    if len(body) > max_chars:
        more = len(body) - max_chars
        body = f"{body[:max_chars]}\n[... truncated: {more} more characters in {name} ...]"
    return f"## {name}\n\n{body}"


def _tools_block(tools: Sequence[ToolSpec]) -> str:
    lines = ["## Tools", ""]
    for spec in tools:
        first_line = next((ln.strip() for ln in spec.description.splitlines() if ln.strip()), "")
        lines.append(f"- {spec.name}: {first_line}" if first_line else f"- {spec.name}")
    return "\n".join(lines)


def _group_starts(history: Sequence[ChatMessage]) -> list[int]:
    # A group is one message, or an assistant tool-call message with its results.
    starts: list[int] = []
    open_calls: set[str] = set()
    for index, message in enumerate(history):
        if message.role == "tool" and message.tool_call_id in open_calls:
            continue
        starts.append(index)
        open_calls = {call.id for call in message.tool_calls}
    return starts


def _last_index(history: Sequence[ChatMessage], role: str) -> int | None:
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == role:
            return index
    return None


def _skip_leading_tool_results(history: Sequence[ChatMessage], start: int) -> int:
    while start < len(history) and history[start].role == "tool":
        start += 1
    return start


def _drop_orphan_results(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    kept: list[ChatMessage] = []
    open_calls: set[str] = set()
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id not in open_calls:
                continue
        else:
            open_calls = {call.id for call in message.tool_calls}
        kept.append(message)
    return kept
