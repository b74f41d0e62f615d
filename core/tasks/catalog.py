"""The agent catalog: built-in agent types plus custom agents read from Markdown files."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.tasks.agent_files import AgentFileProblem, AgentSource, load_agent_files
from core.tasks.spec import AgentSpec

__all__ = ["BUILTIN_AGENTS", "AgentCatalog", "AgentSpec", "home_agent_sources"]

log = logging.getLogger(__name__)

_READ_TOOLS = ("read_file", "list_dir", "resolve_path", "recall")
_RECHECK_SECONDS = 1.0

BUILTIN_AGENTS: tuple[AgentSpec, ...] = (
    AgentSpec(
        name="general-purpose",
        description="Any multi-step task: research, edits, commands. Has every tool.",
        tools=None,
        instructions="Work on the task you are given until it is done, then answer with the "
        "result.",
    ),
    AgentSpec(
        name="explore",
        description="Read-only exploration of the workspace: find files, read them, recall "
        "memory, and report what is where.",
        tools=_READ_TOOLS,
        instructions="Explore read-only. Report findings concisely, with the paths you looked at.",
    ),
    AgentSpec(
        name="task",
        description="Run commands and read files for a well-defined task; returns a short "
        "summary instead of the long output.",
        tools=("exec", *_READ_TOOLS),
        instructions="Run what is needed to complete the task. Your answer is a short summary "
        "(success or failure, the key lines of output), never the full output.",
    ),
    AgentSpec(
        name="rubber-duck",
        description="A critical second opinion on a plan, a design or a diff; cannot change "
        "anything.",
        tools=_READ_TOOLS,
        instructions="Critique what you are given: weak assumptions, missed cases, simpler "
        "alternatives. Be specific and brief. You cannot write files or run commands.",
    ),
)


@dataclass(frozen=True, slots=True)
class _Loaded:
    agents: dict[str, AgentSpec]
    problems: tuple[AgentFileProblem, ...]
    signature: tuple[tuple[str, int, int], ...]


class AgentCatalog:
    """Built-in agents and the custom ones from ``sources``, re-read when files change.

    Custom files are checked at most once a second (a directory listing and one ``stat``
    per file, in a worker thread) and parsed again only when a file changed. A custom
    agent with a built-in's name replaces it. A file with bad front matter is logged
    (file and line) and listed in :attr:`problems`; the rest still load.
    """

    def __init__(
        self,
        *,
        sources: Sequence[AgentSource] = (),
        builtins: Sequence[AgentSpec] = BUILTIN_AGENTS,
        recheck_seconds: float = _RECHECK_SECONDS,
    ) -> None:
        self._sources = tuple(sources)
        self._builtins = {a.name: a for a in builtins}
        self._recheck = recheck_seconds
        self._loaded = _Loaded(dict(self._builtins), (), ())
        self._checked_at = -float("inf")
        self._lock = asyncio.Lock()

    @property
    def problems(self) -> tuple[AgentFileProblem, ...]:
        """Files that could not be read as agents, as of the last check."""
        return self._loaded.problems

    async def agents(self) -> dict[str, AgentSpec]:
        """Every agent by name (built-ins first, then custom ones in source order)."""
        if time.monotonic() - self._checked_at >= self._recheck:
            async with self._lock:
                if time.monotonic() - self._checked_at >= self._recheck:
                    self._loaded = await asyncio.to_thread(self._reload, self._loaded)
                    self._checked_at = time.monotonic()
        return self._loaded.agents

    async def custom(self) -> tuple[tuple[str, str], ...]:
        """The custom agents as ``(name, description)``, for the system prompt."""
        return tuple((a.name, a.description) for a in (await self.agents()).values() if a.source)

    async def get(self, name: str) -> AgentSpec | None:
        return (await self.agents()).get(name)

    def _reload(self, previous: _Loaded) -> _Loaded:
        signature = tuple(_signature(self._sources))
        if signature == previous.signature and previous.signature:
            return previous
        found, problems = load_agent_files(self._sources)
        for problem in problems:
            log.warning(
                "agent file skipped file=%s line=%s: %s",
                problem.path,
                problem.line,
                problem.message,
            )
        agents = dict(self._builtins)
        for spec in found:
            if spec.name in agents and agents[spec.name].source is not None:
                continue  # the earlier source wins (workspace over home)
            if spec.name in self._builtins:
                log.info("custom agent %s replaces the built-in one (%s)", spec.name, spec.source)
            agents[spec.name] = spec
        return _Loaded(agents, tuple(problems), signature)


def _signature(sources: Sequence[AgentSource]) -> list[tuple[str, int, int]]:
    seen: list[tuple[str, int, int]] = []
    for source in sources:
        for path in source.files():
            try:
                info = path.stat()
            except OSError:
                continue
            seen.append((str(path), info.st_mtime_ns, info.st_size))
    return seen


def home_agent_sources(workspace: Path, home: Path | None) -> list[AgentSource]:
    """Where custom agents are read from, highest precedence first."""
    sources = [
        AgentSource(workspace / "agents", "*.md"),
        AgentSource(workspace / ".github" / "agents", "*.agent.md"),
        AgentSource(workspace / ".claude" / "agents", "*.md"),
    ]
    if home is not None:
        sources.append(AgentSource(home / "agents", "*.md"))
    return sources
