"""ScriptedProvider and FunctionProvider: deterministic in-process LLMs, no network."""

from __future__ import annotations

import inspect
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

from core.providers.base import ChatRequest, Completion, StreamEvent, TextDelta, Usage

__all__ = ["FunctionProvider", "Reply", "ReplyFunction", "ScriptedProvider", "echo_reply"]

Reply = str | Completion
"""What a script returns for one call: plain text, or a full :class:`Completion`."""

ReplyFunction = Callable[[ChatRequest], Reply | Awaitable[Reply]]
"""Computes the reply to a request; may be sync or async."""

_WORDS = re.compile(r"\s*\S+\s*|\s+")


def echo_reply(request: ChatRequest) -> str:
    """``echo: <text of the last user message>`` — the default reply."""
    for message in reversed(request.messages):
        if message.role == "user":
            return f"echo: {message.content}"
    return "echo: "


def _estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


class ScriptedProvider:
    """A deterministic provider for tests and offline runs.

    Replies come from a script consumed in order, or from a function of the request;
    with neither (or once the script is used up) it echoes the last user message.
    Streams text in word-sized deltas.

    Attributes:
        calls: how many LLM calls were made (streamed or not).
        requests: every request received, in order.
    """

    name = "scripted"

    def __init__(self, *, replies: Iterable[Reply] = (), fn: ReplyFunction | None = None) -> None:
        """Create the provider.

        Args:
            replies: texts or completions, returned one per call, in order.
            fn: computes the reply once ``replies`` are used up (default: echo).
        """
        self._replies: deque[Reply] = deque(replies)
        self._fn: ReplyFunction = fn or echo_reply
        self.calls = 0
        self.requests: list[ChatRequest] = []

    @classmethod
    def from_function(cls, fn: ReplyFunction) -> ScriptedProvider:
        """A provider whose every reply is ``fn(request)`` (sync or async)."""
        return cls(fn=fn)

    async def complete(self, request: ChatRequest) -> Completion:
        """Answer one call at once."""
        self.calls += 1
        self.requests.append(request)
        reply = self._replies.popleft() if self._replies else self._fn(request)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, Completion):
            return reply
        prompt = request.system + "".join(m.content for m in request.messages)
        return Completion(
            text=reply,
            finish_reason="stop",
            usage=Usage(
                input_tokens=_estimate_tokens(prompt), output_tokens=_estimate_tokens(reply)
            ),
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Answer one call as word-sized text deltas, then the :class:`Completion`."""
        completion = await self.complete(request)
        for word in _WORDS.findall(completion.text):
            yield TextDelta(text=word)
        yield completion

    async def aclose(self) -> None:
        """Nothing to release."""


class FunctionProvider(ScriptedProvider):
    """A provider whose every reply is ``fn(request)``: ``FunctionProvider(fn)``."""

    name = "function"

    def __init__(self, fn: ReplyFunction) -> None:
        """Create the provider.

        Args:
            fn: computes the reply (text or :class:`Completion`) to a request; sync or async.
        """
        super().__init__(fn=fn)
