"""Keys, paths and user text print verbatim through every table, also into a pipe.

Rich reads ``:a:`` and ``:ok:`` as emoji codes and ``[bold]`` as markup: a Teams key
``teams:a:1AbCd`` must not become ``teams🅰1AbCd``, nor a key copied from the screen
stop working. Tables printed to a pipe are as wide as their data.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.memory import Caller
from core.messages import Delivery, InboundMessage
from core.tasks.registry import SpawnRequest
from tests.integration.control_stack import ControlStack, control_stack
from tests.unit.test_cli_client import LoopThread, cli
from tests.unit.test_cli_client import loop_thread as loop_thread
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
TEAMS = "teams:a:1AbCd[bold]"
WEBHOOK = "webhook:ok:default"
TEXT = "ping :a: [bold]not bold[/bold] :ok: [red]x"
LONG = "check the build " + "and the deploy " * 8 + "then report"
"""A prompt wider than 80 columns."""


@pytest.fixture
def home() -> Iterator[Path]:
    # The home's path itself carries an emoji code and markup: `status` prints it.
    path = Path(tempfile.mkdtemp(prefix="fam-:ok:[b]-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(home: Path, loop_thread: LoopThread) -> Iterator[ControlStack]:
    stack = contextlib.AsyncExitStack()
    yield loop_thread.run(stack.enter_async_context(control_stack(home)))
    loop_thread.run(stack.aclose())


def _answered(daemon: ControlStack, loop_thread: LoopThread, key: str, channel: str) -> None:
    message = InboundMessage(
        session_key=key, text=TEXT, delivery=Delivery(channel=channel, chat_id=key)
    )

    async def run() -> None:
        await daemon.core.bus.publish_inbound(message)
        await eventually(lambda: _replied(daemon, message.id), what=f"the reply in {key} stored")

    loop_thread.run(run())


async def _replied(daemon: ControlStack, message_id: str) -> bool:
    found = await daemon.core.bus.message_status(message_id)
    return found is not None and found.status == "done"


def _out(*args: str) -> str:
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


def test_keys_and_text_print_verbatim_through_every_table(
    daemon: ControlStack, home: Path, loop_thread: LoopThread
) -> None:
    _answered(daemon, loop_thread, TEAMS, "teams")
    _answered(daemon, loop_thread, WEBHOOK, "webhook")
    where = ("--home", str(home))

    listed = _out("sessions", "list", *where)
    assert TEAMS in listed and WEBHOOK in listed

    shown = _out("sessions", "show", TEAMS, "--events", *where)
    assert shown.splitlines()[0].startswith(f"{TEAMS}  channel teams")
    assert f"user: {TEXT}" in shown and f"assistant: echo: {TEXT}" in shown
    assert json.dumps(TEXT)[1:-1] in shown  # the user.message event's data

    cli("schedule", "add", "--every", "1h", "--session", "cli:x", TEXT, *where)
    assert TEXT in _out("schedule", "list", *where)

    entry = loop_thread.run(daemon.core.memory.remember(Caller(WEBHOOK), TEXT, tags=[":a:"]))
    memory = _out("memory", "list", *where)
    assert f"#{entry.id}" in memory and WEBHOOK in memory and TEXT in memory
    assert ":a:" in memory.split(WEBHOOK, 1)[1]

    request = SpawnRequest(
        owner_key=TEAMS,
        owner_depth=0,
        agent_type="explore",
        prompt="!hang",
        description=":ok: [bold]",
        mode="background",
    )
    task, _ = loop_thread.run(daemon.core.tasks.spawn(request))
    tasks = _out("tasks", "list", *where)
    assert TEAMS in tasks and ":ok: [bold]" in tasks
    detail = _out("tasks", "show", task.id, *where)
    assert f"parent: {TEAMS}" in detail and "prompt: !hang" in detail

    status = _out("status", *where)
    assert re.search(rf"^home +{re.escape(str(home))} *$", status, re.MULTILINE), status
    assert "🅰" not in listed + shown + memory + tasks + status
    assert "🆗" not in listed + shown + memory + tasks + status


def _pty_of_width(columns: int) -> tuple[int, int]:
    """A pseudo-terminal ``columns`` wide (what stderr is in an ordinary shell)."""
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return parent, child


def test_a_table_into_a_pipe_is_as_wide_as_its_data(daemon: ControlStack, home: Path) -> None:
    where = ("--home", str(home))
    added = cli("schedule", "add", "--every", "1h", "--json", LONG, *where)
    assert added.exit_code == 0, added.stderr
    next_run = json.loads(added.stdout)["next_run"]
    parent, child = _pty_of_width(80)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    try:
        # stdout into a pipe, stdin and stderr on an 80-column terminal, as in
        # `familiar schedule list | grep build` typed in a shell.
        done = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "schedule", "list", *where],
            stdin=child, stdout=subprocess.PIPE, stderr=child, env=env, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(child)
        os.close(parent)
    out = done.stdout.decode()
    assert done.returncode == 0, out
    (row,) = [line for line in out.splitlines() if "#1" in line]
    assert next_run in row and LONG in row  # one line each, not cut nor folded
    assert "…" not in out
    as_json = _out("schedule", "list", "--json", *where)
    assert json.loads(as_json)["schedules"][0]["prompt"] == LONG


def test_columns_still_sets_the_width_of_a_pipe(daemon: ControlStack, home: Path) -> None:
    cli("schedule", "add", "--every", "1h", LONG, "--home", str(home))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "60"}
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "schedule", "list", "--home", str(home)],
        capture_output=True, env=env, timeout=60, check=False, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 60


def test_an_error_on_stderr_keeps_markup_and_codes_literal(
    daemon: ControlStack, home: Path
) -> None:
    result = cli("sessions", "show", "teams:ok:[bold]x", "--home", str(home))
    assert result.exit_code == 1
    assert "no session 'teams:ok:[bold]x'" in result.stderr


def test_the_mcp_table_prints_its_data_verbatim(home: Path) -> None:
    command = "/nonexistent/:ok:[bold]x"
    (home / "config.toml").write_text(f'[mcp.servers.srv]\ncommand = "{command}"\n')
    done = subprocess.run(  # no gateway: the servers are probed here, in a process of its own
        [sys.executable, "-m", "gateway.cli", "mcp", "list", "--home", str(home)],
        capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60,
        text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if "srv" in line]
    assert f"'{command}'" in row and "failed" in row
