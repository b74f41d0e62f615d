"""What the control client raises, and how it reads an answer (its lines, its status).

Stdlib only, like `gateway.control.client`, which re-exports the exceptions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from core.errors import FamiliarError
from gateway.control.http1 import Response
from gateway.control.protocol import MAX_BODY_BYTES, error_text
from gateway.sizes import size_text

__all__ = [
    "ControlError",
    "DaemonUnavailable",
    "RequestTooLarge",
    "body_lines",
    "check_size",
    "nobody_listens",
    "raise_for_status",
]


class DaemonUnavailable(FamiliarError):
    """No daemon answers on the control socket (missing, refused or hung up).

    Attributes:
        socket: the socket path that was tried.
    """

    def __init__(self, message: str, *, socket: Path) -> None:
        super().__init__(message)
        self.socket = socket


class ControlError(FamiliarError):
    """The daemon answered a control request with an error.

    Attributes:
        status: the HTTP status (4xx/5xx).
        reason: the daemon's own words (the message without ``gateway answered N:``).
    """

    def __init__(self, message: str, *, status: int, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = message if reason is None else reason


class RequestTooLarge(ControlError):
    """The request body is over the control socket's limit (`MAX_BODY_BYTES`).

    Raised before sending when the client can tell, else for the daemon's 413.
    """

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message, status=413, reason=reason)


def check_size(body: bytes) -> None:
    if len(body) > MAX_BODY_BYTES:
        raise RequestTooLarge(
            f"the request is too long: {len(body):,} bytes as sent, over the control "
            f"socket's limit of {size_text(MAX_BODY_BYTES)}; send a shorter text, or put "
            "it in a workspace file and ask about that file"
        )


def nobody_listens(exc: DaemonUnavailable) -> bool:
    """No socket, or nobody accepts on it: the request cannot have reached a daemon."""
    return isinstance(exc.__cause__, FileNotFoundError | ConnectionRefusedError)


async def body_lines(resp: Response) -> AsyncIterator[bytes]:
    """Yield each line of the body as it arrives (lines of any length)."""
    buffer = b""
    async for piece in resp.pieces():
        buffer += piece
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line
    yield buffer


async def raise_for_status(resp: Response) -> None:
    if resp.status < 400:
        return
    body = await resp.read()
    message = error_text(body) or body.decode(errors="replace").strip() or resp.reason or "error"
    if resp.status == 413:
        raise RequestTooLarge(f"gateway answered 413: {message}", reason=message)
    raise ControlError(
        f"gateway answered {resp.status}: {message}", status=resp.status, reason=message
    )
