"""Subagents: the TaskRegistry's records, the agent catalog and custom agent files.

The registry itself (`core.tasks.registry`), its tools (`core.tasks.tools`) and the
``/tasks`` command (`core.tasks.commands`) are imported from their modules: this
package stays light because ``core.tools.config`` imports its config.
"""

from __future__ import annotations

from core.tasks.config import MEMORY_SHARE_MODES, MemoryShareMode, SubagentsConfig
from core.tasks.records import TaskRecord, TaskRow, TaskStatus
from core.tasks.spec import AgentSpec

__all__ = [
    "MEMORY_SHARE_MODES",
    "AgentSpec",
    "MemoryShareMode",
    "SubagentsConfig",
    "TaskRecord",
    "TaskRow",
    "TaskStatus",
]
