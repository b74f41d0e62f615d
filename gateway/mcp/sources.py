"""The MCP servers of a home: ``[mcp.servers]`` plus the ``mcp.json`` files users already keep."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from core.errors import ConfigError
from core.mcp import McpConfig, McpServerConfig, parse_mcp_json

__all__ = ["import_paths", "resolve_mcp"]

log = logging.getLogger(__name__)


def import_paths(home: Path, workspace: Path) -> list[Path]:
    """The files servers are imported from, highest precedence first."""
    return [
        workspace / ".mcp.json",
        workspace / ".github" / "mcp.json",
        workspace / ".vscode" / "mcp.json",
        home / "mcp.json",
    ]


def resolve_mcp(
    config: McpConfig, *, home: Path, workspace: Path, env: Mapping[str, str]
) -> tuple[McpConfig, list[str]]:
    """``config`` with the imported servers merged in, and the problems met on the way.

    A server in ``config.toml`` wins over one of the same name in a file, and a file
    listed earlier by `import_paths` wins over a later one (the whole entry wins, no
    field merge). An unreadable or invalid file is reported and skipped.

    Args:
        config: the ``[mcp]`` section.
        home: the familiar home (``$FAMILIAR_HOME/mcp.json``).
        workspace: the workspace (``.mcp.json``, ``.github/mcp.json``, ``.vscode/mcp.json``).
        env: what ``$VAR`` / ``${VAR}`` / ``${VAR:-default}`` / ``${env:VAR}`` expand
            from; ``${workspaceFolder}`` and ``${userHome}`` are added. ``FAMILIAR_*``
            variables expand to nothing: they hold the daemon's secrets, and the
            workspace files are writable by the agent itself.
    """
    if not config.import_files:
        return config, []
    variables = {k: v for k, v in env.items() if not k.upper().startswith("FAMILIAR_")}
    variables |= {"workspaceFolder": str(workspace), "userHome": str(Path.home())}
    merged: dict[str, McpServerConfig] = {}
    problems: list[str] = []
    for path in reversed(import_paths(home, workspace)):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot read: {exc}")
            continue
        try:
            merged.update(parse_mcp_json(text, env=variables, source=str(path)))
        except ConfigError as exc:
            problems.append(str(exc))
    merged.update(config.servers)
    for problem in problems:
        log.warning("mcp import: %s", problem)
    return config.model_copy(update={"servers": merged}), problems
