"""Confine paths given by the model to the workspace."""

from __future__ import annotations

from pathlib import Path

from core.errors import ToolRetry

__all__ = ["resolve_in_workspace"]


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve ``path`` to an absolute path inside ``workspace``.

    Relative paths are taken from the workspace; absolute ones must already point
    inside it. Symlinks are followed (even dangling ones), so a link inside the
    workspace that points outside it is refused like ``..`` escapes are. This touches
    the filesystem: call it off the event loop.

    Args:
        workspace: the workspace root.
        path: the path as the model gave it.

    Returns:
        The resolved absolute path, free of symlinks and ``..``.

    Raises:
        ToolRetry: the path is empty, invalid or outside the workspace.
    """
    if not path or "\x00" in path:
        raise ToolRetry(f"invalid path {path!r}")
    root = workspace.resolve()
    try:
        resolved = (root / path).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop (Python < 3.13)
        raise ToolRetry(f"cannot resolve path {path!r}: {exc}") from exc
    if not resolved.is_relative_to(root):
        raise ToolRetry(f"path {path!r} is outside the workspace")
    return resolved
