"""Retries, timeouts and error mapping of the HTTP providers, against loopback fakes."""

from __future__ import annotations

import base64
import errno
import logging
import socket
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey
from multidict import CIMultiDict

from core.errors import ProviderRateLimited, ProviderRejected, ProviderUnavailable
from core.providers import (
    AnthropicProvider,
    ChatMessage,
    ChatRequest,
    OpenAIProvider,
    ProviderConfig,
    RetryPolicy,
    StreamEvent,
    TextDelta,
)
from core.providers.http import split_credentials
from core.providers.retry import display_url, parse_retry_after
from tests.fakes.fake_anthropic import FakeAnthropic, StreamError
from tests.fakes.fake_openai import FakeOpenAI, Stall, Status

SECRET = "sk-very-secret-key-1234"
REQUEST = ChatRequest(system="", messages=(ChatMessage(role="user", content="hi"),))


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def openai(base_url: str, **overrides: Any) -> OpenAIProvider:
    settings: dict[str, Any] = {
        "kind": "openai",
        "base_url": base_url,
        "model": "m",
        "api_key": SECRET,
        "retry_backoff": 0.001,
        **overrides,
    }
    return OpenAIProvider(config=ProviderConfig(**settings))


async def complete_text(provider: OpenAIProvider) -> str:
    try:
        return (await provider.complete(REQUEST)).text
    finally:
        await provider.aclose()


async def stream_text(provider: OpenAIProvider | AnthropicProvider, seen: list[str]) -> str:
    try:
        async for event in provider.stream(REQUEST):
            if isinstance(event, TextDelta):
                seen.append(event.text)
            else:
                return event.text
    finally:
        await provider.aclose()
    raise AssertionError("no completion")


async def test_429_is_retried_after_retry_after(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.script(Status(429, retry_after=0.05), "finally")

    with caplog.at_level(logging.WARNING, logger="core.providers.retry"):
        text = await stream_text(openai(fake.base_url), [])

    assert text == "finally"
    assert fake.calls == 2
    assert fake.hits[1] - fake.hits[0] >= 0.05
    assert "attempt 1/4 failed (HTTP 429)" in caplog.text
    assert SECRET not in caplog.text


async def test_429_every_time_is_rate_limited(fake: FakeOpenAI) -> None:
    fake.script(*[Status(429, retry_after=0.01)] * 3)

    with pytest.raises(ProviderRateLimited) as caught:
        await complete_text(openai(fake.base_url, max_retries=2))

    assert fake.calls == 3
    assert caught.value.status == 429
    assert caught.value.retry_after == pytest.approx(0.01)
    assert "after 3 attempts" in str(caught.value)


async def test_503_is_retried_then_unavailable(fake: FakeOpenAI) -> None:
    fake.script(503, 503, 503)

    with pytest.raises(ProviderUnavailable) as caught:
        await stream_text(openai(fake.base_url, max_retries=2), [])

    assert fake.calls == 3
    assert caught.value.status == 503
    assert str(caught.value).startswith(f"LLM provider at {fake.base_url} failed (HTTP 503)")


async def test_503_then_success(fake: FakeOpenAI) -> None:
    fake.script(503, "ok now")

    assert await stream_text(openai(fake.base_url), []) == "ok now"
    assert fake.calls == 2


async def test_401_is_rejected_at_once_without_leaking_the_key() -> None:
    async with FakeOpenAI(api_key="the-right-key") as fake:
        with pytest.raises(ProviderRejected) as caught:
            await stream_text(openai(fake.base_url), [])

    assert fake.calls == 1
    assert caught.value.status == 401
    message = str(caught.value)
    assert "rejected the request (HTTP 401)" in message
    assert "Incorrect API key provided: ***" in message
    chain: BaseException | None = caught.value
    while chain is not None:
        assert SECRET not in str(chain)
        chain = chain.__cause__


async def test_connection_refused_is_unavailable_with_a_clear_message() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://user:{SECRET}@127.0.0.1:{port}/v1?key={SECRET}"

    with pytest.raises(ProviderUnavailable) as caught:
        await complete_text(openai(base_url, max_retries=1))

    assert str(caught.value) == (
        f"LLM provider at http://127.0.0.1:{port}/v1 is unreachable (connection refused) "
        "after 2 attempts"
    )
    assert caught.value.status is None


async def test_no_retry_after_tokens_were_streamed(fake: FakeOpenAI) -> None:
    fake.script(Stall(partial="Hello world"), "never used")
    seen: list[str] = []

    with pytest.raises(ProviderUnavailable) as caught:
        await stream_text(openai(fake.base_url, timeout_read=0.2), seen)

    assert "".join(seen) == "Hello world"
    assert fake.calls == 1
    assert "read timeout" in str(caught.value)
    assert "after part of the reply was streamed" in str(caught.value)


async def test_read_timeout_before_any_token_is_retried() -> None:
    async with FakeOpenAI(latency=1.0) as fake:
        with pytest.raises(ProviderUnavailable) as caught:
            await stream_text(openai(fake.base_url, timeout_read=0.1, max_retries=1), [])

    assert fake.calls == 2
    assert "sent nothing for 0.1 s (read timeout) after 2 attempts" in str(caught.value)


async def test_total_timeout_bounds_the_whole_call() -> None:
    async with FakeOpenAI(latency=5.0) as fake:
        with pytest.raises(ProviderUnavailable) as caught:
            await complete_text(openai(fake.base_url, timeout_total=0.2))

    assert "did not finish within 0.2 s (timeout_total)" in str(caught.value)
    assert fake.calls == 1


async def test_retry_after_beyond_the_budget_gives_up_at_once(fake: FakeOpenAI) -> None:
    fake.script(Status(429, retry_after=30))

    with pytest.raises(ProviderRateLimited) as caught:
        await complete_text(openai(fake.base_url, timeout_total=1))

    assert fake.calls == 1
    assert caught.value.retry_after == 30


async def test_anthropic_overloaded_stream_is_retried_before_tokens() -> None:
    async with FakeAnthropic() as fake:
        fake.script(StreamError("overloaded_error"), "recovered")
        config = ProviderConfig(kind="anthropic", base_url=fake.base_url, retry_backoff=0.001)
        text = await stream_text(AnthropicProvider(config=config), [])

    assert text == "recovered"
    assert fake.calls == 2


async def test_anthropic_error_event_after_tokens_is_final() -> None:
    async with FakeAnthropic() as fake:
        fake.script(StreamError("overloaded_error", partial="Hi th"), "unused")
        config = ProviderConfig(kind="anthropic", base_url=fake.base_url, retry_backoff=0.001)
        seen: list[str] = []
        with pytest.raises(ProviderUnavailable) as caught:
            await stream_text(AnthropicProvider(config=config), seen)

    assert "".join(seen) == "Hi th"
    assert fake.calls == 1
    assert caught.value.status == 529


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "150", "retry-after": "9"}, 0.15),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(CIMultiDict(headers)) == expected


