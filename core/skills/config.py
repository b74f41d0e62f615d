"""SkillsConfig: the ``[skills]`` section (Agent Skills on or off, the prompt's budget)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SkillsConfig"]


class SkillsConfig(BaseModel):
    """The ``[skills]`` section: Agent Skills (folders with a ``SKILL.md``).

    Attributes:
        enabled: read skills and offer the ``skill`` tool at all.
        prompt_max_chars: characters of the system prompt's ``## Skills`` section (names
            and descriptions); skills beyond it are named only, or counted, and still load
            through the ``skill`` tool. 0 leaves the section out.
        description_max_chars: characters of one skill's description in that section
            (longer ones are cut with ``…``).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    prompt_max_chars: int = Field(default=4000, ge=0)
    description_max_chars: int = Field(default=250, ge=20)
