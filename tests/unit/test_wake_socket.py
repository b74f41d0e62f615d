"""Wake-ups between processes over Unix datagram sockets (real sockets, one process)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.bus.ephemeral import EphemeralHub
from core.bus.wake_socket import SocketWakeups
from core.messages import Delivery, Progress, StreamDelta
from tests.waiting import eventually


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[SocketWakeups, SocketWakeups]]:
    a, b = SocketWakeups(tmp_path / "wake"), SocketWakeups(tmp_path / "wake")
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.stop()
        await b.stop()


async def test_a_note_reaches_every_other_process_and_names_its_sender(
    pair: tuple[SocketWakeups, SocketWakeups],
) -> None:
    a, b = pair
    got: list[tuple[str, str]] = []
    b.on("outbound", lambda data, peer: got.append((data, peer)))
    a.on("outbound", lambda data, peer: got.append(("self!", peer)))
    marker = asyncio.Event()
    a.on("marker", lambda _data, _peer: marker.set())
    a.announce(("outbound", "slack"))
    await eventually(lambda: got == [("slack", a.name)], timeout=10)
    # A note a had sent itself would be in its socket's queue ahead of this one.
    b.send_to(a.name, ("marker", ""))
    await asyncio.wait_for(marker.wait(), 10)
    assert got == [("slack", a.name)]  # never delivered to the sender itself


async def test_repeated_notes_of_one_iteration_are_coalesced(
    pair: tuple[SocketWakeups, SocketWakeups],
) -> None:
    a, b = pair
    inbound: list[str] = []
    deltas: list[str] = []
    b.on("inbound", lambda data, _peer: inbound.append(data))
    b.on("eph", lambda data, _peer: deltas.append(data))
    await asyncio.sleep(0)  # the hellos of start() are flushed
    sent = a.sent
    for _ in range(500):
        a.announce(("inbound", ""))
    for text in ("x", "x", "y"):
        a.send_to(b.name, ("eph", text))
    await eventually(lambda: len(deltas) == 3, timeout=10)
    assert inbound == [""]
    assert deltas == ["x", "x", "y"]  # ordered topics are never deduplicated
    assert a.sent - sent == 1  # one datagram for the whole burst


async def test_a_dead_process_marker_is_dropped_by_the_first_sender(tmp_path: Path) -> None:
    wake = tmp_path / "wake"
    a = SocketWakeups(wake)
    await a.start()
    try:
        (wake / f"{os.getpid()}-deadbeef").touch()  # a killed process left its marker
        a.announce(("inbound", ""))
        await eventually(lambda: not (wake / f"{os.getpid()}-deadbeef").exists(), timeout=10)
        assert a.dropped >= 1
        assert sorted(p.name for p in wake.iterdir()) == [a.name]
    finally:
        await a.stop()
    assert list(wake.iterdir()) == []


def _delta(message_id: str, text: str) -> StreamDelta:
    delivery = Delivery(channel="cli", chat_id="c")
    return StreamDelta(inbound_id=message_id, session_key="cli:c", delivery=delivery, text=text)


async def test_ephemerals_cross_to_the_process_that_subscribed(
    pair: tuple[SocketWakeups, SocketWakeups],
) -> None:
    a, b = pair
    agent, front = EphemeralHub(), EphemeralHub()
    agent.connect(a)
    front.connect(b)
    async with front.subscribe("m1") as sub:
        await eventually(lambda: agent.has_subscribers("m1"), timeout=10)
        assert not agent.has_subscribers("m2")
        agent.emit(_delta("m1", "Hel"))
        agent.emit(_delta("m2", "not asked for"))
        agent.emit(_delta("m1", "lo"))
        progress = Progress(
            inbound_id="m1", session_key="cli:c", delivery=_delta("m1", "").delivery, text="t"
        )
        agent.emit(progress)
        deltas: list[str] = []
        async with asyncio.timeout(10):
            while not isinstance(item := await sub.get(), Progress):
                deltas.append(item.text)
        assert "".join(deltas) == "Hello"  # in order, only m1's, the progress note last
    await eventually(lambda: not agent.has_subscribers("m1"), timeout=10)


async def test_a_process_that_starts_later_learns_the_subscriptions(tmp_path: Path) -> None:
    front_wake = SocketWakeups(tmp_path / "wake")
    await front_wake.start()
    front = EphemeralHub()
    front.connect(front_wake)
    try:
        async with front.subscribe("m1"):
            agent_wake = SocketWakeups(tmp_path / "wake")
            agent = EphemeralHub()
            agent.connect(agent_wake)
            await agent_wake.start()  # its hello makes the front send its subscriptions
            try:
                await eventually(lambda: agent.has_subscribers("m1"), timeout=10)
            finally:
                await agent_wake.stop()
    finally:
        await front_wake.stop()


def _queue_length() -> int:
    """Datagrams a Unix socket queues before a sender gets EAGAIN (Linux default 10)."""
    return int(Path("/proc/sys/net/unix/max_dgram_qlen").read_text())


async def test_a_full_peer_gets_its_notes_once_it_reads_again(tmp_path: Path) -> None:
    wake = tmp_path / "wake"
    a, b = SocketWakeups(wake), SocketWakeups(wake)
    await a.start()
    hello = asyncio.Event()
    a.on("hello", lambda _data, _peer: hello.set())
    await b.start()
    try:
        deltas: list[str] = []
        b.on("eph", lambda data, _peer: deltas.append(data))
        await asyncio.wait_for(hello.wait(), 10)  # b's hello is read: nothing else in flight
        loop = asyncio.get_running_loop()
        assert b._sock is not None
        loop.remove_reader(b._sock.fileno())  # b is busy: its queue fills up
        sent = a.sent
        for index in range(40):  # one datagram per loop iteration
            a.send_to(b.name, ("eph", str(index)))
            await asyncio.sleep(0)
        if _queue_length() < 40:
            assert a.sent - sent < 40  # b's queue is full: a holds the rest
        loop.add_reader(b._sock.fileno(), b._receive)  # b reads again
        await eventually(lambda: len(deltas) == 40, timeout=10)
        assert deltas == [str(index) for index in range(40)]  # none lost, in order
        assert a.dropped == 0
    finally:
        await a.stop()
        await b.stop()


def _listed_address(name: str) -> str:
    """A process's abstract address as anyone in the network namespace sees it."""
    for line in Path("/proc/net/unix").read_text().splitlines():
        path = line.split()[-1]
        if path.startswith("@familiar-wake/") and path.endswith("/" + name):
            return "\0" + path[1:]
    raise AssertionError(f"{name} is not in /proc/net/unix")


