"""Where FAMILIAR_HOME is when no ``--home`` is given (stdlib only: every command needs it)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_home"]


def default_home(env: dict[str, str] | None = None) -> Path:
    """``FAMILIAR_HOME`` or ``~/.familiar``."""
    env = dict(os.environ) if env is None else env
    return Path(env.get("FAMILIAR_HOME") or Path.home() / ".familiar").expanduser()
