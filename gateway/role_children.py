"""The role processes the supervisor keeps (``gateway.processes = "multi"``): one
`RoleChild` per process, and which ones a configuration asks for."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from gateway.config import FamiliarConfig
from gateway.plugins import BUILT_IN_CHANNELS
from gateway.process_table import ProcessInfo, ProcessState, process_name
from gateway.reaper import ChildProcess

__all__ = ["RoleChild", "first_of", "role_children"]


@dataclass(eq=False)
class RoleChild:
    """One supervised role process and its restart history."""

    role: str
    name: str
    """``channels``, ``scheduler``, ``agent-1``, ``channel:slack``..."""
    channel: str | None = None
    """The one channel it runs (``channel_processes = "per-channel"``)."""
    proc: ChildProcess | None = None
    state: ProcessState = "starting"
    ready: bool = False
    restarts: int = 0
    quick_deaths: int = 0
    """Deaths in a row, each within ``crash_loop_window`` of the start."""
    started_at: float | None = None
    started_mono: float = 0.0
    last_ping: float = 0.0
    error: str | None = None
    lost: str | None = None
    """Why it said the store is lost (`STORE_LOST_FIELD`), before it exited."""
    became_ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.returncode is None else None

    @property
    def healthy(self) -> bool:
        return self.ready and self.state == "running"

    def info(self) -> ProcessInfo:
        return ProcessInfo(
            role=self.role,
            name=self.name,
            pid=self.pid,
            state=self.state,
            restarts=self.restarts,
            started_at=self.started_at,
            error=self.error,
        )


def role_children(config: FamiliarConfig) -> list[RoleChild]:
    """The processes to run: ``channels`` first (it opens the store), ``channel:<name>``
    per enabled channel but cli and ui with ``per-channel``, ``scheduler``, ``agent-N``."""
    gw = config.gateway
    enabled = config.channels.enabled()
    own = [name for name in enabled if name not in BUILT_IN_CHANNELS] if gw.per_channel else []
    return [
        RoleChild("channels", "channels"),
        *(RoleChild("channels", process_name(name), channel=name) for name in own),
        RoleChild("scheduler", "scheduler"),
        *(RoleChild("agent", f"agent-{i}") for i in range(1, gw.worker_count() + 1)),
    ]


async def first_of(*waits: object) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]  # type: ignore[call-overload]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
