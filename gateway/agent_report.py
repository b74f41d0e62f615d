"""Every agent type and agent file as the gateway reads them (``familiar agents list``,
the control API's ``GET /v1/system``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.tasks.agent_files import file_id, load_agent_files
from core.tasks.agent_tools import BUILTIN_TOOLS, ToolVocabulary
from core.tasks.catalog import BUILTIN_AGENTS, home_agent_sources
from core.tasks.spec import AgentSpec
from gateway.config import FamiliarConfig, workspace_dir
from gateway.mcp import resolve_mcp

__all__ = ["agent_report"]


def agent_report(home: Path, config: FamiliarConfig) -> list[dict[str, Any]]:
    """Every agent and every agent file: what loaded (tools as mapped, names that map to
    nothing, model as resolved) and, for the files that did not, why."""
    workspace = workspace_dir(home, config)
    mcp, _ = resolve_mcp(config.mcp, home=home, workspace=workspace, env=os.environ)
    servers = [name for name, server in mcp.servers.items() if server.enabled]
    found = load_agent_files(
        home_agent_sources(workspace, home),
        vocabulary=ToolVocabulary.of(BUILTIN_TOOLS, servers),
        models=config.models,
    )
    custom = {spec.name for spec in found.agents}
    rows = [_loaded(spec) for spec in BUILTIN_AGENTS if spec.name not in custom]
    rows += [_loaded(spec) for spec in found.agents]
    for problem in found.problems:
        rows.append(
            _unloaded(file_id(Path(problem.path)), problem.path, problem.line, problem.message)
        )
    for shadowed in found.shadowed:
        reason = f"shadowed by {shadowed.by} (the same id, read first)"
        rows.append(_unloaded(shadowed.name, shadowed.path, None, reason, by=shadowed.by))
    return rows


def _loaded(spec: AgentSpec) -> dict[str, Any]:
    return {
        "id": spec.name,
        "display_name": spec.display_name,
        "description": spec.description,
        "source": spec.source or "built-in",
        "tools": "all" if spec.tools is None else list(spec.tools),
        "unmapped_tools": list(spec.unmapped_tools),
        "model": spec.model or "inherit",
        "model_requested": spec.requested_model,
        "memory_share_mode": spec.memory_share_mode,
        "loaded": True,
        "reason": None,
        "line": None,
        "shadowed_by": None,
        "notes": list(spec.notes),
    }


def _unloaded(
    name: str, source: str, line: int | None, reason: str, *, by: str | None = None
) -> dict[str, Any]:
    return {
        "id": name,
        "display_name": None,
        "description": None,
        "source": source,
        "tools": None,
        "unmapped_tools": [],
        "model": None,
        "model_requested": None,
        "memory_share_mode": None,
        "loaded": False,
        "reason": reason,
        "line": line,
        "shadowed_by": by,
        "notes": [],
    }
