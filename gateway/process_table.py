"""The table of the gateway's processes, shared by the supervisor with the other roles.

The supervisor writes ``<home>/run/processes.json`` whenever a child changes state,
itself first (role ``supervisor``: its pid is the gateway's, the one to signal); the
channels role (which serves ``familiar status``) reads it. A process that is not
supervised (``processes = "single"``, or a role started by hand) reports itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "EX_CONFIG",
    "EX_STORE",
    "PARENT_FD_ENV",
    "PROCESSES_FILE",
    "STORE_LOST_FIELD",
    "SUPERVISED_ENV",
    "ProcessInfo",
    "ProcessState",
    "gateway_pid",
    "own_process",
    "process_name",
    "read_processes",
    "supervised_processes",
    "write_processes",
]

EX_CONFIG = 78
"""Exit status for bad configuration (sysexits.h EX_CONFIG): a supervisor does not
restart a child that exits with it before it was ever ready, it exits with it too."""
EX_STORE = 74
"""Exit status of a supervised role whose store cannot be used (sysexits.h EX_IOERR): the
supervisor stops every role and exits 1 instead of restarting it. Only between the
supervisor and its children: a process that nobody supervises exits 1."""
STORE_LOST_FIELD = "FAMILIAR_STORE_LOST"
"""The notification field a supervised role sends, before it exits with `EX_STORE`, to
say why (one line: the file or URL and the cause)."""
PARENT_FD_ENV = "FAMILIAR_PARENT_FD"
"""A pipe the supervisor holds open, in each child's environment: its end (EOF) stops
the child."""
PROCESSES_FILE = "processes.json"
SUPERVISED_ENV = "FAMILIAR_SUPERVISED"
"""Set (to the supervisor's pid) in the environment of every child it starts."""

ProcessState = Literal["starting", "running", "backoff", "crash-loop", "stopping", "stopped"]


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process of the gateway as ``familiar status --json`` shows it."""

    role: str
    """``supervisor``, ``agent``, ``channels``, ``scheduler`` (or ``single``)."""
    name: str
    """Unique in the gateway: ``supervisor``, ``agent-1``, ``agent-2``, ``channels``,
    ``scheduler``, ``channel:slack`` (`process_name`)."""
    pid: int | None
    state: ProcessState
    restarts: int = 0
    started_at: float | None = None
    """Unix time the current incarnation started (None while none runs)."""
    error: str | None = None
    """Why it is backing off or crash-looping (its last exit)."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def process_name(channel: str) -> str:
    """The name of the process of a channel that runs in its own: ``channel:<name>``."""
    return f"channel:{channel}"


def own_process(role: str, started_at: float) -> ProcessInfo:
    return ProcessInfo(
        role=role, name=role, pid=os.getpid(), state="running", started_at=started_at
    )


def gateway_pid(processes: list[dict[str, Any]]) -> int:
    """The gateway's pid, the one that stops all of it: its supervisor's, when the table
    has one, else this process's (``processes = "single"``, a role run by hand)."""
    for process in processes:
        if process.get("role") == "supervisor" and isinstance(process.get("pid"), int):
            return int(process["pid"])
    return os.getpid()


def write_processes(
    run_dir: Path, processes: list[ProcessInfo], *, started_at: float, stopping: bool
) -> None:
    """Replace the table atomically (readers never see half of it): this process, the
    supervisor, first (started at ``started_at``; ``stopped`` once ``stopping`` and
    every child stopped), then ``processes``, its children."""
    path = run_dir / PROCESSES_FILE
    tmp = path.with_suffix(".tmp")
    state: ProcessState = "stopping" if stopping else "running"
    if stopping and all(p.state == "stopped" for p in processes):
        state = "stopped"
    me = ProcessInfo(
        role="supervisor", name="supervisor", pid=os.getpid(), state=state, started_at=started_at
    )
    data = {"supervisor": os.getpid(), "updated_at": time.time()}
    body = {**data, "processes": [p.as_json() for p in (me, *processes)]}
    tmp.write_text(json.dumps(body), encoding="utf-8")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


async def read_processes(run_dir: Path) -> list[dict[str, Any]] | None:
    """The table the supervisor wrote, or None when there is none (or it is unreadable)."""

    def read() -> list[dict[str, Any]] | None:
        try:
            body = json.loads((run_dir / PROCESSES_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        found = body.get("processes") if isinstance(body, dict) else None
        return found if isinstance(found, list) else None

    return await asyncio.to_thread(read)


async def supervised_processes(run_dir: Path) -> tuple[int, list[dict[str, Any]]] | None:
    """The supervisor's pid and table when a supervisor of this home still runs (what
    ``familiar status`` shows while the channels role does not answer)."""

    def read() -> tuple[int, list[dict[str, Any]]] | None:
        try:
            body = json.loads((run_dir / PROCESSES_FILE).read_text(encoding="utf-8"))
            pid = int(body["supervisor"])
            processes = body["processes"]
            os.kill(pid, 0)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(processes, list) or all(p.get("state") == "stopped" for p in processes):
            return None
        return pid, processes

    return await asyncio.to_thread(read)
