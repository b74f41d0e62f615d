"""Token counts: bpe-openai for OpenAI models, the calibrated estimate otherwise."""

from __future__ import annotations

import pytest

from core.agent.tokens import ESTIMATE, encoding_for, for_model, message_tokens
from core.providers.base import ChatMessage, ToolCall
from tests.unit.token_corpus import CORPUS

pytest.importorskip("bpe_openai")


def test_known_strings_exact() -> None:
    o200k, cl100k = for_model("gpt-4o"), for_model("gpt-4")
    assert (o200k.name, cl100k.name) == ("o200k_base", "cl100k_base")
    assert o200k.count("Hello, world!") == 4
    assert cl100k.count("Hello, world!") == 4
    assert o200k.count("") == 0
    assert o200k.count("请在明天早上提醒我") < cl100k.count("请在明天早上提醒我")
    assert cl100k.count("tiktoken is great!") == 6


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("claude-sonnet-4", None),
        ("llama3.2", None),
        (None, None),
    ],
)
def test_encoding_for(model: str | None, encoding: str | None) -> None:
    assert encoding_for(model) == encoding


def test_unknown_model_is_estimated() -> None:
    assert for_model("claude-sonnet-4") is ESTIMATE
    assert for_model(None) is ESTIMATE


def test_estimate_within_15_percent_on_corpus() -> None:
    exact = for_model("gpt-4o")
    total_exact = sum(exact.count(t) for t in CORPUS.values())
    total_estimate = sum(ESTIMATE.count(t) for t in CORPUS.values())
    assert abs(total_estimate / total_exact - 1) <= 0.15
    for name, text in CORPUS.items():  # each kind of text stays within 20%
        assert abs(ESTIMATE.count(text) / exact.count(text) - 1) <= 0.20, name


def test_message_tokens_counts_tool_calls() -> None:
    plain = ChatMessage(role="assistant", content="ok")
    call = ToolCall(id="c1", name="read_file", arguments={"path": "notes.md"})
    with_call = ChatMessage(role="assistant", content="ok", tool_calls=(call,))
    counter = for_model("gpt-4o")
    assert message_tokens(plain, counter) == 4 + 1
    assert message_tokens(with_call, counter) > message_tokens(plain, counter) + 4
