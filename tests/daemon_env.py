"""The environment of a daemon, role or CLI that a test or a benchmark spawns."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO", "daemon_env"]

REPO = Path(__file__).resolve().parents[1]

_LEAKS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def daemon_env(*, single: bool = False, **extra: str) -> dict[str, str]:
    """This process's environment without what would steer the child (familiar's own
    ``FAMILIAR_*`` settings, systemd's ``NOTIFY_*``/``WATCHDOG_*``) or pick its provider
    (the API keys); with this checkout importable, unbuffered output, and ``extra``.

    ``single``: the one-process daemon (``gateway.processes = "single"``); the
    supervisor and its roles have tests of their own (``tests/e2e/test_processes.py``).
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FAMILIAR_", "NOTIFY_", "WATCHDOG_")) and k not in _LEAKS
    }
    mode = {"FAMILIAR_GATEWAY__PROCESSES": "single"} if single else {}
    return {**env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **mode, **extra}
