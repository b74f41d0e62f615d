"""Reading workspace files on the daemon's side without following links out of it.

`exec` may run anything in the workspace, including ``ln -s ../config.toml AGENTS.md``
or ``mkfifo memory/x.md``. The daemon reads some workspace files with its own rights
(identity files into every prompt, memory files into global memory, HEARTBEAT.md), so
those reads must not follow a symbolic link anywhere in the path, must only read
regular files, and must stop at a size cap.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["WorkspaceText", "read_workspace_text"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class WorkspaceText:
    """A workspace file's text (at most the cap) and its identity for change checks."""

    text: str
    mtime_ns: int
    size: int
    truncated: bool


def read_workspace_text(
    workspace: Path, relative: str | Path, *, max_bytes: int, encoding: str = "utf-8-sig"
) -> WorkspaceText | None:
    """Read ``workspace/relative`` if it is a regular file reached without any symlink.

    Blocking: call it in a worker thread.

    Returns:
        None when the file is missing, is not a regular file (a FIFO, a device, a
        directory), or when the path goes through a symbolic link.

    Raises:
        OSError: other failures to read (permissions, I/O errors).
    """
    parts = Path(relative).parts
    if not parts or any(p in ("", ".", "..") for p in parts) or Path(relative).is_absolute():
        return None
    with contextlib.ExitStack() as stack:
        try:
            fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            stack.callback(os.close, fd)
            for name in parts[:-1]:
                fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                stack.callback(os.close, fd)
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == 40:  # ELOOP: a symbolic link where O_NOFOLLOW forbids one
                return None
            raise
        with os.fdopen(file_fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            data = handle.read(max_bytes + 1)
    truncated = len(data) > max_bytes
    text = data[:max_bytes].decode(encoding, errors="replace")
    return WorkspaceText(text, info.st_mtime_ns, info.st_size, truncated)
