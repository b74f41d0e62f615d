"""Workspace memory files (``memory/**/*.md``) indexed into the ``global`` scope.

A background task checks the files' mtimes every ``[memory] files_poll_seconds``; the
stat calls, reads and chunking run in a worker thread, the writes as one store job
per changed file, so turns never wait on it. At start every file is read once and
compared with what is indexed, so an unchanged file is not rewritten.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, delete, insert, select

from core.background import BackgroundTask
from core.memory.config import MemoryConfig
from core.memory.models import MemoryRow
from core.memory.search import scope_token
from core.memory.service import GLOBAL
from core.store.engine import Store
from core.workspace_read import read_workspace_text

__all__ = ["MEMORY_DIR", "MemoryFileIndexer", "chunk_markdown"]

log = logging.getLogger(__name__)

_MAX_FILE_BYTES = 4 * 1024 * 1024
"""A memory file larger than this is indexed up to here."""

MEMORY_DIR = "memory"
_table = MemoryRow.__table__  # type: ignore[attr-defined]
_HEADING = re.compile(r"^#{1,6}\s")
_PARAGRAPHS = re.compile(r"\n\s*\n")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def chunk_markdown(text: str, max_chars: int) -> list[str]:
    """Split Markdown by heading, then by paragraph, into chunks of at most ``max_chars``.

    A chunk keeps the heading of its section, so a paragraph found alone still says
    what it is about. HTML comments (a template's instructions), NUL characters and
    sections that are only a heading are left out.
    """
    sections: list[list[str]] = [[]]
    # NUL cannot be stored in PostgreSQL text (and never belongs in Markdown).
    for line in _COMMENT.sub("", text.replace("\x00", "")).splitlines():
        if _HEADING.match(line) and any(s.strip() for s in sections[-1]):
            sections.append([])
        sections[-1].append(line)
    chunks: list[str] = []
    for lines in sections:
        body = "\n".join(lines).strip()
        if not body:
            continue
        heading = lines[0].strip() if _HEADING.match(lines[0]) else ""
        if body == heading:
            continue
        chunks.extend(_split_section(body, heading, max_chars))
    return chunks


def _split_section(body: str, heading: str, max_chars: int) -> list[str]:
    if len(body) <= max_chars:
        return [body]
    chunks: list[str] = []
    current = ""
    prefix = f"{heading}\n\n" if heading else ""
    for paragraph in (p.strip() for p in _PARAGRAPHS.split(body)):
        if not paragraph or paragraph == heading:
            continue
        candidate = f"{current}\n\n{paragraph}" if current else f"{prefix}{paragraph}"
        if len(candidate) <= max_chars:
            current = candidate
            continue
        if current:
            chunks.append(current)
        piece = f"{prefix}{paragraph}"
        while len(piece) > max_chars:  # one paragraph longer than a chunk: hard cut
            chunks.append(piece[:max_chars])
            piece = prefix + piece[max_chars:]
        current = piece
    if current:
        chunks.append(current)
    return chunks


@dataclass(frozen=True, slots=True)
class _Change:
    path: str
    """Workspace-relative, with forward slashes."""
    chunks: list[str] | None
    """None when the file is gone."""


class MemoryFileIndexer:
    """Keeps the chunks of ``workspace/memory/**/*.md`` in the global memory scope."""

    def __init__(self, *, store: Store, workspace: Path, config: MemoryConfig) -> None:
        self._store = store
        self._root = workspace / MEMORY_DIR
        self._workspace = workspace
        self._config = config
        self._known: dict[str, tuple[int, int]] = {}
        self._worker = BackgroundTask("familiar-memory-files")
        self._swept = False
        self.indexed = 0
        """Files (re)written into the index so far."""

    async def start(self) -> None:
        self._worker.start(self._loop)

    async def stop(self) -> None:
        await self._worker.stop()

    async def _loop(self) -> None:
        while True:
            try:
                await self.scan()
            except Exception:
                log.exception("indexing workspace memory files failed; retrying")
            await asyncio.sleep(self._config.files_poll_seconds)

    async def scan(self) -> int:
        """Index what changed on disk since the last scan; returns how many files changed."""
        changes = await asyncio.to_thread(self._changes)
        written = 0
        for change in changes:
            if await self._store.transact(functools.partial(self._apply_in, change=change)):
                written += 1
                log.info("memory file indexed path=%s", change.path)
        if not self._swept:  # files deleted while the daemon was down
            keep = list(self._known)
            gone = (_table.c.path.is_not(None)) & (_table.c.path.not_in(keep))
            await self._store.transact(lambda conn: conn.execute(delete(_table).where(gone)))
            self._swept = True
        self.indexed += written
        return written

    def _changes(self) -> list[_Change]:
        # Worker thread: stat every file, read and chunk the changed ones. Nothing here
        # follows a symbolic link or reads a non-regular file: exec may plant either.
        seen: dict[str, tuple[int, int]] = {}
        changes: list[_Change] = []
        for path in sorted(self._root.rglob("*.md")) if self._root.is_dir() else []:
            try:
                info = os.lstat(path)
                if not stat.S_ISREG(info.st_mode):
                    continue
                rel = path.relative_to(self._workspace).as_posix()
                signature = (info.st_mtime_ns, info.st_size)
                if self._known.get(rel) == signature:
                    seen[rel] = signature
                    continue
                read = read_workspace_text(self._workspace, rel, max_bytes=_MAX_FILE_BYTES)
            except OSError as exc:
                log.warning("cannot read memory file %s: %s", path, exc)
                continue
            if read is None:  # reached through a link, or no longer a regular file
                continue
            seen[rel] = (read.mtime_ns, read.size)
            changes.append(_Change(rel, chunk_markdown(read.text, self._config.file_chunk_chars)))
        changes.extend(_Change(rel, None) for rel in self._known.keys() - seen.keys())
        self._known = seen
        return changes

    def _apply_in(self, conn: Connection, change: _Change) -> bool:
        where = _table.c.path == change.path
        existing = [
            r[0] for r in conn.execute(select(_table.c.text).where(where).order_by(_table.c.id))
        ]
        if existing == (change.chunks or []):
            return False
        conn.execute(delete(_table).where(where))
        if change.chunks:
            now = time.time()
            tags = json.dumps(["file", change.path.rsplit("/", 1)[-1]])
            conn.execute(
                insert(_table),
                [
                    {
                        "scope": GLOBAL,
                        "scope_token": scope_token(GLOBAL),
                        "text": chunk,
                        "tags": tags,
                        "source": f"file:{change.path}"[:256],
                        "path": change.path,
                        "created_at": now,
                        "updated_at": now,
                    }
                    for chunk in change.chunks
                ],
            )
        return True