@pytest.mark.parametrize("name", ["", "..", "../wake", "1-nomarker"])
async def test_a_stranger_on_the_socket_learns_nothing_and_injects_nothing(
    pair: tuple[SocketWakeups, SocketWakeups], name: str
) -> None:
    """Abstract sockets are open to every process of the network namespace (an exec
    command with the network on, sandbox or not): only processes with a marker in the
    wake directory (mode 0700, under FAMILIAR_HOME) are peers."""
    a, b = pair
    hub = EphemeralHub()
    hub.connect(a)
    target = _listed_address(a.name)
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stranger.setblocking(False)
    stranger.bind(target[: target.rindex("/") + 1] + name)
    seen: list[str] = []
    b.on("outbound", lambda data, _peer: seen.append(data))
    try:
        async with hub.subscribe("m1") as sub:
            injected = _delta("m1", "injected").model_dump_json()
            for note in ("hello\t", "sub\tm1", f"eph\t{injected}"):
                stranger.sendto(note.encode(), target)
            b.send_to(a.name, ("eph", _delta("m1", "ok").model_dump_json()))
            async with asyncio.timeout(10):
                first = await sub.get()
            hub.emit(_delta("m1", "secret"))
            a.send_to(b.name, ("outbound", "sync"))  # sent after whatever went out before
            await eventually(lambda: seen == ["sync"], timeout=10)
        with pytest.raises(BlockingIOError):
            stranger.recv(1 << 16)
        assert first.text == "ok"
    finally:
        stranger.close()


async def test_a_stranger_bound_as_a_dead_process_is_not_that_process(
    pair: tuple[SocketWakeups, SocketWakeups],
) -> None:
    """A killed process's marker outlives it a moment: whoever binds its name then is
    not it (the kernel names the sender's pid, and the name begins with the pid)."""
    a, b = pair
    hub = EphemeralHub()
    hub.connect(a)
    gone = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await gone.wait()
    dead = f"{gone.pid}-deadbeef"  # a killed process's marker, not yet removed
    (a.directory / dead).touch()
    target = _listed_address(a.name)
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stranger.setblocking(False)
    stranger.bind(target[: target.rindex("/") + 1] + dead)
    seen: list[str] = []
    b.on("outbound", lambda data, _peer: seen.append(data))
    try:
        async with hub.subscribe("m1") as sub:
            injected = _delta("m1", "injected").model_dump_json()
            for note in ("hello\t", f"eph\t{injected}"):
                stranger.sendto(note.encode(), target)
            b.send_to(a.name, ("eph", _delta("m1", "ok").model_dump_json()))
            async with asyncio.timeout(10):
                first = await sub.get()
            a.send_to(b.name, ("outbound", "sync"))
            await eventually(lambda: seen == ["sync"], timeout=10)
        with pytest.raises(BlockingIOError):
            stranger.recv(1 << 16)  # not even the subscriptions a hello is answered with
        assert first.text == "ok"
    finally:
        stranger.close()
