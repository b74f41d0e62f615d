"""Workspace files that make the daemon run commands: read-only to the agent.

Hook files (``.github/hooks/*.json``, ``.claude/settings*.json``) and MCP server
definitions (``.mcp.json``, ``.github/mcp.json``, ``.vscode/mcp.json``) live in the
workspace, the one place the agent can write. Whoever can write them can run any
command on the host outside the ``exec`` sandbox, and the agent can be talked to by
people in a Slack workspace or a webhook caller. The boundary is workspace trust
(`core.trust`): such a file counts only with the content the operator trusted. As
defence in depth the file tools refuse them and the bubblewrap sandbox mounts the
existing ones read-only. The operator edits them on the host.
"""

from __future__ import annotations

from pathlib import Path

from core.errors import ToolFailed

__all__ = [
    "CONTROL_DIRS",
    "CONTROL_FILES",
    "control_entry",
    "refuse_control_write",
    "sandbox_control_mounts",
]

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
    ``.mcp.json`` are mounted read-only as a whole when they exist (one a command
    creates in a missing one is not trusted, so the gateway ignores it).
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
        # later command); a control file behind a link is not trusted either.
        if where.exists() and not where.is_symlink():
            args += ["--ro-bind", str(where), str(where)]
    return args
