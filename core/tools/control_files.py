"""Workspace files that make the daemon run commands: read-only to the agent.

Hook files (``.github/hooks/*.json``, ``.claude/settings*.json``) and MCP server
definitions (``.mcp.json``, ``.github/mcp.json``, ``.vscode/mcp.json``) live in the
workspace, the one place the agent can write. Whoever can write them can run any
command on the host outside the ``exec`` sandbox, and the agent can be talked to by
people in a Slack workspace or a webhook caller. So the file tools refuse them, the
bubblewrap sandbox mounts them read-only, and a control file that an ``exec`` command
created (one cannot mount over a file that does not exist yet) is removed when the
command ends. The operator edits them on the host.
"""

from __future__ import annotations

import logging
from pathlib import Path

from core.errors import ToolFailed

__all__ = [
    "CONTROL_DIRS",
    "CONTROL_FILES",
    "control_entry",
    "missing_control_files",
    "refuse_control_write",
    "remove_created_control_files",
    "sandbox_control_mounts",
]

logger = logging.getLogger(__name__)

CONTROL_DIRS = (".github/hooks", ".claude")
"""Directories, relative to the workspace, whose every file is a control file."""
CONTROL_FILES = (".mcp.json", ".github/mcp.json", ".vscode/mcp.json")
"""Single control files, relative to the workspace."""


def control_entry(workspace: Path, target: Path) -> str | None:
    """The control directory or file ``target`` (resolved) falls in, else None."""
    root = workspace.resolve()
    for entry in CONTROL_DIRS:
        base = (root / entry).resolve()
        if target == base or target.is_relative_to(base):
            return entry
    for entry in CONTROL_FILES:
        if target == (root / entry).resolve():
            return entry
    for entry in (*CONTROL_DIRS, *CONTROL_FILES):
        # A file at ``.github`` would make the sandbox unable to protect ``.github/hooks``
        # (so every exec fails): the directories on the way are theirs too.
        if target != root and (root / entry).resolve().is_relative_to(target):
            return entry
    return None


def refuse_control_write(workspace: Path, target: Path, path: str) -> None:
    """Raise when the file tools are asked to write or edit a control file.

    Raises:
        ToolFailed: ``target`` is (inside) a control file or directory.
    """
    entry = control_entry(workspace, target)
    if entry is not None:
        raise ToolFailed(
            f"{path} is under {entry}, which defines hooks or MCP servers (commands the "
            "gateway runs outside the sandbox); the agent may not change it. "
            "The operator edits it on the host."
        )


def sandbox_control_mounts(workspace: Path) -> list[str]:
    """bwrap options that make the control files read-only inside the sandbox.

    Control directories are created (empty) when missing so that they can be mounted;
    the top-level directories holding them (``.github``, ``.claude``, ``.vscode``) and
    ``.mcp.json`` are mounted read-only as a whole when they exist (a control file in a
    missing one is removed after the command: :func:`remove_created_control_files`).
    Touches the filesystem: call it off the event loop.
    """
    root = workspace.resolve()
    if not root.is_dir():
        return []  # no workspace: the command fails to start (never create it here)
    for entry in CONTROL_DIRS:
        try:
            (root / entry).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolFailed(f"cannot protect {entry} in the workspace: {exc}") from exc
    # The whole top-level entry (``.github``, not ``.github/hooks``): a mount point
    # cannot be renamed from inside, but its parent can, and a command could then
    # create a fresh ``.github/hooks/`` beside the mounted one (and hide the old one).
    # The workspace root is itself a mount point, so these cannot be moved away.
    args: list[str] = []
    for top in dict.fromkeys(entry.split("/", 1)[0] for entry in (*CONTROL_DIRS, *CONTROL_FILES)):
        where = root / top
        # Not through a link (a command can plant ``.vscode -> /``: bwrap then fails every
        # later command); a control file behind a link is removed when a command made it.
        if where.exists() and not where.is_symlink():
            args += ["--ro-bind", str(where), str(where)]
    return args


def missing_control_files(workspace: Path) -> list[Path]:
    """The control files that do not exist now (before a command runs)."""
    root = workspace.resolve()
    return [root / entry for entry in CONTROL_FILES if not (root / entry).exists()]


def remove_created_control_files(missing: list[Path]) -> list[str]:
    """Remove the files of ``missing`` that a command created; their names."""
    removed: list[str] = []
    for where in missing:
        if where.exists() or where.is_symlink():
            try:
                where.unlink()
            except OSError as exc:
                logger.error(
                    "cannot remove control file %s an exec command created: %s", where, exc
                )
                raise ToolFailed(
                    f"the command created {where.name}, which could not be removed"
                ) from exc
            logger.warning("removed control file %s created by an exec command", where)
            removed.append(where.name)
    return removed
