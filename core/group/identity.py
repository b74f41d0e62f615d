"""This assistant's identity snapshot: who it is and what it can do, as peers see it."""

from __future__ import annotations

import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from core.group.config import GroupConfig
from core.group.roster import Snapshot

__all__ = ["IDENTITY_FILES", "CapabilitySources", "identity_excerpt", "take_snapshot"]

IDENTITY_FILES = ("IDENTITY.md", "SOUL.md")
_LINES = 5
_CHARS = 600
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
"""An HTML comment, on one line or several, or one never closed (to the end)."""


@dataclass(frozen=True)
class CapabilitySources:
    """Where the capabilities come from now (each is read again at every snapshot, so a
    reload that adds a tool, an agent or a skill shows at the next one)."""

    tools: Callable[[], Iterable[str]]
    agents: Callable[[], Awaitable[Iterable[str]]] | None = None
    skills: Callable[[], Awaitable[Iterable[str]]] | None = None
    channels: Sequence[str] = ()


def identity_excerpt(workspace: Path) -> str:
    """The first non-empty lines of ``IDENTITY.md`` and ``SOUL.md`` (blocking: call it in
    a thread). Missing or unreadable files are left out."""
    parts: list[str] = []
    for name in IDENTITY_FILES:
        try:
            with (workspace / name).open(encoding="utf-8", errors="replace") as file:
                head = file.read(_CHARS * 4)
        except OSError:
            continue
        shown = _COMMENT.sub("", head)
        lines = [line.rstrip() for line in shown.splitlines() if line.strip()][:_LINES]
        if lines:
            parts.append("\n".join(lines)[:_CHARS])
    return "\n\n".join(parts)


async def take_snapshot(
    *,
    name: str,
    config: GroupConfig,
    identity: str,
    version: str,
    sources: CapabilitySources,
    store_schema: str | None,
    started_at: datetime,
) -> Snapshot:
    """The snapshot to announce: only the capabilities ``config.share`` names."""
    capabilities: dict[str, list[str]] = {}
    if "tools" in config.share:
        capabilities["tools"] = sorted(set(sources.tools()))
    if "agents" in config.share and sources.agents is not None:
        capabilities["agents"] = sorted(set(await sources.agents()))
    if "skills" in config.share and sources.skills is not None:
        capabilities["skills"] = sorted(set(await sources.skills()))
    if "channels" in config.share:
        capabilities["channels"] = sorted(set(sources.channels))
    return Snapshot(
        name=name,
        description=config.description,
        identity=identity,
        version=version,
        capabilities=capabilities,
        host=socket.gethostname(),
        store_schema=store_schema,
        started_at=started_at,
    )
