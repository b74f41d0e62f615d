"""What a role process's exit means to the supervisor: restart it, or stop the gateway.

Restarting cannot fix a configuration file (a role that exits 78, `EX_CONFIG`, before it
was ever ready) nor a store that cannot be used (`EX_STORE`: corrupted, deleted,
unreachable at start, dropped): the supervisor then stops every role and exits 78 or 1,
so that systemd's ``Restart=`` policy and ``systemctl status`` see the failure, where
restarting the roles forever would hide it.
"""

from __future__ import annotations

import logging
import signal
import sys
from dataclasses import dataclass

from gateway.config import GatewayConfig
from gateway.process_table import EX_CONFIG, EX_STORE, ProcessState

__all__ = ["describe_exit", "fatal_exit", "migration_exit"]

log = logging.getLogger(__name__)


def fatal_exit(
    name: str, code: int | None, ever_ready: bool, restarts: int, said: str | None
) -> int | None:
    """The supervisor's own exit status when role ``name``'s exit ``code`` must stop the
    gateway; None when the role is to be restarted.

    Args:
        name: the role process (``agent-1``...).
        code: its exit status (None: it could not be started at all).
        ever_ready: it said ``READY=1`` in its current run.
        restarts: how often it was restarted before.
        said: what it notified before exiting about a lost store (one line), if anything.
    """
    if code == EX_CONFIG and not ever_ready and restarts == 0:
        log.error("role=%s refused the configuration: stopping", name)
        return EX_CONFIG
    if code == EX_STORE:
        reason = said or "the store cannot be used (see the log above)"
        log.error("role=%s cannot use the store: stopping every role: %s", name, reason)
        print(f"familiar: {reason}", file=sys.stderr)
        return 1
    return None


def migration_exit(pid: int, code: int) -> int | None:
    """The supervisor's exit status when the store's migration process exited with
    ``code``: 1 when the store cannot be used (it printed why), else None (the channels
    role migrates as it opens the store, and says why it cannot)."""
    if code == 0:
        log.info("store migrated pid=%d", pid)
        return None
    log.warning("the store's migration pid=%d %s", pid, describe_exit(code))
    return 1 if code == EX_STORE else None


def describe_exit(code: int) -> str:
    """``exited with status 1``, ``killed by SIGKILL``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


FIRST_BACKOFF = 0.5
"""Seconds before the first restart of a child that died; doubled per quick death."""


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """When to start a dead child again, and whether it is in a crash loop."""

    quick_deaths: int
    delay: float
    looping: bool

    @property
    def state(self) -> ProcessState:
        return "crash-loop" if self.looping else "backoff"


def plan_restart(quick_deaths: int, ran: float, gw: GatewayConfig) -> RestartPlan:
    """The restart of a child that died ``ran`` seconds into its run, after
    ``quick_deaths`` quick deaths in a row (a run longer than the window resets them)."""
    deaths = quick_deaths + 1 if ran < gw.crash_loop_window else 1
    delay = min(gw.restart_backoff_max, FIRST_BACKOFF * 2 ** (deaths - 1))
    return RestartPlan(deaths, delay, deaths >= gw.crash_loop_restarts)
