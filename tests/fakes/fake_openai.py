"""A loopback fake of the OpenAI Chat Completions API, scriptable per test or run as a process."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import re
import signal
import sys
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.fake_embeddings import embeddings_route
from tests.fakes.loopback import LoopbackServer

__all__ = [
    "Delay",
    "Entry",
    "FakeOpenAI",
    "ScriptItem",
    "Stall",
    "Status",
    "Text",
    "ToolCalls",
    "ToolThenText",
    "prose",
    "rule_reply",
]


@dataclass(frozen=True)
class Text:
    """Answer with this text (streamed in pieces of ``chunk_chars`` characters, each
    ``chunk_delay`` seconds after the one before)."""

    text: str
    chunk_chars: int = 4
    chunk_delay: float = 0.0


@dataclass(frozen=True)
class ToolCalls:
    """Answer with these tool calls: ``(name, arguments)`` pairs."""

    calls: tuple[tuple[str, dict[str, Any]], ...]


@dataclass(frozen=True)
class Status:
    """Answer with an HTTP error status (and a ``Retry-After`` header if given)."""

    status: int
    retry_after: float | None = None
    message: str = "scripted failure"


@dataclass(frozen=True)
class Stall:
    """Send ``partial`` text (streaming only), then go silent until the server stops."""

    partial: str = ""


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds``, then answer with ``then``."""

    seconds: float
    then: Text | ToolCalls | Status


Entry = Text | ToolCalls | Status | Stall | Delay
"""One scripted answer."""

ScriptItem = Entry | str | int | list[tuple[str, dict[str, Any]]]
"""What :meth:`FakeOpenAI.script` accepts: an entry, or text / a status / tool call pairs."""

Responder = Callable[
    [str | None, list[dict[str, Any]]], ScriptItem | Awaitable[ScriptItem | None] | None
]
"""``responder(session, messages)``: a scripted answer for a request of ``session`` (the
key from the system prompt), or None to fall through to the queue and the rules. May be
async (e.g. to hold one session's answer until the test lets it go)."""


def _as_entry(item: ScriptItem) -> Entry:
    if isinstance(item, str):
        return Text(item)
    if isinstance(item, int):
        return Status(item)
    if isinstance(item, list):
        return ToolCalls(tuple(item))
    return item


def rule_reply(*, user_text: str, tool_result: str | None) -> Entry:
    """The default answer when nothing is scripted (usable from spawned e2e tests).

    A tool result gets ``tool said: <first 200 chars>``; ``!tool <name> <json-args>``
    calls that tool; ``!sleep <s>`` waits then echoes; ``!fail <status>`` fails with
    that status; anything else gets ``echo: <text>``.
    """
    if tool_result is not None:
        return Text(f"tool said: {tool_result[:200]}")
    if user_text.startswith("!tool "):
        parts = user_text.split(maxsplit=2)
        name = parts[1] if len(parts) > 1 else ""
        try:
            args = json.loads(parts[2]) if len(parts) > 2 else {}
        except ValueError:
            return Text(f"bad !tool arguments (not JSON): {parts[2][:200]}")
        return ToolCalls(((name, args),))
    echo = Text(f"echo: {user_text}")
    if sleep := re.search(r"!sleep\s+(\d+(?:\.\d+)?)", user_text):
        return Delay(float(sleep.group(1)), echo)
    if fail := re.search(r"!fail\s+(\d{3})", user_text):
        return Status(int(fail.group(1)), message=f"failing as asked ({fail.group(1)})")
    return echo


_PROSE = (
    "The notes say the deploy window moves to Thursday, the backup job now runs at 02:00, "
    "and the staging database was upgraded last week without trouble. Nothing in them "
    "needs action today, but the certificate on the mail relay expires next month, so a "
    "reminder would help. "
)


