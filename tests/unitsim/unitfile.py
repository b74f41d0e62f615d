"""The ``[Service]`` directives of a unit file, as systemd reads them for sandboxing."""

from __future__ import annotations

import shlex
from collections import defaultdict
from pathlib import Path

__all__ = ["Directives", "parse_section", "parse_service"]

Directives = dict[str, list[str]]
"""Directive name -> every value assigned, in order (``SystemCallFilter=`` lines combine)."""


def parse_service(path: Path) -> Directives:
    """The ``[Service]`` section of ``path``; continuation lines and comments handled."""
    return parse_section(path, "Service")


def parse_section(path: Path, wanted: str) -> Directives:
    """The ``[wanted]`` section of ``path``; continuation lines and comments handled."""
    found: defaultdict[str, list[str]] = defaultdict(list)
    section = ""
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != wanted:
            continue
        key, _, value = line.partition("=")
        found[key.strip()].append(value.strip())
    return dict(found)


def last(directives: Directives, key: str, default: str = "") -> str:
    """The value in force for a single-valued directive (the last assignment wins)."""
    values = directives.get(key)
    return values[-1] if values else default


def words(value: str) -> list[str]:
    """A value's words, unquoted as systemd does (percent specifiers unescaped)."""
    return [w.replace("%%", "%") for w in shlex.split(value)]


def boolean(directives: Directives, key: str) -> bool:
    return last(directives, key).lower() in ("yes", "true", "1", "on")
