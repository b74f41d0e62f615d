"""Subagents: the TaskRegistry's records, the agent catalog and custom agent files.

The registry itself (`core.tasks.registry`), its tools (`core.tasks.tools`) and the
``/tasks`` command (`core.tasks.commands`) are imported from their modules, which
keeps this package light. `SubagentsConfig` lives in `core.tools.subagents_config`
(the ``[tools.subagents]`` section), below the tasks that read it.
"""

from __future__ import annotations

from core.tasks.records import TaskRecord, TaskRow, TaskStatus
from core.tasks.spec import AgentSpec
from core.tools.subagents_config import MEMORY_SHARE_MODES, MemoryShareMode, SubagentsConfig

__all__ = [
    "MEMORY_SHARE_MODES",
    "AgentSpec",
    "MemoryShareMode",
    "SubagentsConfig",
    "TaskRecord",
    "TaskRow",
    "TaskStatus",
]
