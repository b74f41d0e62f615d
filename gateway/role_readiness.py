"""Whether every role process of a supervised gateway serves (part of ``/readyz``).

The front answers ``/readyz``, but a gateway that takes messages in while its agent
workers or its scheduler are still starting (or restarting) is not ready. The
supervisor marks a child ``running`` once it said ``READY=1``, in the process table
it writes (`gateway.process_table`); this reads that table.
"""

from __future__ import annotations

from pathlib import Path

from gateway.process_table import read_processes

__all__ = ["roles_not_ready"]


async def roles_not_ready(run_dir: Path, *, supervised: bool) -> list[str]:
    """Why some role process does not serve (empty when all do, or not supervised)."""
    if not supervised:
        return []
    table = await read_processes(run_dir)
    if table is None:
        return ["role processes: no process table yet"]
    return [
        f"role process {p.get('name', '?')} {p.get('state', '?')}"
        for p in table
        if p.get("state") != "running"
    ]
