"""OpenAIProvider against the loopback fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.providers import (
    ChatMessage,
    ChatRequest,
    OpenAIProvider,
    ProviderConfig,
    ToolCall,
    ToolSpec,
)
from tests.contracts.providers import ask, collect
from tests.fakes.fake_openai import FakeOpenAI

REPO_ROOT = Path(__file__).resolve().parents[2]

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file of the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def provider(fake: FakeOpenAI) -> AsyncIterator[OpenAIProvider]:
    config = ProviderConfig(
        kind="openai", base_url=fake.base_url, model="fake-model", api_key="sk-test"
    )
    instance = OpenAIProvider(config=config)
    yield instance
    await instance.aclose()


async def test_streamed_request_on_the_wire(fake: FakeOpenAI, provider: OpenAIProvider) -> None:
    _, completion = await collect(provider, ask("hi"))

    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (10, 5)
    body = fake.requests[0]
    assert body["stream"] is True
    assert body["model"] == "fake-model"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]
    assert "tools" not in body
    assert fake.headers[0]["Authorization"] == "Bearer sk-test"
    assert fake.headers[0]["Content-Type"] == "application/json"
    assert fake.headers[0]["Accept"] == "text/event-stream"


async def test_complete_does_not_ask_for_a_stream(
    fake: FakeOpenAI, provider: OpenAIProvider
) -> None:
    completion = await provider.complete(ask("ping"))

    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (10, 5)
    assert "stream" not in fake.requests[0]


async def test_request_overrides_model_and_sampling(
    fake: FakeOpenAI, provider: OpenAIProvider
) -> None:
    await provider.complete(ask("x", model="other", max_tokens=50, temperature=0.2))

    body = fake.requests[0]
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("other", 50, 0.2)


async def test_tool_calls_and_results_on_the_wire(
    fake: FakeOpenAI, provider: OpenAIProvider
) -> None:
    args = {"path": "notes/today.md", "limit": 3, "nested": {"a": [1, 2]}}
    fake.script([("read_file", args)])

    _, first = await collect(provider, ask("read it", tools=(READ_FILE,)))

    [call] = first.tool_calls
    assert call.id.startswith("call_")
    assert fake.requests[0]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file of the workspace.",
                "parameters": READ_FILE.parameters,
            },
        }
    ]

    follow_up = ChatRequest(
        system="s",
        messages=(
            ChatMessage(role="user", content="read it"),
            ChatMessage(role="assistant", tool_calls=(call,)),
            ChatMessage(role="tool", content="42 lines", tool_call_id=call.id, name="read_file"),
        ),
        tools=(READ_FILE,),
    )
    _, final = await collect(provider, follow_up)

    assert final.text == "tool said: 42 lines"
    sent = fake.requests[1]["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps(args)},
            }
        ],
    }
    assert sent[3] == {"role": "tool", "tool_call_id": call.id, "content": "42 lines"}


async def test_default_rules_call_a_tool(fake: FakeOpenAI, provider: OpenAIProvider) -> None:
    _, completion = await collect(provider, ask('!tool exec {"command": "ls"}'))

    assert [(c.name, c.arguments) for c in completion.tool_calls] == [("exec", {"command": "ls"})]


async def test_no_authorization_header_without_key(fake: FakeOpenAI) -> None:
    config = ProviderConfig(kind="openai", base_url=fake.base_url, model="m")
    provider = OpenAIProvider(config=config)
    try:
        await provider.complete(ask("hi"))
    finally:
        await provider.aclose()

    assert "Authorization" not in fake.headers[0]


async def test_assistant_history_is_sent_as_is(fake: FakeOpenAI, provider: OpenAIProvider) -> None:
    call = ToolCall(id="c1", name="t", arguments={})
    request = ChatRequest(
        system="",
        messages=(
            ChatMessage(role="user", content="a"),
            ChatMessage(role="assistant", content="thinking", tool_calls=(call,)),
            ChatMessage(role="tool", content="r", tool_call_id="c1"),
            ChatMessage(role="assistant", content="b"),
            ChatMessage(role="user", content="c"),
        ),
    )

    await provider.complete(request)

    sent = fake.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "thinking"


async def test_fake_runs_as_a_process() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.fake_openai",
        "--port",
        "0",
        "--latency-ms",
        "10",
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        assert line.startswith(b"PORT ")
        port = int(line.split()[1])
        config = ProviderConfig(kind="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m")
        provider = OpenAIProvider(config=config)
        try:
            _, completion = await collect(provider, ask("over the wire"))
        finally:
            await provider.aclose()
        assert completion.text == "echo: over the wire"
    finally:
        process.terminate()
        await process.wait()


async def test_the_proxy_of_the_environment_is_used(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The host does not resolve: only a proxy can answer, and the fake plays it.
    proxy = fake.base_url.removesuffix("/v1")
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    config = ProviderConfig(
        kind="openai", base_url="http://llm.invalid/v1", model="fake-model", api_key="sk-test"
    )
    instance = OpenAIProvider(config=config)
    try:
        text, _ = await collect(instance, ask("hi"))
    finally:
        await instance.aclose()

    assert text
    assert fake.headers[-1]["Host"] == "llm.invalid"
