"""Paths as the danger check compares them: dot segments and repeated slashes removed,
globs in absolute paths cut, ``~`` kept, relative paths resolved per directory (pure)."""

from __future__ import annotations

import posixpath
import re

__all__ = ["normalised", "resolved"]

_HOME = "/home/\x05"
"""Stands for ``~`` while normalising (two levels deep, as homes are)."""
_GLOB = re.compile(r"[*?\[]")


def normalised(path: str) -> str:
    """``/usr/../`` -> ``/``, ``//`` -> ``/``, ``/b?n/x`` -> ``/*``, ``~/a/..`` -> ``~``."""
    if path == "~" or path.startswith("~/"):
        normal = posixpath.normpath(_HOME + path[1:])
        return "~" + normal[len(_HOME) :] if normal.startswith(_HOME) else normalised(normal)
    if not path.startswith("/"):
        return posixpath.normpath(path) if path else path
    normal = "/" + posixpath.normpath(re.sub("/+", "/", path)).lstrip("/")
    parts = normal.split("/")
    for index, name in enumerate(parts):
        if _GLOB.search(name):  # a glob may match any name there: as good as ``*``
            return "/".join([*parts[:index], "*"])
    return normal


def resolved(path: str, cwds: tuple[str, ...] | None) -> set[str]:
    """``path`` normalised from each directory a command may be in (None: unknown)."""
    if path.startswith(("/", "~", "$")) or cwds is None:
        return {normalised(path)}
    return {normalised(posixpath.join(cwd, path)) for cwd in cwds}
