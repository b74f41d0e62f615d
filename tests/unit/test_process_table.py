"""The process table: the supervisor's own row first, and the gateway's pid read from it."""

from __future__ import annotations

import os
from pathlib import Path

from gateway.process_table import (
    ProcessInfo,
    gateway_pid,
    read_processes,
    supervised_processes,
    write_processes,
)


def _child(state: str = "running") -> ProcessInfo:
    return ProcessInfo(role="channels", name="channels", pid=None, state=state)  # type: ignore[arg-type]


async def test_the_supervisor_is_the_first_row_and_its_state_follows_the_stop(
    tmp_path: Path,
) -> None:
    write_processes(tmp_path, [_child()], started_at=100.0, stopping=False)
    rows = await read_processes(tmp_path)
    assert rows is not None
    assert [r["name"] for r in rows] == ["supervisor", "channels"]
    me = rows[0]
    assert (me["role"], me["pid"], me["state"], me["started_at"]) == (
        "supervisor",
        os.getpid(),
        "running",
        100.0,
    )
    assert await supervised_processes(tmp_path) == (os.getpid(), rows)

    write_processes(tmp_path, [_child("stopping")], started_at=100.0, stopping=True)
    rows = await read_processes(tmp_path)
    assert rows is not None and rows[0]["state"] == "stopping"

    write_processes(tmp_path, [_child("stopped")], started_at=100.0, stopping=True)
    rows = await read_processes(tmp_path)
    assert rows is not None and {r["state"] for r in rows} == {"stopped"}
    assert await supervised_processes(tmp_path) is None  # a stopped gateway runs no more


def test_the_gateway_pid_is_the_supervisors_when_there_is_one() -> None:
    rows = [
        {"role": "supervisor", "name": "supervisor", "pid": 4242},
        {"role": "channels", "name": "channels", "pid": os.getpid()},
    ]
    assert gateway_pid(rows) == 4242
    assert gateway_pid(rows[1:]) == os.getpid()
    assert gateway_pid([]) == os.getpid()
    assert gateway_pid([{"role": "supervisor", "pid": None}]) == os.getpid()
