"""Built-in file tools confined to the workspace: read, write, edit, list, resolve."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from core.errors import ToolFailed, ToolRetry

from .base import Tool, ToolContext
from .config import ToolsConfig
from .control_files import refuse_control_write
from .decorator import tool
from .workspace_paths import resolve_in_workspace
from .write_guard import WriteGuard

__all__ = ["fs_tools"]

_Check = Callable[[Path, str], None]
"""Raises when the caller may not write this (resolved) target: the guards, bound."""

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


def _open(workspace: Path, target: Path, path: str, flags: int, *, make_dirs: bool = False) -> int:
    """Open ``target`` (resolved, in the workspace) following no symlink on the way.

    ``resolve_in_workspace`` checked a path free of links; a command running meanwhile
    (another session's ``exec``) may swap a directory of it for a link to anywhere (a
    control file, ``$FAMILIAR_HOME``). Walking down from the workspace with
    ``O_NOFOLLOW`` makes that swap fail the call instead. The caller closes the fd.
    """
    parts = target.relative_to(workspace.resolve()).parts
    if not parts:
        raise ToolRetry(f"{path} is a directory")
    base = os.O_NOFOLLOW | os.O_CLOEXEC
    dirfd = os.open(workspace.resolve(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            if make_dirs:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=dirfd)
            fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | base, dir_fd=dirfd)
            os.close(dirfd)
            dirfd = fd
        # O_NONBLOCK: a FIFO planted meanwhile must not hang the open; fstat refuses it.
        fd = os.open(parts[-1], flags | base | os.O_NONBLOCK, 0o666, dir_fd=dirfd)
    except FileNotFoundError:
        raise ToolRetry(f"file not found: {path}") from None
    except IsADirectoryError:
        raise ToolRetry(f"{path} is a directory") from None
    except OSError as exc:  # ELOOP / ENOTDIR: a link where the checked path had none
        raise ToolFailed(f"cannot open {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(dirfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolFailed(f"{path} is not a regular file")
    return fd


def _read(workspace: Path, path: str, max_bytes: int) -> str:
    target = resolve_in_workspace(workspace, path)
    size = _check_kind(target, path, must_exist=True)
    fd = _open(workspace, target, path, os.O_RDONLY)
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(max_bytes)
    except OSError as exc:
        raise ToolFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    if b"\x00" in data[:8192]:
        raise ToolFailed(f"{path} looks like a binary file ({size} bytes); not shown")
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text += f"\n[... truncated: {path} is {size} bytes, showing the first {len(data)} ...]"
    return text


def _write(workspace: Path, path: str, content: str, check: _Check) -> str:
    target = resolve_in_workspace(workspace, path)
    refuse_control_write(workspace, target, path)
    check(target, path)
    _check_kind(target, path, must_exist=False)
    data = content.encode("utf-8")
    fd = _open(workspace, target, path, os.O_WRONLY | os.O_CREAT, make_dirs=True)
    try:
        with os.fdopen(fd, "wb") as f:
            f.truncate(0)
            f.write(data)
    except OSError as exc:
        raise ToolFailed(f"cannot write {path}: {exc.strerror or exc}") from exc
    return f"wrote {len(data)} bytes to {_display(workspace, target)}"


def _edit(workspace: Path, path: str, old_text: str, new_text: str, check: _Check) -> str:
    if not old_text:
        raise ToolRetry("old_text must not be empty")
    target = resolve_in_workspace(workspace, path)
    refuse_control_write(workspace, target, path)
    check(target, path)
    _check_kind(target, path, must_exist=True)
    with os.fdopen(_open(workspace, target, path, os.O_RDWR), "r+b") as handle:
        try:
            text = handle.read().decode("utf-8")
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
            handle.seek(0)
            handle.truncate(0)
            handle.write(text.replace(old_text, new_text, 1).encode("utf-8"))
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


def fs_tools(config: ToolsConfig, *, guards: Sequence[WriteGuard] = ()) -> list[Tool]:
    """The file tools ``read_file``, ``write_file``, ``edit_file``, ``list_dir``, ``resolve_path``.

    Args:
        config: the ``[tools]`` section (``max_file_bytes`` caps ``read_file``).
        guards: parts of the workspace some sessions may not write (``memory/``).
    """
    max_bytes = config.max_file_bytes

    def checks(ctx: ToolContext) -> _Check:
        def check(target: Path, path: str) -> None:
            for guard in guards:
                guard.refuse_write(ctx, target, path)

        return check

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
        return await asyncio.to_thread(_write, ctx.workspace, path, content, checks(ctx))

    @tool
    async def edit_file(ctx: ToolContext, path: str, old_text: str, new_text: str) -> str:
        """Replace one exact occurrence of old_text with new_text in a workspace file.

        Args:
            path: file path, relative to the workspace.
            old_text: the text to replace; must occur exactly once, whitespace included.
            new_text: the replacement text.
        """
        return await asyncio.to_thread(_edit, ctx.workspace, path, old_text, new_text, checks(ctx))

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
