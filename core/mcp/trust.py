"""Workspace trust for MCP servers: which workspace files a server runs, and a check at start."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.trust import WorkspaceTrust, named_files

from .config import McpServerConfig

__all__ = ["server_files", "trust_verifier"]


def server_files(server: McpServerConfig, *, cwd: Path, workspace: Path) -> list[Path]:
    """The workspace files a stdio server runs (its command and arguments); none for HTTP.

    Args:
        cwd: where it runs unless it names a ``cwd`` (``$FAMILIAR_HOME`` in the gateway).
        workspace: the workspace (absolute).
    """
    if server.transport != "stdio" or not server.command:
        return []
    where = Path(server.cwd).absolute() if server.cwd else cwd
    return named_files([[server.command, *server.args]], cwd=where, workspace=workspace)


def trust_verifier(trust: WorkspaceTrust, *, cwd: Path) -> Callable[[McpServerConfig], str | None]:
    """Why a server from a workspace file may not start now (None: it may).

    Checked before every start and restart (blocking: call it in a thread): a server
    whose file, or a file it runs, changed since it was trusted stays down.

    Args:
        cwd: the servers' default working directory, as `McpManager` gets it.
    """

    def verify(server: McpServerConfig) -> str | None:
        source = Path(server.source)
        if not source.is_absolute() or not source.is_relative_to(trust.workspace):
            return None  # config.toml, $FAMILIAR_HOME/mcp.json: the operator's own
        check = trust.check(source, server_files(server, cwd=cwd, workspace=trust.workspace))
        if check.trusted:
            return None
        trust.note(check, what="MCP server")
        return f"{source} is {check.state.value}: run {trust.allow_command(source)}"

    return verify
