"""ScriptedProvider, FunctionProvider, ProviderConfig and build_provider."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.errors import ConfigError
from core.providers import (
    AnthropicProvider,
    ChatMessage,
    ChatRequest,
    Completion,
    FunctionProvider,
    OpenAIProvider,
    Provider,
    ProviderConfig,
    ScriptedProvider,
    ToolCall,
    build_provider,
)
from tests.contracts.providers import collect


def ask(text: str) -> ChatRequest:
    return ChatRequest(system="", messages=(ChatMessage(role="user", content=text),))


async def test_echoes_the_last_user_message_in_word_deltas() -> None:
    provider = ScriptedProvider()

    deltas, completion = await collect(provider, ask("the quick brown fox"))

    assert deltas == ["echo: ", "the ", "quick ", "brown ", "fox"]
    assert completion.text == "echo: the quick brown fox"
    assert completion.finish_reason == "stop"
    assert provider.calls == 1
    assert isinstance(provider, Provider)


async def test_replies_in_order_then_echo() -> None:
    call = ToolCall(id="c1", name="remember", arguments={"text": "x"})
    provider = ScriptedProvider(replies=["first", Completion(tool_calls=(call,))])

    assert (await provider.complete(ask("a"))).text == "first"
    _, second = await collect(provider, ask("b"))
    assert second.tool_calls == (call,)
    assert (await provider.complete(ask("c"))).text == "echo: c"
    assert provider.calls == 3
    assert [r.messages[-1].content for r in provider.requests] == ["a", "b", "c"]


async def test_from_function_sync_and_async() -> None:
    async def shout(request: ChatRequest) -> str:
        return request.messages[-1].content.upper()

    sync = ScriptedProvider.from_function(lambda request: f"{len(request.messages)} messages")
    assert (await sync.complete(ask("x"))).text == "1 messages"
    deltas, completion = await collect(FunctionProvider(shout), ask("hey you"))
    assert "".join(deltas) == completion.text == "HEY YOU"


async def test_build_provider_kinds() -> None:
    assert build_provider(ProviderConfig()) is None
    scripted = build_provider(ProviderConfig(kind="scripted", script=["hello"]))
    assert isinstance(scripted, ScriptedProvider)
    assert (await scripted.complete(ask("x"))).text == "hello"

    openai = build_provider(ProviderConfig(kind="openai", api_key="k"))
    anthropic = build_provider(ProviderConfig(kind="anthropic", api_key="k"))
    assert isinstance(openai, OpenAIProvider)
    assert isinstance(anthropic, AnthropicProvider)
    await openai.aclose()
    await anthropic.aclose()


def test_config_defaults_per_kind() -> None:
    openai = ProviderConfig(kind="openai")
    assert (openai.effective_base_url, openai.effective_model) == (
        "https://api.openai.com/v1",
        "gpt-4o-mini",
    )
    local = ProviderConfig(kind="openai", base_url="http://127.0.0.1:11434/v1/")
    assert (local.effective_base_url, local.effective_model) == ("http://127.0.0.1:11434/v1", None)
    assert ProviderConfig(kind="anthropic").effective_model == "claude-sonnet-4-5"


def test_self_hosted_openai_without_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        build_provider(ProviderConfig(kind="openai", base_url="http://127.0.0.1:11434/v1"))

    assert caught.value.key == "provider.model"


def test_vendor_endpoint_without_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        build_provider(ProviderConfig(kind="anthropic"))

    assert caught.value.key == "provider.api_key"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timeout_read", 0, "must be a positive number of seconds"),
        ("max_retries", -1, "must be 0 (no retries) or more"),
        ("base_url", "localhost:8080", "must be an http:// or https:// URL"),
        ("temperature", 3, "must be between 0 and 2"),
        ("kind", "gemini", "Input should be 'openai', 'anthropic' or 'scripted'"),
        ("api_base", "x", "Extra inputs are not permitted"),
    ],
)
def test_config_validation_messages(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ProviderConfig.model_validate({field: value})

    assert message in str(caught.value)
    assert field in str(caught.value)


def test_api_key_is_masked_in_config_repr() -> None:
    config = ProviderConfig(kind="openai", api_key="sk-hidden")

    assert "sk-hidden" not in repr(config)
