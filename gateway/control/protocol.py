"""The control protocol on the socket: NDJSON stream lines, request and error bodies, limits.

Shared by the server (which writes lines with `encode_line`), the client (which parses
them with `parse_line` and writes bodies with `send_body`) and the tests. Stdlib only:
``familiar send`` imports it, and must start in a fraction of a second. The server's
validation of request bodies is in `gateway.control.requests`.

``POST /v1/messages`` answers with an NDJSON stream: one `Accepted`, then (with
``stream``) `DeltaLine` and `ProgressLine` items, and last a `ReplyLine` or a
`TimeoutLine`. ``GET /v1/watch/{session}`` streams `ReplyLine` items. Errors are
``{"error": "..."}`` with a 4xx/5xx status.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from core.messages import OutboundKind, OutboundMessage, ReplyFormat

__all__ = [
    "CLIENT_ID_PATTERN",
    "MAX_BODY_BYTES",
    "Accepted",
    "DeltaLine",
    "ProgressLine",
    "ReplyLine",
    "StreamLine",
    "TimeoutLine",
    "encode_line",
    "error_text",
    "line_dict",
    "parse_line",
    "send_body",
    "text_problem",
]

log = logging.getLogger(__name__)

CLIENT_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
MAX_BODY_BYTES = 1024 * 1024
"""The largest request body the control socket takes (aiohttp ``client_max_size``)."""


@dataclass(frozen=True, kw_only=True)
class Accepted:
    """The message is stored: it will be answered even if the client goes away."""

    type: ClassVar[Literal["accepted"]] = "accepted"
    message_id: str
    session: str


@dataclass(frozen=True, kw_only=True)
class DeltaLine:
    """A piece of the reply as it is generated."""

    type: ClassVar[Literal["delta"]] = "delta"
    text: str


@dataclass(frozen=True, kw_only=True)
class ProgressLine:
    """A progress note (e.g. a tool started)."""

    type: ClassVar[Literal["progress"]] = "progress"
    text: str


@dataclass(frozen=True, kw_only=True)
class ReplyLine:
    """The final reply (``kind`` ``error`` when the agent or provider failed).

    ``format`` says how to show ``text``: ``markdown`` (the model's reply) or ``text``
    as it is (a slash command's output, e.g. ``/help``). Servers before ``format``
    existed sent neither, hence the default.
    """

    type: ClassVar[Literal["reply"]] = "reply"
    message_id: str
    session: str
    kind: OutboundKind
    text: str
    format: ReplyFormat = "markdown"

    @classmethod
    def of(cls, message: OutboundMessage) -> ReplyLine:
        return cls(
            message_id=message.inbound_id,
            session=message.session_key,
            kind=message.kind,
            text=message.text,
            format=message.format,
        )


@dataclass(frozen=True, kw_only=True)
class TimeoutLine:
    """No reply yet; the message stays queued and is answered.

    ``reason`` says why the wait ended: ``timeout`` (the request's timeout passed) or
    ``stopping`` (the gateway is shutting down; it answers the message after a restart).
    Servers before ``reason`` existed only sent timeouts, hence the default.
    """

    type: ClassVar[Literal["timeout"]] = "timeout"
    message_id: str
    session: str
    reason: Literal["timeout", "stopping"] = "timeout"


StreamLine = Accepted | DeltaLine | ProgressLine | ReplyLine | TimeoutLine
_LINES: dict[str, type[StreamLine]] = {
    cls.type: cls for cls in (Accepted, DeltaLine, ProgressLine, ReplyLine, TimeoutLine)
}
_CHOICES = {
    "kind": ("reply", "error"),
    "reason": ("timeout", "stopping"),
    "format": ("markdown", "text"),
}
"""The fields whose string must be one of a few (the ``Literal`` fields)."""
_FIELDS: dict[type[StreamLine], tuple[tuple[str, bool], ...]] = {
    cls: tuple((f.name, f.default is dataclasses.MISSING) for f in dataclasses.fields(cls))
    for cls in _LINES.values()
}
"""Each line's fields: name, and whether it is required (read once, not per line)."""


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""Made once: ``json.dumps`` with options builds an encoder per call."""


def _dumps(value: object) -> bytes:
    """Compact UTF-8 JSON, non-ASCII unescaped (half or a third the size of ``\\u`` escapes)."""
    return _ENCODER.encode(value).encode()


def line_dict(line: StreamLine) -> dict[str, object]:
    """The line as the JSON object it is sent as (``type`` first)."""
    # Its fields in order, as `dataclasses.asdict` gives them: every field is a string,
    # so its deep copy (a tenth of a line's encoding) copies nothing.
    return {"type": line.type, **vars(line)}


def encode_line(line: StreamLine) -> bytes:
    """One NDJSON line."""
    return _dumps(line_dict(line)) + b"\n"


def parse_line(raw: bytes) -> StreamLine | None:
    """The line's item; None for a blank line or one this client does not know.

    Unknown fields are ignored; a missing field, or one that is not a string (or not
    one of the allowed values), makes the line unknown.
    """
    if not raw.strip():
        return None
    try:
        data = json.loads(raw)
        return _line_of(data)
    except (ValueError, TypeError):
        log.warning("ignoring a line from the gateway this client does not know: %.200r", raw)
        return None


def _line_of(data: Any) -> StreamLine:
    if not isinstance(data, dict):
        raise TypeError("not an object")
    cls = _LINES.get(data.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise ValueError("unknown type")
    values: dict[str, str] = {}
    for name, required in _FIELDS[cls]:
        if name not in data:
            if required:
                raise ValueError(f"{name} is missing")
            continue
        value = data[name]
        if not isinstance(value, str) or value not in _CHOICES.get(name, (value,)):
            raise ValueError(f"{name} is not valid")
        values[name] = value
    return cls(**values)  # type: ignore[arg-type]


def send_body(
    *,
    session: str,
    text: str,
    stream: bool,
    timeout: float | None,
    autopilot: bool,
    client_id: str,
    operator: str | None = None,
) -> bytes:
    """The body of ``POST /v1/messages`` (`gateway.control.requests.SendRequest` on the
    server); with ``operator``, of ``POST /v1/ui/messages`` (``UiSendRequest``).

    Raises:
        ValueError: ``text`` is not valid text (see `text_problem`).
    """
    body = {
        "session": session,
        "text": text,
        "stream": stream,
        "timeout": timeout,
        "autopilot": autopilot,
        "client_id": client_id,
    }
    if operator is not None:
        body["operator"] = operator
    try:
        return _dumps(body)
    except UnicodeEncodeError:
        problems = (text_problem(v) for v in (session, text, client_id))
        raise ValueError(next((p for p in problems if p), "the body is not valid text")) from None


def error_text(body: bytes) -> str | None:
    """The ``error`` of an error answer's body; None when it is not one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) else None


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be sent as UTF-8 (None when it can).

    Bytes that were not UTF-8 reach Python as lone surrogates U+DC80-U+DCFF (the
    ``surrogateescape`` of argv and of a C-locale stdin); the message names the byte.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        if 0xDC80 <= code <= 0xDCFF:
            return (
                f"the text is not valid UTF-8 (byte 0x{code - 0xDC00:02x} at character {exc.start})"
            )
        return f"the text has a lone surrogate U+{code:04X} at character {exc.start}"
    return None
