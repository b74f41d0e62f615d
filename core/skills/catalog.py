"""The skill catalog: the skills of every source, re-read when a ``SKILL.md`` changes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.skills.config import SkillsConfig
from core.skills.files import load_skills, skills_signature
from core.skills.model import Skill, SkillProblem, SkillSource
from core.skills.prompt import skills_section

__all__ = ["SkillCatalog"]

log = logging.getLogger(__name__)

_RECHECK_SECONDS = 1.0
_MAX_SECTIONS = 256


@dataclass(slots=True)
class _Loaded:
    skills: dict[str, Skill]
    problems: tuple[SkillProblem, ...]
    signature: tuple[tuple[str, int, int], ...] | None
    sections: dict[tuple[str, ...] | None, str | None] = field(default_factory=dict)
    """The prompt section per agent's ``skills`` list (None: every skill)."""


class SkillCatalog:
    """Skills from ``sources``, checked at most once a second (a listing and one ``stat``
    per skill, in a worker thread) and parsed again only when a ``SKILL.md`` changed.

    The first skill of a name wins (sources in precedence order); a file that does not
    load is logged (file and line) and listed in :attr:`problems`; the rest still load.
    """

    def __init__(
        self,
        *,
        sources: Sequence[SkillSource],
        config: SkillsConfig | None = None,
        recheck_seconds: float = _RECHECK_SECONDS,
    ) -> None:
        self._sources = tuple(sources)
        self._config = config or SkillsConfig()
        self._recheck = recheck_seconds
        self._loaded = _Loaded({}, (), None)
        self._checked_at = -float("inf")
        self._lock = asyncio.Lock()

    @property
    def problems(self) -> tuple[SkillProblem, ...]:
        """What was wrong with the skill files, as of the last check."""
        return self._loaded.problems

    async def skills(self) -> dict[str, Skill]:
        """Every loaded skill by name, in precedence order."""
        return (await self._current()).skills

    async def visible(self, allowed: tuple[str, ...] | None) -> list[Skill]:
        """The skills the model may load: not opted out of model invocation, and, for an
        agent with a ``skills`` list (``allowed``), only those named there."""
        return [
            s
            for s in (await self.skills()).values()
            if s.model_invocable and (allowed is None or s.name in allowed)
        ]

    async def find(self, name: str, allowed: tuple[str, ...] | None) -> Skill | None:
        """The skill called ``name`` if the caller may load it."""
        skill = (await self.skills()).get(name)
        if skill is None or not skill.model_invocable:
            return None
        return skill if allowed is None or name in allowed else None

    async def section(self, allowed: tuple[str, ...] | None) -> str | None:
        """The system prompt's ``## Skills`` section for an agent (None: no skills)."""
        loaded = await self._current()
        if allowed in loaded.sections:
            return loaded.sections[allowed]
        text = skills_section(
            await self.visible(allowed),
            max_chars=self._config.prompt_max_chars,
            description_max_chars=self._config.description_max_chars,
        )
        if len(loaded.sections) >= _MAX_SECTIONS:
            loaded.sections.clear()
        loaded.sections[allowed] = text
        return text

    async def _current(self) -> _Loaded:
        if time.monotonic() - self._checked_at >= self._recheck:
            async with self._lock:
                if time.monotonic() - self._checked_at >= self._recheck:
                    self._loaded = await asyncio.to_thread(self._reload, self._loaded)
                    self._checked_at = time.monotonic()
        return self._loaded

    def _reload(self, previous: _Loaded) -> _Loaded:
        signature = skills_signature(self._sources)
        if signature == previous.signature:
            return previous
        skills, problems = load_skills(self._sources)
        for problem in problems:
            log.warning(
                "skill file %s file=%s line=%s: %s",
                "warning" if problem.severity == "warning" else "skipped",
                problem.file,
                problem.line,
                problem.message,
            )
        return _Loaded({s.name: s for s in skills}, tuple(problems), signature)
