"""`Wakeups` on one host: a Unix datagram socket per process, listed in a directory.

Each process binds an abstract Unix datagram socket (no path length limit, nothing
left on disk by a killed process) and drops a marker file of the same name in the
shared directory; a wake-up is a datagram sent to every other marker's socket. Notes
announced during one event-loop iteration are coalesced into one datagram per peer (a
burst of a thousand publishes costs a few sends, not thousands), and repeated notes
(``inbound``) are sent once. Nothing blocks: a peer whose queue is full (Linux
queues 10 datagrams per socket by default, ``net.unix.max_dgram_qlen``) gets the note
a moment later, ahead of newer ones, sent again every few milliseconds for up to a
second (then its poll covers it); a socket nobody listens on any more (a killed
process) is removed by the first sender that finds it dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import socket
import struct
import time
import uuid
from collections import defaultdict
from pathlib import Path

from core.bus.wakeups import Handler

__all__ = ["SocketWakeups"]

log = logging.getLogger(__name__)

_RESCAN_SECONDS = 5.0
"""How old the list of peers may get before a send lists the directory again (it is
listed again at once when the directory's mtime moves)."""
_MAX_DATAGRAM = 48 * 1024
_CREDS = struct.Struct("3i")
"""``struct ucred``: pid, uid, gid."""
_CREDS_SPACE = socket.CMSG_SPACE(_CREDS.size)
_MARKER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
"""A marker's name (``<pid>-<nonce>``, or a name a process was given)."""
_RETRY_SECONDS = 0.002
"""How soon notes a full peer did not take are sent again."""
_GIVE_UP_SECONDS = 1.0
"""How long a peer may stay full before its held notes are dropped (its poll covers
them): a stopped process must not hold notes for ever."""
_ORDERED = frozenset({"eph", "metric", "sub", "unsub"})
"""Topics whose every note counts (the others are level-triggered and deduplicated)."""


class SocketWakeups:
    """Wake-ups over Unix datagram sockets in ``directory`` (one host).

    Args:
        directory: shared by every process of one home (``<home>/run/wake``).
        name: this process's marker name (default ``<pid>-<nonce>``).
    """

    def __init__(self, directory: Path, *, name: str | None = None) -> None:
        self.directory = directory
        self.name = name or f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.path = directory / self.name
        digest = hashlib.sha256(str(directory.absolute()).encode()).hexdigest()[:16]
        self._prefix = f"\0familiar-wake/{digest}/"
        self._sock: socket.socket | None = None
        self._handlers: defaultdict[str, list[Handler]] = defaultdict(list)
        self._peers: list[str] = []
        self._scanned = 0
        self._listed = 0.0
        self._pending: dict[str, list[str]] = {}
        self._flush_scheduled = False
        self._full_since: dict[str, float] = {}
        self._retry: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.sent = 0
        """Datagrams sent (for benchmarks)."""
        self.dropped = 0
        """Datagrams a vanished peer, or one full for too long, did not take."""

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Bind this process's socket and say hello (peers list the directory again)."""
        await asyncio.to_thread(self._bind)
        self._loop = asyncio.get_running_loop()
        assert self._sock is not None
        self._loop.add_reader(self._sock.fileno(), self._receive)
        self.on("hello", lambda _data, _sender: self._rescan())
        self.announce(("hello", ""))

    def _bind(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        # The kernel names each sender's pid (its marker's name begins with it).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        sock.bind(self._address(self.name))
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        self._sock = sock

    def _address(self, name: str) -> str:
        return self._prefix + name

    async def stop(self) -> None:
        self._flush()
        if self.dropped:
            log.info("wake-ups not taken by peers dropped=%d sent=%d", self.dropped, self.sent)
        if self._retry is not None:  # a full peer's notes: its poll covers them
            self._retry.cancel()
            self._retry = None
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(sock.fileno())
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # -- Wakeups -------------------------------------------------------------------------

    def on(self, topic: str, handler: Handler) -> None:
        self._handlers[topic].append(handler)

    def announce(self, *notes: tuple[str, str]) -> None:
        if self._sock is None:
            return
        if not self._flush_scheduled:  # else the peers were listed in this loop iteration
            self._rescan_if_changed()
        for peer in self._peers:
            self._queue(peer, notes)

    def send_to(self, peer: str, *notes: tuple[str, str]) -> bool:
        if self._sock is None or not self._is_peer(peer):
            return False
        self._queue(peer, notes)
        return True

    def _is_peer(self, name: str) -> bool:
        """Whether ``name`` is a process of this home: its marker is in the directory.

        Abstract sockets are open to every process of the network namespace (an exec
        command with the network on, however sandboxed), and their names are listed in
        ``/proc/net/unix``: a sender without a marker (which only the daemon's account
        can write, under FAMILIAR_HOME) is nobody, whatever name it bound.
        """
        if name in self._peers:
            return True
        if not _MARKER.fullmatch(name):  # "", "..", "../x": never a path outside
            return False
        return _alive(name) and os.path.exists(self.directory / name)

    # -- sending -------------------------------------------------------------------------

    def _rescan_if_changed(self) -> None:
        """List the directory again when a marker came or went (its mtime moved)."""
        try:
            mtime = os.stat(self.directory).st_mtime_ns
        except OSError:
            return
        if mtime != self._scanned or time.monotonic() - self._listed > _RESCAN_SECONDS:
            self._scanned = mtime
            self._rescan()

    def _rescan(self) -> None:
        self._listed = time.monotonic()
        try:
            names = os.listdir(self.directory)
        except OSError:
            names = []
        peers = []
        for name in names:
            if name == self.name or name.startswith("."):
                continue
            if _alive(name):
                peers.append(name)
            else:  # a killed process's marker: whoever binds its name now is not it
                self._forget(name, stale=True)
        self._peers = peers

    def _queue(self, peer: str, notes: tuple[tuple[str, str], ...]) -> None:
        lines = self._pending.setdefault(peer, [])
        for topic, data in notes:
            line = f"{topic}\t{data}"
            if topic in _ORDERED or line not in lines:
                lines.append(line)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            try:
                asyncio.get_running_loop().call_soon(self._flush)
            except RuntimeError:  # no loop (called from a thread): send now
                self._flush()

    def _flush(self) -> None:
        self._flush_scheduled = False
        pending, self._pending = self._pending, {}
        sock = self._sock
        if sock is None:
            return
        for peer, lines in pending.items():
            if unsent := self._send(sock, peer, _chunks(lines)):
                self._hold(peer, unsent)
            else:
                self._full_since.pop(peer, None)

    def _send(self, sock: socket.socket, peer: str, chunks: list[bytes]) -> list[str]:
        """Send ``chunks`` to ``peer``; the lines it had no room for yet (else empty)."""
        for index, payload in enumerate(chunks):
            try:
                sock.sendto(payload, self._address(peer))
            except BlockingIOError:
                return [line.decode() for chunk in chunks[index:] for line in chunk.split(b"\n")]
            except (ConnectionRefusedError, FileNotFoundError):
                self.dropped += len(chunks) - index
                self._forget(peer, stale=True)
                return []
            except OSError as exc:
                self.dropped += len(chunks) - index
                log.debug("wake-up to %s failed: %s", peer, exc)
                return []
            self.sent += 1
        return []

    def _hold(self, peer: str, lines: list[str]) -> None:
        """Keep what a full peer did not take, ahead of newer notes, and send it again
        soon; after `_GIVE_UP_SECONDS` of a full queue, drop it (the peer polls)."""
        now = time.monotonic()
        if self._loop is None or now - self._full_since.setdefault(peer, now) > _GIVE_UP_SECONDS:
            self.dropped += 1
            self._full_since.pop(peer, None)
            return
        self._pending[peer] = lines + self._pending.get(peer, [])
        if self._retry is None:
            self._retry = self._loop.call_later(_RETRY_SECONDS, self._send_held)

    def _send_held(self) -> None:
        self._retry = None
        if not self._flush_scheduled:
            self._flush()

    def _forget(self, peer: str, *, stale: bool) -> None:
        with contextlib.suppress(ValueError):
            self._peers.remove(peer)
        if stale:  # nobody reads it: a killed process's marker
            with contextlib.suppress(OSError):
                os.unlink(self.directory / peer)

    # -- receiving -----------------------------------------------------------------------

    def _receive(self) -> None:
        sock = self._sock
        while sock is not None:
            try:
                payload, ancillary, _flags, sender = sock.recvmsg(1 << 17, _CREDS_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.debug("wake-up receive failed: %s", exc)
                return
            address = sender.decode(errors="replace") if isinstance(sender, bytes) else sender
            if not (isinstance(address, str) and address.startswith(self._prefix)):
                continue
            peer = address.removeprefix(self._prefix)
            if peer == self.name or not self._is_peer(peer) or not _sent_by(peer, ancillary):
                continue  # a stranger (or ourselves): its notes are not read
            for line in payload.decode(errors="replace").split("\n"):
                topic, _, data = line.partition("\t")
                for handler in self._handlers.get(topic, ()):
                    try:
                        handler(data, peer)
                    except Exception:
                        log.exception("wake-up handler failed topic=%s", topic)


def _alive(name: str) -> bool:
    """Whether the process a marker names (``<pid>-<nonce>``) still runs as our user; a
    name without a pid (given by a test) counts as alive."""
    pid, dash, _ = name.partition("-")
    if not (dash and pid.isdigit()):
        return True
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, PermissionError):
        return False
    except (OverflowError, OSError):
        return False
    return True


def _sent_by(peer: str, ancillary: list[tuple[int, int, bytes]]) -> bool:
    """Whether the sender's pid (``SCM_CREDENTIALS``) is the one ``peer``'s name begins
    with: a dead process's marker lingers until a sender finds it, and anyone may bind
    its abstract name meanwhile. A name without a pid (given by a test) is not checked."""
    pid, dash, _ = peer.partition("-")
    if not (dash and pid.isdigit()):
        return True
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            sender: int = _CREDS.unpack(data[: _CREDS.size])[0]
            return sender == int(pid)
    return False


def _chunks(lines: list[str]) -> list[bytes]:
    """The lines joined into datagrams of at most `_MAX_DATAGRAM` bytes (a longer line
    goes alone: the kernel refuses it if it is too long, and the poll covers it)."""
    chunks: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        data = line.encode()
        if current and size + len(data) + 1 > _MAX_DATAGRAM:
            chunks.append(b"\n".join(current))
            current, size = [], 0
        current.append(data)
        size += len(data) + 1
    if current:
        chunks.append(b"\n".join(current))
    return chunks
