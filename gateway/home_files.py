"""The home's private layout: folders 0700, config 0600, nothing squatting on the socket."""

from __future__ import annotations

import stat
from pathlib import Path

from core.errors import FamiliarError
from core.private_files import private_dir, tighten
from gateway.config import CONFIG_FILE
from gateway.init import RUN_DIR

__all__ = ["SocketPathTaken", "check_socket_path", "secure_home"]


class SocketPathTaken(FamiliarError):
    """Something that is not a socket sits where the control socket goes."""


def secure_home(home: Path, workspace: Path) -> None:
    """Home, run/ and workspace 0700, config.toml 0600 (looser modes are tightened)."""
    for folder in (home, home / RUN_DIR, workspace):
        private_dir(folder)
    tighten(home / CONFIG_FILE)


def check_socket_path(path: Path) -> None:
    """A stale socket is replaced at start; anything else there is the user's: refuse."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        what = "a directory" if stat.S_ISDIR(mode) else "a file"
        raise SocketPathTaken(
            f"{path} is {what}, not the gateway's control socket: move it away "
            "(the gateway creates its socket there)"
        )
