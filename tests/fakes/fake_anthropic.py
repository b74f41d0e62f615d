"""A loopback fake of the Anthropic Messages API (named SSE events), scriptable per test."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.fake_openai import (
    Delay,
    Entry,
    ScriptItem,
    Stall,
    Status,
    Text,
    ToolCalls,
    rule_reply,
)
from tests.fakes.loopback import LoopbackServer

__all__ = ["FakeAnthropic", "StreamError"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class StreamError:
    """Start a 200 stream, send ``partial`` text, then an ``event: error`` of this type."""

    error_type: str = "overloaded_error"
    partial: str = ""


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n".encode()


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    return str(content or "")


def _tool_result(content: Any) -> str | None:
    if not isinstance(content, list):
        return None
    for block in content:
        if block.get("type") == "tool_result":
            inner = block.get("content")
            return inner if isinstance(inner, str) else _text_of(inner)
    return None


@dataclass(kw_only=True)
class FakeAnthropic(LoopbackServer):
    """An Anthropic Messages API server on 127.0.0.1 (port 0), in-process.

    Use as ``async with FakeAnthropic() as fake:`` with ``fake.base_url`` (no ``/v1``:
    the client adds it). Script answers with :meth:`script` (the same entries as
    :class:`tests.fakes.fake_openai.FakeOpenAI`, plus :class:`StreamError`).

    Attributes:
        api_key: if set, requests without a matching ``x-api-key`` get 401.
        requests: JSON bodies received, in order.
        headers: the headers of those requests.
        hits: ``time.monotonic()`` of each request.
    """

    api_key: str | None = None
    model: str = "claude-fake"
    _queue: deque[Entry | StreamError] = field(default_factory=deque, init=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def script(self, *items: ScriptItem | StreamError) -> None:
        """Queue answers for the next requests, in order (then the rules apply)."""
        for item in items:
            if isinstance(item, str):
                self._queue.append(Text(item))
            elif isinstance(item, int):
                self._queue.append(Status(item))
            elif isinstance(item, list):
                self._queue.append(ToolCalls(tuple(item)))
            else:
                self._queue.append(item)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)

    def _next_entry(self, body: dict[str, Any]) -> Entry | StreamError:
        if self._queue:
            return self._queue.popleft()
        last = (body.get("messages") or [{}])[-1]
        content = last.get("content")
        return rule_reply(user_text=_text_of(content), tool_result=_tool_result(content))

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(time.monotonic())
        self.headers.append(dict(request.headers))
        body = await request.json()
        self.requests.append(body)
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            sent = request.headers.get("x-api-key", "")
            return _error(Status(401, message=f"invalid x-api-key: {sent}"))
        entry = self._next_entry(body)
        while isinstance(entry, Delay):
            await self._pause(entry.seconds)
            entry = entry.then
        if isinstance(entry, Status):
            return _error(entry)
        if isinstance(entry, StreamError | Stall) and not body.get("stream"):
            return _error(Status(529, message="overloaded"))
        if not body.get("stream"):
            assert isinstance(entry, Text | ToolCalls)
            return web.json_response(self._message(entry))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):
            await self._stream(response, entry)
        return response

    def _message(self, entry: Text | ToolCalls) -> dict[str, Any]:
        content: list[dict[str, Any]]
        if isinstance(entry, Text):
            content = [{"type": "text", "text": entry.text}]
        else:
            content = [
                {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", "name": n, "input": a}
                for n, a in entry.calls
            ]
        return {
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": "end_turn" if isinstance(entry, Text) else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 6},
        }

    async def _stream(
        self, response: web.StreamResponse, entry: Text | ToolCalls | Stall | StreamError
    ) -> None:
        start = self._message(Text(""))
        start.update(content=[], stop_reason=None, usage={"input_tokens": 12, "output_tokens": 1})
        await response.write(_sse("message_start", {"message": start}))
        await response.write(_sse("ping", {}))
        if isinstance(entry, Stall | StreamError | Text):
            text = entry.text if isinstance(entry, Text) else entry.partial
            await _write_text_block(response, 0, text)
        if isinstance(entry, Stall):
            await self._pause(3600)
            return
        if isinstance(entry, StreamError):
            error = {"type": entry.error_type, "message": f"scripted {entry.error_type}"}
            await response.write(_sse("error", {"error": error}))
            return
        if isinstance(entry, ToolCalls):
            for index, (name, args) in enumerate(entry.calls):
                await _write_tool_block(response, index, name, args)
        stop = "tool_use" if isinstance(entry, ToolCalls) else "end_turn"
        delta = {"delta": {"stop_reason": stop, "stop_sequence": None}}
        await response.write(_sse("message_delta", {**delta, "usage": {"output_tokens": 6}}))
        await response.write(_sse("message_stop", {}))
        await response.write_eof()


async def _write_text_block(response: web.StreamResponse, index: int, text: str) -> None:
    block = {"type": "text", "text": ""}
    await response.write(_sse("content_block_start", {"index": index, "content_block": block}))
    for i in range(0, len(text), 5):
        delta = {"type": "text_delta", "text": text[i : i + 5]}
        await response.write(_sse("content_block_delta", {"index": index, "delta": delta}))
    await response.write(_sse("content_block_stop", {"index": index}))


async def _write_tool_block(
    response: web.StreamResponse, index: int, name: str, args: dict[str, Any]
) -> None:
    block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", "name": name, "input": {}}
    await response.write(_sse("content_block_start", {"index": index, "content_block": block}))
    raw = json.dumps(args)
    for i in range(0, len(raw), 6):
        delta = {"type": "input_json_delta", "partial_json": raw[i : i + 6]}
        await response.write(_sse("content_block_delta", {"index": index, "delta": delta}))
    await response.write(_sse("content_block_stop", {"index": index}))


def _error(status: Status) -> web.Response:
    headers = {} if status.retry_after is None else {"retry-after": f"{status.retry_after:g}"}
    kind = _ERROR_TYPES.get(status.status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": status.message}}
    return web.json_response(body, status=status.status, headers=headers)
