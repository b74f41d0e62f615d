"""An ``exec`` command with the network on shares the gateway's network namespace, and
with it the bus's abstract wake-up sockets: it must learn nothing of other sessions'
replies through them (nor put text into them). Real bubblewrap, real `SocketWakeups`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.bus.ephemeral import EphemeralHub
from core.bus.wake_socket import SocketWakeups
from core.messages import Delivery, StreamDelta
from core.tools import ToolContext
from tests.unit.test_exec_sandbox import registry, require_bwrap, run

PROBE = r"""
import socket, sys, time
name = sys.argv[1]
targets = []
for line in open("/proc/net/unix").read().splitlines():
    path = line.split()[-1]
    if path.startswith("@familiar-wake/") and path.endswith("/" + name):
        targets.append("\0" + path[1:])
print("found", len(targets))
me = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
me.bind(targets[0][: targets[0].rindex("/") + 1] + sys.argv[2])
me.settimeout(0.1)
leaked = []
end = time.monotonic() + 5
while time.monotonic() < end and not leaked:
    for target in targets:
        me.sendto(b"hello\t", target)
        injected = '{"type":"delta","inbound_id":"victim","session_key":"cli:v",' \
            '"delivery":{"channel":"cli"},"text":"injected"}'
        me.sendto(("eph\t" + injected).encode(), target)
    try:
        data = me.recv(1 << 17).decode()
    except socket.timeout:
        continue
    for line in data.split("\n"):
        topic, _, rest = line.partition("\t")
        if topic == "sub":
            for target in targets:
                me.sendto(("sub\t" + rest).encode(), target)
        elif topic == "eph":
            leaked.append(rest)
print("leaked", leaked or "nothing")
"""


@pytest.mark.slow  # each probe tries for 5 s before it gives up
async def test_a_sandboxed_command_cannot_read_or_write_other_sessions_streams(
    tmp_path: Path,
) -> None:
    await require_bwrap()
    home = tmp_path / "home"
    (home / "workspace").mkdir(parents=True)
    (home / "workspace" / "probe.py").write_text(PROBE)  # as write_file would
    wake = SocketWakeups(home / "run" / "wake")
    await wake.start()
    hub = EphemeralHub()
    hub.connect(wake)
    ctx = ToolContext(workspace=home / "workspace", session_key="slack:T:C", channel="slack")
    reg = registry(sandbox="bwrap", network=True)
    got: list[str] = []
    try:
        async with hub.subscribe("victim") as sub:
            for bound_as in ("", ".."):
                command = f"python3 probe.py {wake.name} '{bound_as}'"
                call = asyncio.create_task(run(reg, ctx, command, timeout=60))
                while not call.done():  # the other session's reply streams meanwhile
                    hub.emit(
                        StreamDelta(
                            inbound_id="victim",
                            session_key="cli:v",
                            delivery=Delivery(channel="cli"),
                            text="secret reply",
                        )
                    )
                    await asyncio.wait([call], timeout=0.05)
                result = (await call).content
                assert "found 1" in result, result
                assert "leaked nothing" in result and "secret reply" not in result, result
            while (item := sub.get_nowait()) is not None:
                got.append(item.text)
    finally:
        await wake.stop()
    assert "secret reply" in "".join(got) and "injected" not in "".join(got)
