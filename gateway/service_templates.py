"""The unit templates under ``systemd/`` and how values are written into them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from core.errors import ConfigError

__all__ = ["PLACEHOLDER", "TEMPLATE_DIRS", "quote", "template_text"]

# `systemd/` at the repository root is the source of truth; it is deliberately not a
# Python package, because a top-level import name `systemd` would clash with the
# python-systemd library. A source checkout or editable install finds it next to
# gateway/; a wheel ships the same files as data files under <prefix>/share/familiar/systemd/.
TEMPLATE_DIRS = (
    Path(__file__).resolve().parents[1] / "systemd",
    Path(sys.prefix) / "share" / "familiar" / "systemd",
)
PLACEHOLDER = re.compile(r"@[A-Z_]+@")


def template_text(name: str) -> str:
    """The text of the template file ``name``.

    Raises:
        ConfigError: no template directory has it.
    """
    for directory in TEMPLATE_DIRS:
        if (directory / name).is_file():
            return (directory / name).read_text(encoding="utf-8")
    searched = ", ".join(str(d) for d in TEMPLATE_DIRS)
    raise ConfigError(f"unit template {name} not found (searched {searched})")


def quote(arg: str, *, exec_line: bool = False) -> str:
    """Quote one word for a unit file, escaping specifiers (and variables in ExecStart=).

    Raises:
        ConfigError: the word has a control character a unit file cannot carry.
    """
    if any(ch in arg for ch in "\n\r\0"):
        raise ConfigError(f"control characters are not allowed in unit file values: {arg!r}")
    arg = arg.replace("%", "%%")
    if exec_line:
        arg = arg.replace("$", "$$")
    if arg and not re.search(r"[\s\"'\\;]", arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
