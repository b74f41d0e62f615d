"""AnthropicProvider against the loopback fake Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.errors import ProviderRejected
from core.providers import (
    AnthropicProvider,
    ChatMessage,
    ChatRequest,
    ProviderConfig,
    ToolCall,
    ToolSpec,
)
from tests.contracts.providers import ask as contract_ask
from tests.contracts.providers import collect
from tests.fakes.fake_anthropic import FakeAnthropic

KEY = "sk-ant-secret-999"
EXEC = ToolSpec(
    name="exec",
    description="Run a shell command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)


def ask(text: str) -> ChatRequest:
    return contract_ask(text, system="Be brief.", tools=(EXEC,))


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY) as server:
        yield server


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    config = ProviderConfig(
        kind="anthropic", base_url=fake.base_url, api_key=KEY, retry_backoff=0.001
    )
    instance = AnthropicProvider(config=config)
    yield instance
    await instance.aclose()


async def test_streams_text_through_ping_and_message_delta(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script("Hi there, how can I help?")

    deltas, completion = await collect(provider, ask("hello"))

    assert "".join(deltas) == completion.text == "Hi there, how can I help?"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (12, 6)
    body = fake.requests[0]
    assert body["stream"] is True
    assert body["model"] == "claude-sonnet-4-5"
    assert body["max_tokens"] == 4096
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert body["tools"] == [
        {"name": "exec", "description": "Run a shell command.", "input_schema": EXEC.parameters}
    ]
    assert fake.headers[0]["x-api-key"] == KEY
    assert fake.headers[0]["anthropic-version"] == "2023-06-01"


async def test_complete_does_not_ask_for_a_stream(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    await provider.complete(ask("ping"))

    assert "stream" not in fake.requests[0]


async def test_tool_use_and_results_on_the_wire(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    args = {"command": "ls -la", "timeout": 5}
    fake.script([("exec", args)])

    _, first = await collect(provider, ask("list files"))

    [call] = first.tool_calls

    follow_up = ChatRequest(
        system="Be brief.",
        messages=(
            ChatMessage(role="user", content="list files"),
            ChatMessage(role="assistant", content="Looking.", tool_calls=(call,)),
            ChatMessage(role="tool", content="a.txt b.txt", tool_call_id=call.id, name="exec"),
        ),
    )
    _, final = await collect(provider, follow_up)

    assert final.text == "tool said: a.txt b.txt"
    assert fake.requests[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": call.id, "name": "exec", "input": args},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "a.txt b.txt"}],
        },
    ]


async def test_consecutive_tool_results_merge_into_one_user_message(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    calls = (ToolCall(id="t1", name="exec", arguments={}), ToolCall(id="t2", name="exec"))
    request = ChatRequest(
        system="top",
        messages=(
            ChatMessage(role="system", content="extra rules"),
            ChatMessage(role="user", content="go"),
            ChatMessage(role="assistant", tool_calls=calls),
            ChatMessage(role="tool", content="one", tool_call_id="t1"),
            ChatMessage(role="tool", content="two", tool_call_id="t2"),
            ChatMessage(role="user", content="and?"),
        ),
    )

    await provider.complete(request)

    body = fake.requests[0]
    assert body["system"] == "top\n\nextra rules"
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert [block["type"] for block in body["messages"][2]["content"]] == [
        "tool_result",
        "tool_result",
        "text",
    ]


async def test_bad_key_is_rejected_without_leaking_it(fake: FakeAnthropic) -> None:
    config = ProviderConfig(kind="anthropic", base_url=fake.base_url, api_key="sk-ant-wrong")
    provider = AnthropicProvider(config=config)
    try:
        with pytest.raises(ProviderRejected) as caught:
            await provider.complete(ask("hi"))
    finally:
        await provider.aclose()

    assert caught.value.status == 401
    assert fake.calls == 1
    assert "sk-ant-wrong" not in str(caught.value)
    assert "invalid x-api-key: ***" in str(caught.value)
