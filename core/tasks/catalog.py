"""The agent catalog: built-in agent types plus custom agents read from Markdown files."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.agent.agents_section import AgentListing
from core.providers.aliases import ModelAliases
from core.tasks.agent_files import AgentFileProblem, AgentSource, Shadowed, load_agent_files
from core.tasks.agent_tools import ToolVocabulary
from core.tasks.orchestration_agents import ORCHESTRATION_AGENTS, SEALED_AGENTS
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
    *ORCHESTRATION_AGENTS,
)


@dataclass(frozen=True, slots=True)
class _Loaded:
    agents: dict[str, AgentSpec]
    listing: tuple[AgentListing, ...]
    problems: tuple[AgentFileProblem, ...]
    shadowed: tuple[Shadowed, ...]
    signature: tuple[object, ...]


class AgentCatalog:
    """Built-in agents and the custom ones from ``sources``, re-read when files change.

    Custom files are checked at most once a second (a directory listing and one ``stat``
    per file, in a worker thread) and parsed again only when a file changed (or the
    tools and MCP servers their ``tools`` map to did). A custom agent with a built-in's
    name replaces it, except a sealed one (`SEALED_AGENTS`). A file with bad front
    matter is logged (file and line) and listed in :attr:`problems`; the rest still load.
    What an agent's file says that maps to nothing (a tool, a model) is logged once.
    """

    def __init__(
        self,
        *,
        sources: Sequence[AgentSource] = (),
        builtins: Sequence[AgentSpec] = BUILTIN_AGENTS,
        recheck_seconds: float = _RECHECK_SECONDS,
        vocabulary: Callable[[], ToolVocabulary] | None = None,
        models: ModelAliases | None = None,
    ) -> None:
        """Create a catalog.

        Args:
            vocabulary: our tools and the configured MCP servers, asked at each check
                (default: the built-in tools, no MCP server).
            models: the ``[models]`` table agents' ``model`` resolves through.
        """
        self._sources = tuple(sources)
        self._builtins = {a.name: a for a in builtins}
        self._recheck = recheck_seconds
        self._vocabulary = vocabulary or ToolVocabulary
        self.models = models or ModelAliases()
        self._loaded = _Loaded(
            dict(self._builtins), _listing(self._builtins.values(), self._sources), (), (), ()
        )
        self._checked_at = -float("inf")
        self._lock = asyncio.Lock()
        self._reported: set[tuple[str, str]] = set()

    @property
    def problems(self) -> tuple[AgentFileProblem, ...]:
        """Files that could not be read as agents, as of the last check."""
        return self._loaded.problems

    @property
    def shadowed(self) -> tuple[Shadowed, ...]:
        """Files not used because an earlier one has an agent of the same id."""
        return self._loaded.shadowed

    async def agents(self) -> dict[str, AgentSpec]:
        """Every agent by id (built-ins first, then custom ones in source order)."""
        return (await self._current()).agents

    async def listing(self) -> tuple[AgentListing, ...]:
        """Every agent as the system prompt lists it (the same tuple until a change)."""
        return (await self._current()).listing

    async def get(self, name: str) -> AgentSpec | None:
        return (await self.agents()).get(name)

    async def _current(self) -> _Loaded:
        if time.monotonic() - self._checked_at >= self._recheck:
            async with self._lock:
                if time.monotonic() - self._checked_at >= self._recheck:
                    vocabulary = self._vocabulary()
                    self._loaded = await asyncio.to_thread(self._reload, self._loaded, vocabulary)
                    self._checked_at = time.monotonic()
        return self._loaded

    def _reload(self, previous: _Loaded, vocabulary: ToolVocabulary) -> _Loaded:
        signature = (vocabulary, *_signature(self._sources))
        if signature == previous.signature:
            return previous
        found = load_agent_files(self._sources, vocabulary=vocabulary, models=self.models)
        for problem in found.problems:
            log.warning(
                "agent file skipped file=%s line=%s: %s",
                problem.path,
                problem.line,
                problem.message,
            )
        for shadowed in found.shadowed:
            log.info(
                "agent %s from %s is shadowed by %s", shadowed.name, shadowed.path, shadowed.by
            )
        agents = dict(self._builtins)
        for spec in found.agents:
            if spec.name in agents and agents[spec.name].source is not None:
                continue  # the earlier source wins (workspace over home)
            if spec.name in SEALED_AGENTS and spec.name in self._builtins:
                log.warning(
                    "agent file ignored file=%s: the built-in %s cannot be replaced",
                    spec.source,
                    spec.name,
                )
                continue
            if spec.name in self._builtins:
                log.info("custom agent %s replaces the built-in one (%s)", spec.name, spec.source)
            agents[spec.name] = spec
            self._report(spec)
        listing = _listing(agents.values(), self._sources)
        return _Loaded(agents, listing, tuple(found.problems), tuple(found.shadowed), signature)

    def _report(self, spec: AgentSpec) -> None:
        """Log what of ``spec``'s file maps to nothing, once per file and note."""
        for note in spec.notes:
            key = (spec.source or spec.name, note)
            if key not in self._reported:
                self._reported.add(key)
                log.warning("agent %s file=%s: %s", spec.name, spec.source, note)


def _listing(
    agents: Iterable[AgentSpec], sources: Sequence[AgentSource]
) -> tuple[AgentListing, ...]:
    return tuple(
        AgentListing(a.name, a.description, a.display_name, _group(a, sources)) for a in agents
    )


def _group(spec: AgentSpec, sources: Sequence[AgentSource]) -> int:
    """0 for a built-in; else 1 + the index of the source its file is in."""
    if spec.source is None:
        return 0
    path = Path(spec.source)
    for index, source in enumerate(sources):
        if path.is_relative_to(source.directory):
            return index + 1
    return len(sources) + 1


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
        AgentSource(workspace / ".github" / "agents", "*.md"),
        AgentSource(workspace / ".claude" / "agents", "*.md"),
        AgentSource(workspace / ".github" / "chatmodes", "*.chatmode.md"),
    ]
    if home is not None:
        sources.append(AgentSource(home / "agents", "*.md"))
    return sources
