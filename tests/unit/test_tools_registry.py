"""ToolRegistry: specs, and execute turning every tool problem into an error result."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from core.errors import ConfigError, ToolFailed, ToolRetry, TurnCancelled
from core.providers.base import ToolCall
from core.tools import (
    PolicyRule,
    ToolContext,
    ToolPolicy,
    ToolPolicyConfig,
    ToolRegistry,
    ToolResult,
    tool,
)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first.
        b: second.
    """
    return a + b


@tool
async def whoami(ctx: ToolContext) -> str:
    """Say which session this is."""
    return ctx.session_key


@tool
async def picky(value: str) -> str:
    """Fail the way tools fail."""
    if value == "retry":
        raise ToolRetry("value must be shorter")
    if value == "fail":
        raise ToolFailed("the disk is full")
    if value == "stop":
        raise TurnCancelled("stopped")
    raise RuntimeError("kaboom")


HANGING: dict[str, asyncio.Event] = {}
"""``hang`` sets ``HANGING["started"]`` (if a test put one there) once it runs."""


@tool
async def hang() -> str:
    """Never finish."""
    if started := HANGING.get("started"):
        started.set()
    await asyncio.Event().wait()
    return ""


class RawTool:
    """A Tool written by hand, without the decorator."""

    name = "raw"
    description = "Echo the arguments."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> str:
        return repr(sorted(arguments))


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key="cli:test", channel="cli")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(tools=[whoami, add, picky, hang, RawTool()])


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="call-1", name=name, arguments=arguments)


def test_names_and_lookup(registry: ToolRegistry) -> None:
    assert registry.names() == ["add", "hang", "picky", "raw", "whoami"]
    assert registry.get("add") is add
    assert registry.get("nope") is None
    assert "raw" in registry
    assert len(registry) == 5


def test_duplicate_name_is_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ConfigError, match="duplicate tool name 'add'"):
        registry.register(add)


def test_unregister(registry: ToolRegistry) -> None:
    registry.unregister("add")
    registry.unregister("add")
    assert "add" not in registry


def test_specs_sorted_and_filtered(registry: ToolRegistry) -> None:
    specs = registry.specs()
    assert [s.name for s in specs] == registry.names()
    add_spec = specs[0]
    assert add_spec.description == "Add two integers."
    assert add_spec.parameters["properties"]["a"]["description"] == "first."
    assert [s.name for s in registry.specs(["whoami", "a*", "missing"])] == ["add", "whoami"]


def test_specs_apply_the_policy_for_the_caller(ctx: ToolContext) -> None:
    policy = ToolPolicy(config=ToolPolicyConfig(per_channel={"slack": PolicyRule(deny=["add"])}))
    reg = ToolRegistry(tools=[add, whoami], policy=policy)
    slack = ToolContext(workspace=ctx.workspace, session_key="slack:T:C", channel="slack")
    assert [s.name for s in reg.specs(ctx=ctx)] == ["add", "whoami"]
    assert [s.name for s in reg.specs(ctx=slack)] == ["whoami"]


async def test_success(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("add", a=2, b=3), ctx)
    assert result == ToolResult(call_id="call-1", name="add", content="5", is_error=False)
    assert (await registry.execute(call("whoami"), ctx)).content == "cli:test"


async def test_unknown_tool(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("delete_everything"), ctx)
    assert result.is_error
    assert "unknown tool 'delete_everything'" in result.content
    assert "add" in result.content


async def test_bad_arguments_name_the_field(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("add", a=1, b="two"), ctx)
    assert result.is_error
    assert "b:" in result.content
    assert "add" in result.content


async def test_tool_retry_and_failed(registry: ToolRegistry, ctx: ToolContext) -> None:
    retry = await registry.execute(call("picky", value="retry"), ctx)
    assert retry.is_error
    assert "value must be shorter" in retry.content
    assert "call picky again" in retry.content
    failed = await registry.execute(call("picky", value="fail"), ctx)
    assert failed.is_error
    assert failed.content == "error: the disk is full"


async def test_unexpected_exception_is_logged(
    registry: ToolRegistry, ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="core.tools.registry"):
        result = await registry.execute(call("picky", value="boom"), ctx)
    assert result.is_error
    assert "RuntimeError: kaboom" in result.content
    [record] = caplog.records
    assert record.exc_info is not None
    assert "picky" in record.getMessage()


async def test_turn_cancelled_propagates(registry: ToolRegistry, ctx: ToolContext) -> None:
    with pytest.raises(TurnCancelled):
        await registry.execute(call("picky", value="stop"), ctx)


async def test_cancelled_error_propagates(registry: ToolRegistry, ctx: ToolContext) -> None:
    HANGING["started"] = started = asyncio.Event()
    task = asyncio.create_task(registry.execute(call("hang"), ctx))
    async with asyncio.timeout(5):
        await started.wait()  # cancel the tool itself, not a task that never began
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_policy_denied_is_an_error_result(ctx: ToolContext) -> None:
    policy = ToolPolicy(config=ToolPolicyConfig(deny=["add"]))
    reg = ToolRegistry(tools=[add], policy=policy)
    result = await reg.execute(call("add", a=1, b=2), ctx)
    assert result.is_error
    assert "not allowed" in result.content
    assert "'add'" in result.content


async def test_hand_written_tool(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(call("raw", z=1, a=2), ctx)
    assert result.content == "['a', 'z']"


def test_a_tool_builds_its_argument_model_only_when_first_offered() -> None:
    @tool
    async def scale(x: float, by: float = 2.0) -> float:
        """Scale a number."""
        return x * by

    registry = ToolRegistry(tools=[scale])
    # The processes that build the tools but never run a turn (channels, scheduler)
    # never pay for pydantic's model and schema.
    assert "_model" not in vars(scale) and "parameters" not in vars(scale)
    [spec] = registry.specs()
    assert spec.parameters["required"] == ["x"] and "_model" in vars(scale)
    assert registry.specs()[0] is spec  # made once: providers cache its JSON by identity
