"""The user's workspace: scaffolding from ``workspace_template/`` and heartbeat checks."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath

__all__ = ["heartbeat_is_actionable", "scaffold_workspace"]

logger = logging.getLogger(__name__)

_TEMPLATE_PACKAGE = "workspace_template"
_SKIPPED_NAMES = frozenset({"__init__.py", "__pycache__"})
_FILE_MODE = 0o644


def scaffold_workspace(workspace: Path) -> list[Path]:
    """Copy every template file into ``workspace`` that is not there yet.

    Existing files are never touched: each file is created with ``O_CREAT | O_EXCL``,
    so even a concurrent writer (or a second process) cannot be overwritten. A
    template file whose directory is blocked by a non-directory is skipped with a
    warning. Blocking I/O: call it at startup or through ``asyncio.to_thread``.

    Args:
        workspace: The workspace root; created if missing.

    Returns:
        The files this call created, in template order.
    """
    workspace.mkdir(parents=True, exist_ok=True)
    created: list[Path] = []
    for relative, source in _template_files(files(_TEMPLATE_PACKAGE), PurePosixPath()):
        target = workspace.joinpath(*relative.parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            logger.warning("cannot scaffold %s: a parent path is not a directory", target)
            continue
        if _create_exclusive(target, source.read_bytes()):
            created.append(target)
    if created:
        logger.info("scaffolded %d file(s) into %s", len(created), workspace)
    return created


def _template_files(
    directory: Traversable, prefix: PurePosixPath
) -> Iterator[tuple[PurePosixPath, Traversable]]:
    # Sorted so that the result (and the log) is stable across platforms.
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if entry.name in _SKIPPED_NAMES or entry.name.endswith((".pyc", ".pyo")):
            continue
        if entry.is_dir():
            yield from _template_files(entry, prefix / entry.name)
        elif entry.is_file():
            yield prefix / entry.name, entry


def _create_exclusive(target: Path, data: bytes) -> bool:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(target, flags, _FILE_MODE)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except BaseException:
        # A half-written file would block every later scaffold; remove it.
        target.unlink(missing_ok=True)
        raise
    return True


_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_HEADING = re.compile(r"#{1,6}(?:\s.*)?")
_EMPTY_LIST_ITEM = re.compile(r"(?:[-*+]|\d+[.)])(?:\s+\[[ xX]?\])?")
_THEMATIC_BREAK = re.compile(r"(?:[-*_=]\s*){3,}")


def heartbeat_is_actionable(text: str) -> bool:
    """Tell whether ``HEARTBEAT.md`` asks for anything.

    Only headings, HTML comments (also multi-line or unclosed), blank lines, rules
    and empty list items (``-``, ``- [ ]``, ``1.``) are not actionable; any other
    text is. A heartbeat that is not actionable must not cost a model call.

    Args:
        text: The contents of ``HEARTBEAT.md``.

    Returns:
        True if some line carries an instruction.
    """
    without_comments = _HTML_COMMENT.sub("\n", text)
    for raw_line in without_comments.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        if _HEADING.fullmatch(line) or _EMPTY_LIST_ITEM.fullmatch(line):
            continue
        if _THEMATIC_BREAK.fullmatch(line):
            continue
        return True
    return False
