"""Agent Skills: folders with a ``SKILL.md`` (the open format of agentskills.io).

The catalog (`core.skills.catalog`), the ``skill`` tool (`core.skills.tool`) and the
prompt section (`core.skills.prompt`) are imported from their modules: this package stays
light because ``gateway.config`` imports its config.
"""

from __future__ import annotations

from core.skills.config import SkillsConfig

__all__ = ["SkillsConfig"]
