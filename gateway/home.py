"""Where FAMILIAR_HOME is, and its run directory (stdlib only: every command needs them)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["RUN_DIR", "default_home", "no_daemon_hint"]

RUN_DIR = "run"
"""Under the home: the lock file and the control socket (mode 0700)."""


def default_home(env: dict[str, str] | None = None) -> Path:
    """``FAMILIAR_HOME`` or ``~/.familiar``."""
    env = dict(os.environ) if env is None else env
    return Path(env.get("FAMILIAR_HOME") or Path.home() / ".familiar").expanduser()


def no_daemon_hint(home: Path) -> str:
    """The one line that says no gateway runs on ``home`` and how to start one."""
    return (
        f"no familiar gateway is running on {home} — "
        'start it with "familiar gateway" (or "make run")'
    )