def test_display_url_hides_credentials_and_query() -> None:
    assert display_url("https://u:p@example.com:8443/v1?api-key=x#f") == (
        "https://example.com:8443/v1"
    )


async def test_total_timeout_bounds_a_stream_that_keeps_the_connection_open(
    fake: FakeOpenAI,
) -> None:
    fake.script(Stall(partial="Hel"))
    seen: list[str] = []

    with pytest.raises(ProviderUnavailable) as caught:
        await stream_text(openai(fake.base_url, timeout_total=0.3, timeout_read=30), seen)

    assert "".join(seen) == "Hel"
    assert "did not finish within 0.3 s (timeout_total)" in str(caught.value)


def _refused() -> aiohttp.ClientConnectorError:
    key = ConnectionKey("h", 1, False, True, None, None, None)
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")
    error = aiohttp.ClientConnectorError(key, refused)
    error.__cause__ = refused
    return error


@pytest.mark.parametrize(
    ("error", "retried", "message"),
    [
        (_refused(), True, "is unreachable (connection refused) after 2 attempts"),
        (aiohttp.ConnectionTimeoutError(), True, "is unreachable (connect timed out) after 2"),
        (aiohttp.SocketTimeoutError(), True, "sent nothing for 7 s (read timeout) after 2"),
        (aiohttp.ServerDisconnectedError(), True, "dropped the connection (ServerDisconnected"),
        (aiohttp.ClientPayloadError("cut"), True, "dropped the connection (ClientPayloadError)"),
        (aiohttp.InvalidURL("x:y"), False, "could not be called (InvalidURL: x:y)"),
    ],
)
async def test_transport_failures_are_classified(
    error: aiohttp.ClientError, retried: bool, message: str
) -> None:
    policy = RetryPolicy(target="http://h:1/v1", max_retries=1, backoff=0.001, timeout_read=7)
    deadlines: list[float] = []

    async def attempt(deadline: float) -> AsyncGenerator[StreamEvent, None]:
        deadlines.append(deadline)
        raise error
        yield  # an async generator, as providers' attempts are

    with pytest.raises(ProviderUnavailable) as caught:
        async for _ in policy.run(attempt):
            pass

    assert len(deadlines) == (2 if retried else 1)
    assert len(set(deadlines)) == 1, "every attempt shares the call's one deadline"
    assert f"LLM provider at http://h:1/v1 {message}" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8080/v1", ("http://127.0.0.1:8080/v1", None)),
        (
            "https://user:p%40ss@example.com/v1/chat",
            ("https://example.com/v1/chat", "Basic " + base64.b64encode(b"user:p@ss").decode()),
        ),
        (
            "http://tok@[::1]:9/v1",
            ("http://[::1]:9/v1", "Basic " + base64.b64encode(b"tok:").decode()),
        ),
    ],
)
def test_split_credentials(url: str, expected: tuple[str, str | None]) -> None:
    assert split_credentials(url) == expected


@pytest.mark.parametrize("key", [None, SECRET])
async def test_url_credentials_are_sent_as_basic_auth_unless_a_key_is_set(
    fake: FakeOpenAI, key: str | None
) -> None:
    base_url = fake.base_url.replace("http://", "http://me:pw@")
    await complete_text(openai(base_url, api_key=key))

    expected = f"Bearer {SECRET}" if key else "Basic " + base64.b64encode(b"me:pw").decode()
    assert fake.headers[0]["Authorization"] == expected
