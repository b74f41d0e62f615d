"""The MCP servers of a home: ``[mcp.servers]`` plus the ``mcp.json`` files users already keep.

A file in the workspace counts only when the operator trusts its content and the
workspace files its servers run (``familiar trust``, `core.trust`); ``$FAMILIAR_HOME/
mcp.json`` is the operator's own and is read as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import ConfigError
from core.mcp import McpConfig, McpServerConfig, parse_mcp_json
from core.mcp.trust import server_files
from core.trust import TRUST_FILE, TrustCheck, WorkspaceTrust

__all__ = [
    "McpSources",
    "UntrustedMcpFile",
    "check_mcp_file",
    "import_paths",
    "read_mcp",
    "resolve_mcp",
]

log = logging.getLogger(__name__)


def import_paths(home: Path, workspace: Path) -> list[Path]:
    """The files servers are imported from, highest precedence first."""
    return [
        workspace / ".mcp.json",
        workspace / ".github" / "mcp.json",
        workspace / ".vscode" / "mcp.json",
        home / "mcp.json",
    ]


@dataclass(frozen=True, slots=True)
class UntrustedMcpFile:
    """A workspace ``mcp.json`` that is ignored: never trusted, or changed since."""

    check: TrustCheck
    servers: tuple[str, ...]
    """The servers it defines (none of them starts)."""


@dataclass(frozen=True, slots=True)
class McpSources:
    """The ``[mcp]`` section with the imported servers merged in, and what was left out."""

    config: McpConfig
    problems: list[str] = field(default_factory=list)
    """Files that could not be read or parsed."""
    untrusted: list[UntrustedMcpFile] = field(default_factory=list)


def _variables(env: Mapping[str, str], workspace: Path) -> dict[str, str]:
    variables = {k: v for k, v in env.items() if not k.upper().startswith("FAMILIAR_")}
    return variables | {"workspaceFolder": str(workspace), "userHome": str(Path.home())}


def check_mcp_file(
    path: Path, *, home: Path, trust: WorkspaceTrust, env: Mapping[str, str]
) -> tuple[TrustCheck, dict[str, McpServerConfig], str | None]:
    """A workspace ``mcp.json`` against the trust record, with the servers it defines
    and why it could not be parsed (blocking). An unparsable file defines none.

    Raises:
        OSError: the file cannot be read.
    """
    content = path.read_bytes()
    servers: dict[str, McpServerConfig] = {}
    problem: str | None = None
    try:
        text = content.decode("utf-8")
        servers = parse_mcp_json(text, env=_variables(env, trust.workspace), source=str(path))
    except UnicodeDecodeError as exc:
        problem = f"{path}: cannot read: {exc}"
    except ConfigError as exc:
        problem = str(exc)
    named: dict[Path, None] = {}
    for server in servers.values():
        named.update(dict.fromkeys(server_files(server, cwd=home, workspace=trust.workspace)))
    return trust.check(path, named, content=content), servers, problem


def read_mcp(
    config: McpConfig,
    *,
    home: Path,
    workspace: Path,
    env: Mapping[str, str],
    trust: WorkspaceTrust | None = None,
) -> McpSources:
    """``config`` with the servers of the files merged in (blocking: reads files).

    A server in ``config.toml`` wins over one of the same name in a file, and a file
    listed earlier by `import_paths` wins over a later one (the whole entry wins, no
    field merge). An unreadable or invalid file is reported and skipped; a workspace
    file that is not trusted with its current content is skipped and logged once.

    Args:
        config: the ``[mcp]`` section.
        home: the familiar home (``$FAMILIAR_HOME/mcp.json``, ``trust.json``).
        workspace: the workspace (``.mcp.json``, ``.github/mcp.json``, ``.vscode/mcp.json``).
        env: what ``$VAR`` / ``${VAR}`` / ``${VAR:-default}`` / ``${env:VAR}`` expand
            from; ``${workspaceFolder}`` and ``${userHome}`` are added. ``FAMILIAR_*``
            variables expand to nothing: they hold the daemon's secrets.
        trust: the workspace's trust record (default: ``$FAMILIAR_HOME/trust.json``); pass
            the same one to each re-read, so an ignored file is logged once per content.
    """
    if not config.import_files:
        return McpSources(config)
    trust = trust or WorkspaceTrust(record=home / TRUST_FILE, workspace=workspace)
    merged: dict[str, McpServerConfig] = {}
    problems: list[str] = []
    untrusted: list[UntrustedMcpFile] = []
    for path in reversed(import_paths(home, workspace)):
        try:
            if path.absolute().is_relative_to(trust.workspace):
                check, servers, problem = check_mcp_file(path, home=home, trust=trust, env=env)
                if not check.trusted:
                    trust.note(check, what="MCP")
                    untrusted.insert(0, UntrustedMcpFile(check, tuple(sorted(servers))))
                elif problem is not None:
                    problems.append(problem)
                else:  # parsed from the very bytes that were hashed
                    merged.update(servers)
                continue
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot read: {exc}")
            continue
        try:
            merged.update(parse_mcp_json(text, env=_variables(env, workspace), source=str(path)))
        except ConfigError as exc:
            problems.append(str(exc))
    merged.update(config.servers)
    for problem in problems:
        log.warning("mcp import: %s", problem)
    return McpSources(config.model_copy(update={"servers": merged}), problems, untrusted)


def resolve_mcp(
    config: McpConfig, *, home: Path, workspace: Path, env: Mapping[str, str]
) -> tuple[McpConfig, list[str]]:
    """`read_mcp`'s config and problems (untrusted files are left out and logged)."""
    found = read_mcp(config, home=home, workspace=workspace, env=env)
    return found.config, found.problems
