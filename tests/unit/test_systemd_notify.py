"""sd_notify, watchdog_interval and watchdog_loop against real AF_UNIX datagram sockets."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.systemd import sd_notify, watchdog_interval, watchdog_loop


@pytest.fixture
def receiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A datagram socket standing in for systemd, advertised in $NOTIFY_SOCKET."""
    path = tmp_path / "n.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(2)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        yield sock


def test_sd_notify_sends_state_to_path_socket(receiver: socket.socket) -> None:
    assert sd_notify("READY=1\nSTATUS=listening on 127.0.0.1:8787") is True
    assert receiver.recv(4096) == b"READY=1\nSTATUS=listening on 127.0.0.1:8787"


def test_sd_notify_sends_to_abstract_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"familiar-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert sd_notify("STOPPING=1") is True
        assert sock.recv(4096) == b"STOPPING=1"


def test_sd_notify_is_a_silent_noop_outside_systemd(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    with caplog.at_level(logging.DEBUG):
        assert sd_notify("READY=1") is False
    assert caplog.records == []


def test_sd_notify_failure_returns_false_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "missing.sock"))
    with caplog.at_level(logging.WARNING, logger="gateway.systemd"):
        assert sd_notify("READY=1") is False
    assert "missing.sock" in caplog.text


def test_sd_notify_rejects_unsupported_address(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", "vsock:2:1234")
    with caplog.at_level(logging.WARNING, logger="gateway.systemd"):
        assert sd_notify("READY=1") is False
    assert "vsock:2:1234" in caplog.text


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [
        ("30000000", None, 15.0),
        ("30000000", "self", 15.0),
        ("30000000", "other", None),
        ("1000", None, 0.0005),
        (None, None, None),
        ("", None, None),
    ],
)
def test_watchdog_interval(
    monkeypatch: pytest.MonkeyPatch, usec: str | None, pid: str | None, expected: float | None
) -> None:
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    if usec is not None:
        monkeypatch.setenv("WATCHDOG_USEC", usec)
    if pid is not None:
        monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() if pid == "self" else os.getpid() + 1))
    assert watchdog_interval() == expected


@pytest.mark.parametrize(("usec", "pid"), [("soon", None), ("30000000", "x"), ("0", None)])
def test_watchdog_interval_ignores_bad_values_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    usec: str,
    pid: str | None,
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", usec)
    if pid is None:
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
    else:
        monkeypatch.setenv("WATCHDOG_PID", pid)
    with caplog.at_level(logging.WARNING, logger="gateway.systemd"):
        assert watchdog_interval() is None
    assert "WATCHDOG_USEC" in caplog.text


async def test_watchdog_loop_pings_until_stopped(receiver: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    receiver.setblocking(False)
    stop = asyncio.Event()
    task = asyncio.create_task(watchdog_loop(0.01, stop))
    async with asyncio.timeout(5):
        pings = [await loop.sock_recv(receiver, 64) for _ in range(3)]
    assert pings == [b"WATCHDOG=1"] * 3
    stop.set()
    async with asyncio.timeout(1):
        await task
    # The loop has returned, so nothing can ping any more: the stop ended it.
    assert task.done() and task.exception() is None


async def test_watchdog_loop_returns_promptly_when_stopped(receiver: socket.socket) -> None:
    stop = asyncio.Event()
    receiver.setblocking(False)
    task = asyncio.create_task(watchdog_loop(3600, stop))
    async with asyncio.timeout(5):  # the first ping goes out at once: the loop runs
        assert await asyncio.get_running_loop().sock_recv(receiver, 64) == b"WATCHDOG=1"
    stop.set()
    async with asyncio.timeout(1):  # well before the next ping an hour from now
        await task


async def test_watchdog_loop_rejects_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        await watchdog_loop(0, asyncio.Event())
