"""The control protocol's stdlib side (lines, send body) against the server's models."""

from __future__ import annotations

import json

import pytest

from gateway.control.protocol import (
    Accepted,
    DeltaLine,
    ProgressLine,
    ReplyLine,
    StreamLine,
    TimeoutLine,
    encode_line,
    error_text,
    parse_line,
    send_body,
)
from gateway.control.requests import ErrorBody, SendRequest


@pytest.mark.parametrize("timeout", [None, 2.5])
def test_the_send_body_the_client_writes_is_what_the_server_validates(
    timeout: float | None,
) -> None:
    body = send_body(
        session="cli:x", text="héllo ☃", stream=False, timeout=timeout, autopilot=True,
        client_id="id-1",
    )  # fmt: skip
    assert "☃".encode() in body  # UTF-8, not \\u escapes
    assert SendRequest.model_validate_json(body) == SendRequest(
        session="cli:x", text="héllo ☃", stream=False, timeout=timeout, autopilot=True,
        client_id="id-1",
    )  # fmt: skip


def test_a_send_body_with_bytes_that_are_not_utf8_is_refused() -> None:
    with pytest.raises(ValueError, match="byte 0xff"):
        send_body(
            session="cli:x", text="a\udcff", stream=True, timeout=None, autopilot=False,
            client_id="id",
        )  # fmt: skip


LINES: list[StreamLine] = [
    Accepted(message_id="m1", session="cli:x"),
    DeltaLine(text="pié"),
    ProgressLine(text="tool"),
    ReplyLine(message_id="m1", session="cli:x", kind="error", text="boom"),
    TimeoutLine(message_id="m1", session="cli:x", reason="stopping"),
]


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.type)
def test_lines_round_trip(line: StreamLine) -> None:
    raw = encode_line(line)
    assert raw.endswith(b"\n") and b"\n" not in raw[:-1]
    assert json.loads(raw)["type"] == line.type
    assert parse_line(raw.rstrip(b"\n")) == line


def test_unknown_fields_are_ignored_and_the_reason_defaults_to_timeout() -> None:
    raw = b'{"type":"timeout","message_id":"m","session":"cli:x","later":1}'
    assert parse_line(raw) == TimeoutLine(message_id="m", session="cli:x", reason="timeout")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"not json",
        b"[1]",
        b'{"type":"party"}',
        b'{"type":["delta"]}',
        b'{"type":"delta"}',
        b'{"type":"delta","text":3}',
        b'{"type":"reply","message_id":"m","session":"s","kind":"shout","text":"x"}',
        b'{"type":"timeout","message_id":"m","session":"s","reason":"bored"}',
    ],
)
def test_lines_this_client_does_not_know_are_none(raw: bytes) -> None:
    assert parse_line(raw) is None


def test_error_text_reads_the_servers_error_body() -> None:
    assert error_text(ErrorBody(error="nope").model_dump_json().encode()) == "nope"
    assert error_text(b"<html>bad gateway</html>") is None
    assert error_text(b'{"error": 3}') is None
