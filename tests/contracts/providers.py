"""Providers under test: each one ready to use, with a way to script its next answer.

A rig pairs a :class:`Provider` with the other side of its wire: the loopback fake
server for the HTTP providers, a scripted reply function for the in-process ones.
The contract suite drives every rig the same way; a new provider adds a rig here and
a ``pytest.param`` in :data:`RIGS`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from core.errors import ProviderError, ProviderRateLimited, ProviderRejected, ProviderUnavailable
from core.providers import (
    AnthropicProvider,
    ChatMessage,
    ChatRequest,
    Completion,
    OpenAIProvider,
    Provider,
    ProviderConfig,
    ScriptedProvider,
    TextDelta,
    ToolCall,
)
from tests.fakes.fake_anthropic import FakeAnthropic
from tests.fakes.fake_openai import FakeOpenAI, Status, Text, ToolCalls

__all__ = ["RIGS", "ProviderRig", "ask", "collect"]

Calls = list[tuple[str, dict[str, Any]]]


def ask(text: str, **kwargs: Any) -> ChatRequest:
    """A one-message request (``system`` defaults to a short instruction)."""
    kwargs.setdefault("system", "You are terse.")
    return ChatRequest(messages=(ChatMessage(role="user", content=text),), **kwargs)


async def collect(provider: Provider, request: ChatRequest) -> tuple[list[str], Completion]:
    """Stream ``request``: the text deltas, and the one Completion that must end the stream."""
    deltas: list[str] = []
    completions: list[Completion] = []
    async for event in provider.stream(request):
        assert not completions, f"{event!r} came after the Completion"
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            assert isinstance(event, Completion), event
            completions.append(event)
    assert len(completions) == 1, "the stream did not end with a Completion"
    return deltas, completions[0]


class ProviderRig(Protocol):
    """A ready provider and the means to decide what it answers next."""

    provider: Provider

    def reply(self, text: str) -> None:
        """The next call answers with ``text``."""

    def call_tools(self, calls: Calls) -> None:
        """The next call asks for these tool calls: ``(name, arguments)`` pairs."""

    def fail(self, status: int) -> None:
        """The next call fails with this HTTP status (no retries are configured)."""

    @property
    def calls(self) -> int:
        """How many LLM calls reached the other side."""


class _FakeServerRig:
    """An HTTP provider against its loopback fake (``FakeOpenAI``, ``FakeAnthropic``)."""

    def __init__(self, provider: Provider, fake: FakeOpenAI | FakeAnthropic) -> None:
        self.provider = provider
        self._fake = fake

    def reply(self, text: str) -> None:
        self._fake.script(Text(text))

    def call_tools(self, calls: Calls) -> None:
        self._fake.script(ToolCalls(tuple(calls)))

    def fail(self, status: int) -> None:
        self._fake.script(Status(status, message=f"scripted {status}"))

    @property
    def calls(self) -> int:
        return self._fake.calls


def _error_for(status: int) -> ProviderError:
    """What an HTTP provider raises for ``status`` once retries are exhausted."""
    message = f"scripted failure (HTTP {status})"
    if status == 429:
        return ProviderRateLimited(message, status=status)
    if status >= 500:
        return ProviderUnavailable(message, status=status)
    return ProviderRejected(message, status=status)


class _ScriptedRig:
    """The in-process :class:`ScriptedProvider`, answering from a queue."""

    def __init__(self) -> None:
        self._queue: deque[Callable[[], str | Completion]] = deque()
        self.provider = ScriptedProvider(fn=self._next)

    def _next(self, request: ChatRequest) -> str | Completion:
        assert self._queue, "the contract test did not script this call"
        return self._queue.popleft()()

    def reply(self, text: str) -> None:
        self._queue.append(lambda: text)

    def call_tools(self, calls: Calls) -> None:
        tool_calls = tuple(
            ToolCall(id=f"call_{i}", name=name, arguments=args)
            for i, (name, args) in enumerate(calls)
        )
        self._queue.append(lambda: Completion(tool_calls=tool_calls, finish_reason="tool_calls"))

    def fail(self, status: int) -> None:
        def raise_() -> str:
            raise _error_for(status)

        self._queue.append(raise_)

    @property
    def calls(self) -> int:
        return self.provider.calls  # type: ignore[attr-defined, no-any-return]


def _settings(kind: str, base_url: str) -> ProviderConfig:
    return ProviderConfig(
        kind=kind,  # type: ignore[arg-type]
        base_url=base_url,
        model="contract-model",
        api_key="sk-contract",
        max_retries=0,
        retry_backoff=0.001,
    )


@asynccontextmanager
async def _http_rig(
    fake: FakeOpenAI | FakeAnthropic,
    kind: str,
    provider_type: type[OpenAIProvider | AnthropicProvider],
) -> AsyncIterator[ProviderRig]:
    async with fake:
        provider = provider_type(config=_settings(kind, fake.base_url))
        try:
            yield _FakeServerRig(provider, fake)
        finally:
            await provider.aclose()


def openai_rig() -> AbstractAsyncContextManager[ProviderRig]:
    return _http_rig(FakeOpenAI(), "openai", OpenAIProvider)


def anthropic_rig() -> AbstractAsyncContextManager[ProviderRig]:
    return _http_rig(FakeAnthropic(), "anthropic", AnthropicProvider)


@asynccontextmanager
async def scripted_rig() -> AsyncIterator[ProviderRig]:
    rig = _ScriptedRig()
    try:
        yield rig
    finally:
        await rig.provider.aclose()


RIGS: dict[str, Callable[[], AbstractAsyncContextManager[ProviderRig]]] = {
    "openai": openai_rig,
    "anthropic": anthropic_rig,
    "scripted": scripted_rig,
}
"""Every Provider implementation the contract suite runs against, by id."""
