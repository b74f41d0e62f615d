"""The JSONL transcript of a session that hooks read through ``transcript_path``.

Claude Code hands every hook the path of the session's transcript (one JSON object per
line: ``{"type": "user" | "assistant", "message": {"role", "content"}, "uuid",
"parentUuid", "sessionId", "timestamp", "cwd", ...}``, tool calls as ``tool_use`` blocks
and their results as ``tool_result`` blocks); Stop hooks commonly read the last
assistant message from it. familiar renders it from the session's event log, plus the
running turn's events not written yet, right before a hook that gets the path runs:
the event log stays the one record, and a transcript costs nothing until a hook asks.

Files: ``$FAMILIAR_HOME/transcripts/<session>-<hash>.jsonl`` (mode 0600 in a 0700
folder), replaced whole (a hook never reads half a file), the newest
``hooks.transcript_max_events`` events within ``hooks.transcript_max_bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.event_data import AssistantMessage, ToolComplete, ToolStart, UserMessage
from core.events import Event, EventLog
from core.hooks.config import HooksConfig
from core.private_files import PRIVATE_FILE, private_dir

from .dialects import to_claude

__all__ = ["TRANSCRIPTS_DIR", "Transcripts", "hook_transcripts", "render", "transcript_name"]

TRANSCRIPTS_DIR = "transcripts"
"""The folder of hook transcripts, in ``$FAMILIAR_HOME``."""

_TEXT_CAP = 100_000
"""Characters kept of one message or result (a line stays far below the file's cap)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def transcript_name(session_key: str) -> str:
    """A file name for ``session_key``: readable, and distinct for distinct keys."""
    readable = _UNSAFE.sub("_", session_key).strip("._")[:64] or "session"
    return f"{readable}-{hashlib.sha256(session_key.encode()).hexdigest()[:16]}.jsonl"


def _cap(text: str) -> str:
    return text if len(text) <= _TEXT_CAP else text[:_TEXT_CAP] + " [... cut]"


def _content(data: object) -> tuple[str, Any] | None:
    """(``type``, ``message.content``) of one event's line, or None (not conversation)."""
    if isinstance(data, UserMessage):
        return "user", _cap(data.text)
    if isinstance(data, AssistantMessage):
        if not data.content:
            return None  # tool calls only: each has its own tool_use line
        return "assistant", [{"type": "text", "text": _cap(data.content)}]
    if isinstance(data, ToolStart):
        name, given = to_claude(data.tool, data.arguments)
        return "assistant", [{"type": "tool_use", "id": data.call_id, "name": name, "input": given}]
    if isinstance(data, ToolComplete):
        block = {
            "type": "tool_result",
            "tool_use_id": data.call_id,
            "content": _cap(data.result),
            "is_error": data.is_error,
        }
        return "user", [block]
    return None


def render(session_key: str, events: Iterable[Event], *, cwd: str) -> list[str]:
    """The transcript lines of ``events`` (oldest first), each a JSON object."""
    lines: list[str] = []
    parent: str | None = None
    for i, event in enumerate(events):
        found = _content(event.data)
        if found is None:
            continue
        kind, content = found
        seed = f"{session_key}\n{event.id}\n{event.created_at!r}\n{i}"
        line_id = str(uuid.uuid5(uuid.NAMESPACE_URL, seed))
        doc = {
            "type": kind,
            "message": {"role": kind, "content": content},
            "uuid": line_id,
            "parentUuid": parent,
            "sessionId": session_key,
            "timestamp": datetime.fromtimestamp(event.created_at, UTC).isoformat(),
            "cwd": cwd,
            "isSidechain": session_key.startswith("subagent:"),
            "userType": "external",
        }
        lines.append(json.dumps(doc, ensure_ascii=False, default=str))
        parent = line_id
    return lines


def _newest_within(lines: Sequence[str], max_bytes: int) -> list[str]:
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line.encode()) + 1
        if size > max_bytes:
            break
        kept.append(line)
    kept.reverse()
    return kept


class Transcripts:
    """Writes session transcripts for hooks under ``directory`` (``$FAMILIAR_HOME/
    transcripts``)."""

    def __init__(
        self, *, directory: Path, events: EventLog, max_events: int, max_bytes: int
    ) -> None:
        self.directory = directory
        self._events = events
        self._max_events = max_events
        self._max_bytes = max_bytes

    def path(self, session_key: str) -> Path:
        return self.directory / transcript_name(session_key)

    async def write(self, session_key: str, *, cwd: str, pending: Sequence[Event] = ()) -> Path:
        """Render the session's transcript now; returns its path.

        Args:
            pending: the running turn's events not in the log yet (snapshot taken
                before the log is read: one flushed meanwhile is then in both, and is
                dropped from these).
        """
        pending = [e for e in pending if e.session_key == session_key]
        logged = await self._events.list(session_key, limit=self._max_events)
        seen = {(e.message_id, e.type, e.created_at) for e in logged}
        fresh = [e for e in pending if (e.message_id, e.type, e.created_at) not in seen]
        events = [*logged, *fresh][-self._max_events :]
        lines = _newest_within(render(session_key, events, cwd=cwd), self._max_bytes)
        path = self.path(session_key)
        await asyncio.to_thread(_replace, path, lines)
        return path


def _replace(path: Path, lines: Sequence[str]) -> None:
    """Write ``lines`` to ``path`` (0600) through a temporary file and a rename."""
    private_dir(path.parent)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    temp = Path(name)
    try:
        os.fchmod(fd, PRIVATE_FILE)
        with os.fdopen(os.dup(fd), "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        os.replace(temp, path)
    finally:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def hook_transcripts(
    home: Path | None, events: EventLog, config: HooksConfig
) -> Transcripts | None:
    """The transcripts of a gateway whose home is ``home`` (None without a home: the
    workspace is no place for them, the agent writes there)."""
    if home is None:
        return None
    return Transcripts(
        directory=home / TRANSCRIPTS_DIR,
        events=events,
        max_events=config.transcript_max_events,
        max_bytes=config.transcript_max_bytes,
    )
