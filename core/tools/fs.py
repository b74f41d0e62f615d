"""Built-in file tools confined to the workspace: read, write, edit, list, resolve."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from core.errors import ToolFailed, ToolRetry

from .base import Tool, ToolContext
from .config import ToolsConfig
from .control_files import refuse_control_write
from .decorator import tool
from .workspace_paths import resolve_in_workspace

__all__ = ["fs_tools"]

_MAX_ENTRIES = 1000


def _display(workspace: Path, target: Path) -> str:
    rel = target.relative_to(workspace.resolve()).as_posix()
    return rel if rel != "." else "."


def _check_kind(target: Path, path: str, *, must_exist: bool) -> int:
    """The file's size; refuses directories and special files (a FIFO would block)."""
    try:
        info = target.stat()
    except FileNotFoundError:
        if must_exist:
            raise ToolRetry(f"file not found: {path}") from None
        return 0
    except OSError as exc:
        raise ToolFailed(f"cannot access {path}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(info.st_mode):
        raise ToolRetry(f"{path} is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailed(f"{path} is not a regular file")
    return info.st_size


def _read(workspace: Path, path: str, max_bytes: int) -> str:
    target = resolve_in_workspace(workspace, path)
    size = _check_kind(target, path, must_exist=True)
    try:
        with target.open("rb") as f:
            data = f.read(max_bytes)
    except OSError as exc:
        raise ToolFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    if b"\x00" in data[:8192]:
        raise ToolFailed(f"{path} looks like a binary file ({size} bytes); not shown")
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text += f"\n[... truncated: {path} is {size} bytes, showing the first {len(data)} ...]"
    return text


def _write(workspace: Path, path: str, content: str) -> str:
    target = resolve_in_workspace(workspace, path)
    refuse_control_write(workspace, target, path)
    _check_kind(target, path, must_exist=False)
    data = content.encode("utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        raise ToolFailed(f"cannot write {path}: {exc.strerror or exc}") from exc
    return f"wrote {len(data)} bytes to {_display(workspace, target)}"


def _edit(workspace: Path, path: str, old_text: str, new_text: str) -> str:
    if not old_text:
        raise ToolRetry("old_text must not be empty")
    target = resolve_in_workspace(workspace, path)
    refuse_control_write(workspace, target, path)
    _check_kind(target, path, must_exist=True)
    try:
        text = target.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailed(f"{path} is not a UTF-8 text file") from None
    except OSError as exc:
        raise ToolFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    count = text.count(old_text)
    if count == 0:
        raise ToolRetry(f"old_text not found in {path}; it must match the file exactly")
    if count > 1:
        raise ToolRetry(
            f"old_text occurs {count} times in {path}; include more surrounding text "
            "so that it matches exactly once"
        )
    try:
        target.write_bytes(text.replace(old_text, new_text, 1).encode("utf-8"))
    except OSError as exc:
        raise ToolFailed(f"cannot write {path}: {exc.strerror or exc}") from exc
    return f"edited {_display(workspace, target)}"


def _entry_line(entry: Path) -> str:
    info = entry.lstat()
    if stat.S_ISLNK(info.st_mode):
        return f"{entry.name}@ (symlink)"
    if stat.S_ISDIR(info.st_mode):
        return f"{entry.name}/"
    return f"{entry.name}  ({info.st_size} bytes)"


def _list(workspace: Path, path: str) -> str:
    target = resolve_in_workspace(workspace, path)
    try:
        entries = sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    except FileNotFoundError:
        raise ToolRetry(f"directory not found: {path}") from None
    except NotADirectoryError:
        raise ToolRetry(f"{path} is a file; use read_file") from None
    except OSError as exc:
        raise ToolFailed(f"cannot list {path}: {exc.strerror or exc}") from exc
    if not entries:
        return f"{_display(workspace, target)}: (empty directory)"
    lines = [_entry_line(e) for e in entries[:_MAX_ENTRIES]]
    if len(entries) > _MAX_ENTRIES:
        lines.append(f"[... {len(entries) - _MAX_ENTRIES} more entries not shown ...]")
    return "\n".join(lines)


def fs_tools(config: ToolsConfig) -> list[Tool]:
    """The file tools ``read_file``, ``write_file``, ``edit_file``, ``list_dir``, ``resolve_path``.

    Args:
        config: the ``[tools]`` section (``max_file_bytes`` caps ``read_file``).
    """
    max_bytes = config.max_file_bytes

    @tool
    async def read_file(ctx: ToolContext, path: str) -> str:
        """Read a UTF-8 text file from the workspace (long files are truncated).

        Args:
            path: file path, relative to the workspace.
        """
        return await asyncio.to_thread(_read, ctx.workspace, path, max_bytes)

    @tool
    async def write_file(ctx: ToolContext, path: str, content: str) -> str:
        """Write a text file in the workspace, replacing it and creating parent directories.

        Args:
            path: file path, relative to the workspace.
            content: the complete new content of the file.
        """
        return await asyncio.to_thread(_write, ctx.workspace, path, content)

    @tool
    async def edit_file(ctx: ToolContext, path: str, old_text: str, new_text: str) -> str:
        """Replace one exact occurrence of old_text with new_text in a workspace file.

        Args:
            path: file path, relative to the workspace.
            old_text: the text to replace; must occur exactly once, whitespace included.
            new_text: the replacement text.
        """
        return await asyncio.to_thread(_edit, ctx.workspace, path, old_text, new_text)

    @tool
    async def list_dir(ctx: ToolContext, path: str = ".") -> str:
        """List a workspace directory: directories end with "/", files show their size.

        Args:
            path: directory path, relative to the workspace.
        """
        return await asyncio.to_thread(_list, ctx.workspace, path)

    @tool
    async def resolve_path(ctx: ToolContext, path: str) -> str:
        """Show the absolute path a workspace path refers to, or why it is refused.

        Args:
            path: a path, relative to the workspace.
        """
        resolved = await asyncio.to_thread(resolve_in_workspace, ctx.workspace, path)
        return str(resolved)

    return [read_file, write_file, edit_file, list_dir, resolve_path]
