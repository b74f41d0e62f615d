"""The Provider contract: every implementation passes the same suite against its fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest

from core.errors import ProviderError, ProviderRateLimited, ProviderRejected, ProviderUnavailable
from core.providers import ChatMessage, ChatRequest, Provider, TextDelta, ToolSpec
from tests.contracts.providers import RIGS, ProviderRig, ask, collect

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file of the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
ARGS: dict[str, Any] = {"path": "notes/today.md", "limit": 3, "nested": {"a": [1, 2.5, None]}}


@pytest.fixture(params=list(RIGS))
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[ProviderRig]:
    async with RIGS[request.param]() as ready:
        yield ready


def test_is_a_provider_with_a_name(rig: ProviderRig) -> None:
    assert isinstance(rig.provider, Provider)
    assert isinstance(rig.provider.name, str) and rig.provider.name


async def test_stream_yields_deltas_then_one_completion_with_the_same_text(
    rig: ProviderRig,
) -> None:
    rig.reply("Hello there, my good friend!")

    deltas, completion = await collect(rig.provider, ask("hi"))

    assert len(deltas) > 1, deltas
    assert all(deltas), deltas
    assert "".join(deltas) == completion.text == "Hello there, my good friend!"
    assert completion.tool_calls == ()
    assert completion.finish_reason == "stop"
    assert rig.calls == 1


async def test_complete_returns_the_whole_answer(rig: ProviderRig) -> None:
    rig.reply("one piece")

    completion = await rig.provider.complete(ask("hi"))

    assert (completion.text, completion.tool_calls) == ("one piece", ())
    assert completion.finish_reason == "stop"
    assert completion.usage.input_tokens > 0 and completion.usage.output_tokens > 0


async def test_empty_answer_streams_no_deltas(rig: ProviderRig) -> None:
    rig.reply("")

    deltas, completion = await collect(rig.provider, ask("say nothing"))

    assert (deltas, completion.text) == ([], "")


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "complete"])
async def test_tool_calls_come_parsed_without_text(rig: ProviderRig, streamed: bool) -> None:
    rig.call_tools([("read_file", ARGS), ("list_dir", {})])

    request = ask("read it", tools=(READ_FILE,))
    if streamed:
        deltas, completion = await collect(rig.provider, request)
        assert deltas == []
    else:
        completion = await rig.provider.complete(request)

    assert completion.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [
        ("read_file", ARGS),
        ("list_dir", {}),
    ]
    ids = [c.id for c in completion.tool_calls]
    assert all(ids) and len(set(ids)) == 2, ids


async def test_tool_results_can_be_sent_back(rig: ProviderRig) -> None:
    rig.call_tools([("read_file", {"path": "a.md"})])
    _, first = await collect(rig.provider, ask("read a.md", tools=(READ_FILE,)))
    [call] = first.tool_calls
    rig.reply("It has 42 lines.")

    follow_up = ChatRequest(
        system="You are terse.",
        messages=(
            ChatMessage(role="user", content="read a.md"),
            ChatMessage(role="assistant", content="Looking.", tool_calls=(call,)),
            ChatMessage(role="tool", content="42 lines", tool_call_id=call.id, name="read_file"),
        ),
        tools=(READ_FILE,),
    )
    _, final = await collect(rig.provider, follow_up)

    assert (final.text, final.tool_calls) == ("It has 42 lines.", ())
    assert rig.calls == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, ProviderRejected), (401, ProviderRejected), (429, ProviderRateLimited),
     (503, ProviderUnavailable)],
)  # fmt: skip
@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "complete"])
async def test_an_error_status_raises_its_provider_error(
    rig: ProviderRig, status: int, error: type[ProviderError], streamed: bool
) -> None:
    rig.fail(status)

    with pytest.raises(ProviderError) as caught:
        if streamed:
            await collect(rig.provider, ask("hi"))
        else:
            await rig.provider.complete(ask("hi"))

    assert type(caught.value) is error
    assert caught.value.status == status
    assert rig.calls == 1  # no retries were configured


async def test_the_provider_answers_again_after_an_error(rig: ProviderRig) -> None:
    rig.fail(503)
    with pytest.raises(ProviderUnavailable):
        await rig.provider.complete(ask("hi"))
    rig.reply("back")

    _, completion = await collect(rig.provider, ask("hi again"))

    assert completion.text == "back"


async def test_a_stream_abandoned_midway_leaves_the_provider_usable(rig: ProviderRig) -> None:
    rig.reply("a long answer that nobody reads to the end")
    async with aclosing(rig.provider.stream(ask("hi"))) as events:  # type: ignore[type-var]
        first = await anext(events)
    assert isinstance(first, TextDelta) and first.text
    rig.reply("next")

    assert (await rig.provider.complete(ask("again"))).text == "next"