def prose(chars: int) -> str:
    """Deterministic English-looking text of exactly ``chars`` characters."""
    return (_PROSE * (chars // len(_PROSE) + 1))[:chars]


@dataclass(frozen=True, kw_only=True)
class ToolThenText:
    """A scripted shape for every message: first a tool call, then a long streamed answer.

    A request whose last message is not a tool result is answered with one call of
    ``tool(arguments)``; a request that carries the tool result is answered with
    ``reply_chars`` characters of :func:`prose`, streamed ``chunk_chars`` at a time. So
    each user message costs exactly two LLM calls. If ``expect_in_result`` is set, the
    request log records whether the tool result contained it (the tool really ran).
    """

    tool: str = "read_file"
    arguments: dict[str, Any] = field(default_factory=lambda: {"path": "notes/bench.md"})
    reply_chars: int = 1200
    chunk_chars: int = 20
    expect_in_result: str | None = None

    def answer(self, messages: list[dict[str, Any]]) -> Entry:
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return Text(prose(self.reply_chars), chunk_chars=self.chunk_chars)
        return ToolCalls(((self.tool, dict(self.arguments)),))


_RESULT_CHARS = 500
"""How much of a tool result the request log keeps."""
_SESSION_LINE = re.compile(r"^- Session: (\S+)$", re.MULTILINE)


def _log_entry(body: dict[str, Any], entry: Entry, expect: str | None) -> dict[str, Any]:
    """One compact line of the request log: which session, what was answered."""
    messages = body.get("messages") or []
    system: dict[str, Any] = next((m for m in messages if m.get("role") == "system"), {})
    found = _SESSION_LINE.search(_text_of(system.get("content")))
    last = messages[-1] if messages else {}
    tool_result = _text_of(last.get("content")) if last.get("role") == "tool" else None
    while isinstance(entry, Delay):
        entry = entry.then
    answer = {Text: "text", ToolCalls: "tool_calls", Status: "error", Stall: "stall"}
    users = [m for m in messages if m.get("role") == "user"]
    return {
        "user_text": _text_of(users[-1].get("content"))[:200] if users else "",
        "t": time.monotonic(),
        "session": found.group(1) if found else None,
        "messages": len(messages),
        "chars": sum(len(_text_of(m.get("content"))) for m in messages),
        "tool_result": tool_result is not None,
        "tool_result_text": None if tool_result is None else tool_result[:_RESULT_CHARS],
        "tool_result_ok": tool_result is not None and (expect is None or expect in tool_result),
        "answer": answer[type(entry)],
    }


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass(kw_only=True)
class FakeOpenAI(LoopbackServer):
    """An OpenAI-compatible server on 127.0.0.1 (port 0 by default), in-process.

    Use as ``async with FakeOpenAI() as fake:`` and point a client at ``fake.base_url``.

    Attributes:
        latency: seconds to wait before the first byte of every answer.
        api_key: if set, requests without ``Authorization: Bearer <api_key>`` get 401
            (whose message quotes the key it received, as a careless server would).
        scenario: when set, answers that nothing is scripted for follow it instead of
            :func:`rule_reply` (see :class:`ToolThenText`).
        keep_bodies: keep every request's body and headers in ``requests`` /
            ``headers`` (a long benchmark turns this off; ``log`` is always kept).
        requests: JSON bodies received on ``/chat/completions``, in order.
        headers: the headers of those requests.
        hits: ``time.monotonic()`` of each such request.
        log: one compact entry per request (session key from the system prompt,
            message count, whether a tool result came back, what was answered); served
            as JSON on ``GET /_fake/log`` and summed up on ``GET /_fake/stats``.
    """

    latency: float = 0.0
    api_key: str | None = None
    model: str = "fake-model"
    scenario: ToolThenText | None = None
    keep_bodies: bool = True
    responder: Responder | None = None
    """Answers by session and conversation (a parent and its subagents), tried first."""
    embeddings_down: list[bool] = field(default_factory=lambda: [False])
    """``embeddings_down[0] = True``: ``/v1/embeddings`` answers 503."""
    log: list[dict[str, Any]] = field(default_factory=list, init=False)
    _queue: deque[Entry] = field(default_factory=deque, init=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *items: ScriptItem) -> None:
        """Queue answers for the next requests, in order (then the rules apply)."""
        self._queue.extend(_as_entry(item) for item in items)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", embeddings_route(self.embeddings_down))
        app.router.add_get("/_fake/requests", self._received)
        app.router.add_get("/_fake/log", self._log)
        app.router.add_get("/_fake/stats", self._stats)

    def stats(self) -> dict[str, Any]:
        """Counts over the request log: requests, answers by kind, tool results seen."""
        answers: dict[str, int] = {}
        for entry in self.log:
            answers[entry["answer"]] = answers.get(entry["answer"], 0) + 1
        return {
            "requests": len(self.log),
            "answers": answers,
            "tool_results": sum(e["tool_result"] for e in self.log),
            "tool_results_ok": sum(e["tool_result_ok"] for e in self.log),
            "sessions": len({e["session"] for e in self.log}),
            "latency_ms": self.latency * 1000,
        }

    async def _log(self, request: web.Request) -> web.Response:
        """``GET /_fake/log?since=N``: the request log from entry N on."""
        since = int(request.query.get("since", "0"))
        return web.json_response({"total": len(self.log), "log": self.log[since:]})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _received(self, request: web.Request) -> web.Response:
        """For tests that run the fake as a process: the last user text of each request
        (its first 200 characters) and the tool results the requests carried (the first
        500 characters of each)."""
        results = [e["tool_result_text"] for e in self.log if e["tool_result_text"] is not None]
        return web.json_response(
            {"user_texts": [e["user_text"] for e in self.log], "tool_results": results}
        )

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        )

    async def _respond(self, body: dict[str, Any]) -> Entry | None:
        if self.responder is None:
            return None
        messages = body.get("messages") or []
        system = next((m for m in messages if m.get("role") == "system"), {})
        found = _SESSION_LINE.search(_text_of(system.get("content")))
        item = self.responder(found.group(1) if found else None, messages)
        if inspect.isawaitable(item):
            item = await item
        return None if item is None else _as_entry(item)

    def _next_entry(self, body: dict[str, Any]) -> Entry:
        if self._queue:
            return self._queue.popleft()
        if self.scenario is not None:
            return self.scenario.answer(body.get("messages") or [])
        messages = body.get("messages") or [{}]
        last = messages[-1]
        if last.get("role") == "tool":
            return rule_reply(user_text="", tool_result=_text_of(last.get("content")))
        users = [m for m in messages if m.get("role") == "user"]
        return rule_reply(
            user_text=_text_of(users[-1].get("content")) if users else "", tool_result=None
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(time.monotonic())
        if self.keep_bodies:
            self.headers.append(dict(request.headers))
        body = await request.json()
        if self.keep_bodies:
            self.requests.append(body)
        await self._pause(self.latency)
        if self.api_key is not None:
            sent = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if sent != self.api_key:
                refused = Status(401, message=f"Incorrect API key provided: {sent}")
                self.log.append(_log_entry(body, refused, None))
                return _error(refused)
        entry = await self._respond(body) or self._next_entry(body)
        expect = self.scenario.expect_in_result if self.scenario else None
        self.log.append(_log_entry(body, entry, expect))
        while isinstance(entry, Delay):
            await self._pause(entry.seconds)
            entry = entry.then
        if isinstance(entry, Status):
            return _error(entry)
        if not body.get("stream"):
            if isinstance(entry, Stall):
                await self._pause(3600)
                return web.Response(status=504)
            return web.json_response(_completion(entry, self.model))
        return await self._stream(request, entry, body)

    async def _stream(
        self, request: web.Request, entry: Text | ToolCalls | Stall, body: dict[str, Any]
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        chunker = _Chunker(self.model)
        try:
            await response.prepare(request)  # the client may be gone already (killed)
            await response.write(chunker.chunk({"role": "assistant", "content": ""}))
            if isinstance(entry, Stall):
                for piece in _pieces(entry.partial):
                    await response.write(chunker.chunk({"content": piece}))
                await self._pause(3600)
                return response
            delay = entry.chunk_delay if isinstance(entry, Text) else 0.0
            for delta in _deltas(entry):
                await response.write(chunker.chunk(delta))
                if delay:
                    await self._pause(delay)
            finish = "tool_calls" if isinstance(entry, ToolCalls) else "stop"
            await response.write(chunker.chunk({}, finish_reason=finish))
            if (body.get("stream_options") or {}).get("include_usage"):
                await response.write(chunker.usage())
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            pass
        return response


def _deltas(entry: Text | ToolCalls) -> list[dict[str, Any]]:
    """OpenAI-style deltas: text in small pieces; tool calls with split arguments."""
    if isinstance(entry, Text):
        return [{"content": piece} for piece in _pieces(entry.text, entry.chunk_chars)]
    deltas: list[dict[str, Any]] = []
    for index, (name, args) in enumerate(entry.calls):
        head = {
            "index": index,
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        deltas.append({"tool_calls": [head]})
        for piece in _pieces(json.dumps(args), 7):
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    return deltas


class _Chunker:
    """Builds ``data:`` lines shaped like OpenAI's ``chat.completion.chunk`` objects."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        self.model = model
        self.created = int(time.time())

    def _line(self, payload: dict[str, Any]) -> bytes:
        base = {"id": self.id, "object": "chat.completion.chunk", "created": self.created}
        return f"data: {json.dumps({**base, 'model': self.model, **payload})}\n\n".encode()

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self._line({"choices": [choice]})

    def usage(self) -> bytes:
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return self._line({"choices": [], "usage": usage})


def _completion(entry: Text | ToolCalls, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if isinstance(entry, Text):
        message["content"] = entry.text
    else:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args in entry.calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if isinstance(entry, ToolCalls) else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _error(status: Status) -> web.Response:
    headers = {} if status.retry_after is None else {"Retry-After": f"{status.retry_after:g}"}
    kind = "rate_limit_exceeded" if status.status == 429 else "api_error"
    body = {"error": {"message": status.message, "type": kind, "code": status.status}}
    return web.json_response(body, status=status.status, headers=headers)


async def _serve(port: int, latency: float, scenario: ToolThenText | None) -> None:
    # A process serves many requests: keep the compact log, not every body.
    fake = FakeOpenAI(latency=latency, port=port, scenario=scenario, keep_bodies=False)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with fake:
        print(f"PORT {fake.port}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    """Run the fake as a process: prints ``PORT <n>`` once listening, serves until killed.

    ``--tool-then-text`` answers every message with a tool call and then a long streamed
    text (:class:`ToolThenText`); without it the :func:`rule_reply` rules apply.
    """
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="before every answer")
    parser.add_argument("--tool-then-text", action="store_true")
    parser.add_argument("--tool", default="read_file")
    parser.add_argument("--tool-args", default='{"path": "notes/bench.md"}', help="JSON")
    parser.add_argument("--reply-chars", type=int, default=1200)
    parser.add_argument("--chunk-chars", type=int, default=20)
    parser.add_argument("--expect-in-result", default=None)
    args = parser.parse_args(argv)
    scenario = None
    if args.tool_then_text:
        scenario = ToolThenText(
            tool=args.tool,
            arguments=json.loads(args.tool_args),
            reply_chars=args.reply_chars,
            chunk_chars=args.chunk_chars,
            expect_in_result=args.expect_in_result,
        )
    asyncio.run(_serve(args.port, args.latency_ms / 1000, scenario))
    sys.exit(0)


if __name__ == "__main__":
    main()
