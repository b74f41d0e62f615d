"""``exec`` under the systemd units: each command runs in its own ``familiar-exec@.service``.

The daemon's unit is strict (no namespaces, no mount calls), so bubblewrap cannot run in
it. Instead ``familiar service install`` renders ``familiar-exec.socket`` (``Accept=yes``)
and the daemon's unit names that socket in ``FAMILIAR_EXEC_SOCKET``. Every command is one
connection: systemd starts an instance sandboxed by its own directives (no
``$FAMILIAR_HOME`` but the workspace, read-only system, private ``/tmp``, no
capabilities, another group than the daemon's, ``PrivateNetwork=`` when
``tools.exec.network = false``, resource limits) and kills its whole cgroup when the
command ends, times out or the call is cancelled. The protocol is in
`core.tools.exec_server`. A socket that is missing, or an instance that fails, is a
clear error of the tool, never a reason to run the command on the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path

from core.errors import ToolFailed

from .exec_server import HEADER, KINDS, encode
from .sandbox import SystemdSandbox

__all__ = ["UnitTimeout", "run_in_unit"]

_GRACE = 10.0
"""Seconds past the command's timeout the client waits for the unit to report it."""
_MAX_FRAME = 1 << 20
_HINT = (
    "is familiar-exec.socket running? (`systemctl status familiar-exec.socket`, "
    "`journalctl -u 'familiar-exec@*'`; `familiar service install` writes it)"
)


_CLOSED = (
    "the exec unit closed the connection without an exit status (the instance failed "
    f"to start or was killed); {_HINT}"
)


class UnitTimeout(Exception):
    """The exec unit killed the command at its timeout."""


async def _frame(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    try:
        kind, size = HEADER.unpack(await reader.readexactly(HEADER.size))
        if kind not in KINDS or size > _MAX_FRAME:
            raise ToolFailed(f"the exec unit sent a malformed frame ({kind!r}, {size} bytes)")
        return kind, await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionResetError):
        raise ToolFailed(_CLOSED) from None


async def run_in_unit(
    sandbox: SystemdSandbox,
    command: str,
    cwd: Path,
    timeout: float,
    feed: Callable[[bytes], None],
) -> int:
    """Run ``command`` in a fresh instance of the exec unit; its exit code.

    Output goes to ``feed`` as it arrives. Cancelling hangs up, which makes the
    instance kill the command and exit (systemd then kills its cgroup).

    Raises:
        UnitTimeout: the command ran out of time and was killed.
        ToolFailed: the socket is missing or refuses, the instance failed, or it
            refused the request (with its reason).
    """
    try:
        reader, writer = await asyncio.open_unix_connection(str(sandbox.socket))
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise ToolFailed(
            f"exec is unavailable: the exec unit's socket {sandbox.socket} does not answer "
            f"({exc.strerror}); {_HINT}. Commands never fall back to the host here."
        ) from None
    except OSError as exc:
        raise ToolFailed(
            f"exec is unavailable: cannot connect to {sandbox.socket}: {exc}"
        ) from None
    request = {
        "command": command,
        "cwd": str(cwd),
        "timeout": timeout,
        "env": sandbox.env(cwd),
        "network": sandbox.network,
    }
    try:
        writer.write(encode(b"Q", json.dumps(request).encode()))
        async with asyncio.timeout(timeout + _GRACE):
            while True:
                kind, payload = await _frame(reader)
                if kind == b"O":
                    feed(payload)
                elif kind == b"X":
                    code = json.loads(payload).get("code")
                    return int(code) if isinstance(code, int) else -1
                elif kind == b"T":
                    raise UnitTimeout()
                elif kind == b"E":
                    text = payload.decode(errors="replace")
                    raise ToolFailed(f"the exec unit refused the command: {text}")
                else:
                    raise ToolFailed(f"the exec unit sent an unexpected frame {kind!r}")
    except TimeoutError:
        raise UnitTimeout() from None  # the unit did not report in time: hang up on it
    except ConnectionError:  # it hung up before the request was read
        raise ToolFailed(_CLOSED) from None
    except OSError as exc:
        raise ToolFailed(f"the connection to the exec unit broke: {exc}; {_HINT}") from None
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
