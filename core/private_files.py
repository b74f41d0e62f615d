"""Private files and folders: only the owner may read them, whatever the umask.

Modes are set explicitly (``mkdir`` and ``open`` modes are filtered by the umask,
``chmod`` is not). A path that already exists with group or other bits is tightened,
with one log line per path changed. Blocking I/O: call from a thread in the daemon.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "create_private_file", "private_dir", "tighten"]

log = logging.getLogger(__name__)

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
_OPEN_BITS = 0o077


def tighten(path: Path) -> bool:
    """Remove group and other permissions from ``path`` if it has any.

    Returns:
        Whether the mode changed (a missing path is left alone and gives False).
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return False
    if not mode & _OPEN_BITS:
        return False
    os.chmod(path, mode & ~_OPEN_BITS)
    log.warning("tightened permissions of %s from %04o to %04o", path, mode, mode & ~_OPEN_BITS)
    return True


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) as 0700, or tighten it if it exists."""
    if not path.is_dir():
        path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        os.chmod(path, PRIVATE_DIR)  # mkdir's mode went through the umask
        return
    tighten(path)


def create_private_file(path: Path) -> bool:
    """Create an empty ``path`` with mode 0600 unless it exists; tighten it if it does.

    Returns:
        Whether the file was created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        tighten(path)
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)
    return True
