"""The control protocol on the socket: request bodies, NDJSON stream lines, the error body.

Shared by the server (which validates requests and writes lines with these models), the
client (which parses lines with them) and the tests.

``POST /v1/messages`` answers with an NDJSON stream: one `Accepted`, then (with
``stream``) `DeltaLine` and `ProgressLine` items, and last a `ReplyLine` or a
`TimeoutLine`. ``GET /v1/watch/{session}`` streams `ReplyLine` items. Errors are
`ErrorBody` with a 4xx/5xx status.
"""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from pydantic_core import PydanticSerializationError

from core.messages import OutboundKind, OutboundMessage
from core.session_keys import DEFAULT_CLI_KEY, check_cli_key

__all__ = [
    "CLIENT_ID_PATTERN",
    "MAX_BODY_BYTES",
    "Accepted",
    "DeltaLine",
    "ErrorBody",
    "ProgressLine",
    "ReadRequest",
    "ReplyLine",
    "SendRequest",
    "StreamLine",
    "TimeoutLine",
    "encode_body",
    "encode_line",
    "parse_line",
    "text_problem",
    "validation_message",
]

log = logging.getLogger(__name__)

CLIENT_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
MAX_BODY_BYTES = 1024 * 1024
"""The largest request body the control socket takes (aiohttp ``client_max_size``)."""


class SendRequest(BaseModel):
    """The body of ``POST /v1/messages``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    session: str = DEFAULT_CLI_KEY
    """A ``cli:NAME`` session key."""
    text: str
    stream: StrictBool = True
    """Send ``delta`` and ``progress`` lines while the reply is made."""
    timeout: Annotated[float, Field(gt=0, strict=True)] | None = None
    """Seconds to wait for the reply before answering ``timeout``; null: no limit."""
    autopilot: StrictBool = False
    client_id: Annotated[str, Field(pattern=CLIENT_ID_PATTERN)] | None = None
    """The caller's idempotency id: a second send with it within 24 h attaches to the first."""

    @field_validator("session", mode="after")
    @classmethod
    def _cli_session(cls, value: str) -> str:
        check_cli_key(value)
        return value

    @field_validator("text", mode="after")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class ReadRequest(BaseModel):
    """The body of ``POST /v1/sessions/{key}/read``: unread replies up to ``upto`` are read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    upto: Annotated[int, Field(ge=0, strict=True)]
    """The newest unread id the caller has shown (ids come from ``GET /v1/sessions/{key}``)."""


class _Line(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Accepted(_Line):
    """The message is stored: it will be answered even if the client goes away."""

    type: Literal["accepted"] = "accepted"
    message_id: str
    session: str


class DeltaLine(_Line):
    """A piece of the reply as it is generated."""

    type: Literal["delta"] = "delta"
    text: str


class ProgressLine(_Line):
    """A progress note (e.g. a tool started)."""

    type: Literal["progress"] = "progress"
    text: str


class ReplyLine(_Line):
    """The final reply (``kind`` ``error`` when the agent or provider failed)."""

    type: Literal["reply"] = "reply"
    message_id: str
    session: str
    kind: OutboundKind
    text: str

    @classmethod
    def of(cls, message: OutboundMessage) -> ReplyLine:
        return cls(
            message_id=message.inbound_id,
            session=message.session_key,
            kind=message.kind,
            text=message.text,
        )


class TimeoutLine(_Line):
    """No reply yet; the message stays queued and is answered.

    ``reason`` says why the wait ended: ``timeout`` (the request's timeout passed) or
    ``stopping`` (the gateway is shutting down; it answers the message after a restart).
    Servers before ``reason`` existed only sent timeouts, hence the default.
    """

    type: Literal["timeout"] = "timeout"
    message_id: str
    session: str
    reason: Literal["timeout", "stopping"] = "timeout"


StreamLine = Annotated[
    Accepted | DeltaLine | ProgressLine | ReplyLine | TimeoutLine, Field(discriminator="type")
]
_LINE: TypeAdapter[StreamLine] = TypeAdapter(StreamLine)


class ErrorBody(BaseModel):
    """The body of every 4xx/5xx answer."""

    error: str


def encode_body(body: BaseModel) -> bytes:
    """A request body as the client sends it: compact UTF-8 JSON, non-ASCII unescaped.

    Raises:
        ValueError: a string in it is not text (see `text_problem`).
    """
    try:
        return body.model_dump_json().encode()
    except PydanticSerializationError:
        problems = (text_problem(v) for v in body.model_dump().values() if isinstance(v, str))
        raise ValueError(next((p for p in problems if p), "the body is not valid text")) from None


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


def encode_line(line: _Line) -> bytes:
    """One NDJSON line."""
    return line.model_dump_json().encode() + b"\n"


def parse_line(raw: bytes) -> StreamLine | None:
    """The line's item; None for a blank line or one this client does not know."""
    if not raw.strip():
        return None
    try:
        return _LINE.validate_json(raw)
    except ValidationError:
        log.warning("ignoring a line from the gateway this client does not know: %.200r", raw)
        return None


_PROBLEMS = {
    "missing": "{field} is required",
    "string_type": "{field} must be a string",
    "bool_type": "{field} must be true or false",
    "float_type": "{field} must be a number of seconds or null",
    "greater_than": "{field} must be positive (or null to wait as long as it takes)",
    "string_pattern_mismatch": "{field} must be 1-128 letters, digits or ._:-",
    "model_type": "the body must be a JSON object",
}


def validation_message(exc: ValidationError) -> str:
    """A one-line, user-facing account of what is wrong with a request body."""
    problems = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "body"
        template = _PROBLEMS.get(error["type"])
        if template is not None:
            problems.append(template.format(field=field))
        else:
            problems.append(f"{field}: {str(error['msg']).removeprefix('Value error, ')}")
    return "; ".join(problems)
