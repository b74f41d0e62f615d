"""WriteGuard: a part of the workspace that only some sessions may change.

The file tools ask every guard before they write or edit; the ``exec`` sandbox mounts
a guard's directories read-only for the sessions it refuses. A guard is given by the
part of the core that owns those files (memory: ``workspace/memory/``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from core.errors import ToolFailed

from .base import ToolContext

__all__ = ["WriteGuard", "readonly_binds"]


class WriteGuard(Protocol):
    """Refuses writes into the part of the workspace it guards, for some sessions."""

    def refuse_write(self, ctx: ToolContext, target: Path, path: str) -> None:
        """Raise when ``ctx``'s session may not write ``target``.

        Args:
            ctx: who writes.
            target: the resolved path, inside the workspace.
            path: the path as the model gave it (for the message).

        Raises:
            ToolFailed: saying why, and what to do instead.
        """
        ...

    def readonly_dirs(self, ctx: ToolContext) -> Sequence[Path]:
        """The directories a command of ``ctx``'s session may not change (existing ones
        are mounted read-only in the sandbox)."""
        ...


def readonly_binds(dirs: Iterable[Path]) -> list[str]:
    """bwrap options that mount ``dirs`` read-only (each created first when missing).

    A mount point cannot be renamed or removed from inside the sandbox, so a command
    cannot put a fresh directory in its place either. Touches the filesystem: call it
    off the event loop.

    Raises:
        ToolFailed: a directory is a link or a file, or cannot be created (then it
            cannot be protected, and the command does not run).
    """
    args: list[str] = []
    for where in dirs:
        if where.is_symlink() or (where.exists() and not where.is_dir()):
            raise ToolFailed(
                f"{where.name} in the workspace is not a plain directory, so it cannot be "
                "made read-only for this command; the operator must fix it on the host"
            )
        try:
            where.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolFailed(f"cannot protect {where.name} in the workspace: {exc}") from exc
        args += ["--ro-bind", str(where), str(where)]
    return args
