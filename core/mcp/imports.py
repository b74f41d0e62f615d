"""Server definitions from the ``mcp.json`` files other agents use, with their ``$VAR`` expansion.

Pure functions: the caller (``gateway``) reads the files and hands in the environment.
Formats (see conventions §3): ``mcpServers`` (Claude Code, Copilot, Cursor) or ``servers``
(VS Code) map names to entries with ``type`` (``stdio``/``local``, ``http``, ``sse``),
``command``, ``args``, ``env``, ``cwd``, ``url``, ``headers``; unknown keys are ignored.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from core.errors import ConfigError
from core.tool_aliases import safe_server_name

from .config import McpServerConfig

__all__ = ["expand", "parse_mcp_json", "safe_server_name"]

log = logging.getLogger(__name__)

_VAR = re.compile(
    r"\$\{env:(?P<env>[A-Za-z_][A-Za-z0-9_]*)\}"
    r"|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)
_TYPES = {
    "stdio": "stdio",
    "local": "stdio",
    "http": "http",
    "streamable-http": "http",
    "sse": "sse",
}
_FIELDS = ("type", "command", "args", "env", "cwd", "url", "headers", "tools", "timeout")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Expand ``$VAR``, ``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` from ``env``.

    An unset variable without a default expands to the empty string (as a shell does);
    anything else (``${input:x}``, ``${{ secrets.X }}``) is left as it is.
    """

    def one(match: re.Match[str]) -> str:
        name = match.group("env") or match.group("braced") or match.group("bare")
        value = env.get(name)
        if value is None or (value == "" and match.group("default") is not None):
            return match.group("default") or ""
        return value

    return _VAR.sub(one, text)


def _expand_all(value: Any, env: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return expand(value, env)
    if isinstance(value, list):
        return [_expand_all(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _expand_all(v, env) for k, v in value.items()}
    return value


def _entry(raw: dict[str, Any], env: Mapping[str, str], source: str) -> McpServerConfig:
    fields = {k: raw[k] for k in _FIELDS if k in raw}
    if "type" in fields:
        kind = str(fields["type"]).lower()
        if kind not in _TYPES:
            raise ValueError(f"unsupported type {fields['type']!r} (stdio, http or sse)")
        fields["type"] = _TYPES[kind]
    if "timeout" in fields:  # Copilot writes milliseconds
        fields["timeout"] = float(fields["timeout"]) / 1000
    if fields.get("tools") in (["*"], "*"):
        fields["tools"] = None
    elif fields.get("tools") == "":
        fields["tools"] = []
    fields = {
        k: v if k in ("type", "timeout", "tools") else _expand_all(v, env)
        for k, v in fields.items()
    }
    if raw.get("disabled") is True:
        fields["enabled"] = False
    return McpServerConfig(**fields, source=source)


def parse_mcp_json(text: str, *, env: Mapping[str, str], source: str) -> dict[str, McpServerConfig]:
    """The servers defined in one ``mcp.json`` document.

    An entry that is not valid is skipped with a warning naming it (one broken entry
    does not hide the others).

    Args:
        text: the file's content.
        env: the environment ``$VAR`` references expand from.
        source: where it came from (a path), kept on each server.

    Raises:
        ConfigError: the document is not JSON, or not an object of server entries.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc}", key="mcp") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object", key="mcp")
    entries = data.get("mcpServers", data.get("servers", {}))
    if not isinstance(entries, dict):
        raise ConfigError(f"{source}: 'mcpServers' / 'servers' must be an object", key="mcp")
    servers: dict[str, McpServerConfig] = {}
    for name, raw in entries.items():
        if not isinstance(raw, dict):
            log.warning("mcp server %r in %s skipped: not an object", name, source)
            continue
        try:
            servers[safe_server_name(str(name))] = _entry(raw, env, source)
        except (ValidationError, ValueError, TypeError) as exc:
            log.warning("mcp server %r in %s skipped: %s", name, source, exc)
    return servers
