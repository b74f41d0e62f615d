"""@tool: schema from type hints and docstring, hidden ctx, validation, results."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from core.errors import ToolFailed, ToolRetry
from core.tools import FunctionTool, Tool, ToolContext, tool
from core.tools.base import ToolDeps
from core.tools.decorator import Dep


class Point(BaseModel):
    x: int
    y: int


@tool
async def search(
    ctx: ToolContext, query: str, limit: int = 5, mode: Literal["fast", "exact"] = "fast"
) -> str:
    """Search the notes for a phrase.

    Longer explanation that is not part of the description.

    Args:
        query: the phrase to look for,
            possibly quoted.
        limit (int): how many hits to return.

    Returns:
        The hits.
    """
    return f"{ctx.session_key}:{query}:{limit}:{mode}"


@tool(name="where")
async def locate(point: Point, schema: str | None = None) -> dict[str, Any]:
    """Echo a point back."""
    return {"x": point.x, "y": point.y, "schema": schema}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key="cli:test")


def test_is_a_tool() -> None:
    assert isinstance(search, FunctionTool)
    assert isinstance(search, Tool)
    assert search.name == "search"
    assert locate.name == "where"


def test_description_is_first_paragraph() -> None:
    assert search.description == "Search the notes for a phrase."


def test_schema_from_hints_and_docstring() -> None:
    schema = search.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert list(props) == ["query", "limit", "mode"]
    assert props["query"] == {
        "type": "string",
        "description": "the phrase to look for, possibly quoted.",
    }
    assert props["limit"] == {
        "type": "integer",
        "default": 5,
        "description": "how many hits to return.",
    }
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert "title" not in schema


def test_ctx_is_hidden_from_the_model() -> None:
    assert "ctx" not in search.parameters["properties"]
    assert "ctx" not in search.parameters.get("required", [])


async def test_ctx_injected_and_arguments_coerced(ctx: ToolContext) -> None:
    assert await search.run(ctx, {"query": "tea", "limit": "3"}) == "cli:test:tea:3:fast"


async def test_non_string_result_is_json(ctx: ToolContext) -> None:
    out = await locate.run(ctx, {"point": {"x": 1, "y": 2}})
    assert out == '{"x":1,"y":2,"schema":null}'


async def test_argument_named_like_a_model_attribute(ctx: ToolContext) -> None:
    assert "schema" in locate.parameters["properties"]
    out = await locate.run(ctx, {"point": {"x": 1, "y": 2}, "schema": "s"})
    assert '"schema":"s"' in out


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        ({}, ["query: Field required"]),
        ({"query": "x", "limit": "many"}, ["limit:", "integer"]),
        ({"query": "x", "mode": "slow"}, ["mode:", "'fast' or 'exact'"]),
        ({"query": "x", "colour": "red"}, ["colour: Extra inputs are not permitted"]),
    ],
)
async def test_bad_arguments_raise_tool_retry(
    ctx: ToolContext, arguments: dict[str, Any], fragments: list[str]
) -> None:
    with pytest.raises(ToolRetry) as info:
        await search.run(ctx, arguments)
    message = str(info.value)
    assert message.startswith("invalid arguments for search:")
    for fragment in fragments:
        assert fragment in message


async def test_nested_field_error_names_the_path(ctx: ToolContext) -> None:
    with pytest.raises(ToolRetry, match=r"point\.y: Field required"):
        await locate.run(ctx, {"point": {"x": 1}})


async def test_description_override() -> None:
    @tool(description="Custom.")
    async def f(a: int) -> str:
        """Docstring."""
        return str(a)

    assert f.description == "Custom."


def test_sync_function_is_refused() -> None:
    def sync(a: int) -> str:
        return str(a)

    with pytest.raises(TypeError, match="async"):
        tool(sync)  # type: ignore[arg-type]


def test_ctx_must_come_first() -> None:
    async def late(a: int, ctx: ToolContext) -> str:
        return ""

    with pytest.raises(TypeError, match="must come first"):
        tool(late)


def test_var_args_are_refused() -> None:
    async def star(*items: str) -> str:
        return ""

    with pytest.raises(TypeError, match="unsupported parameter"):
        tool(star)


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start


class SubCounter(Counter):
    pass


@tool
async def bump(ctx: ToolContext, counter: Dep[Counter], by: int = 1) -> str:
    """Add to the counter.

    Args:
        by: how much to add.
    """
    counter.value += by
    return str(counter.value)


def test_injected_dependencies_are_hidden_from_the_model() -> None:
    assert set(bump.parameters["properties"]) == {"by"}


async def test_injected_dependency_is_found_by_type_or_subtype(tmp_path: Path) -> None:
    counter = SubCounter(40)
    ctx = ToolContext(workspace=tmp_path, session_key="cli:t", deps=ToolDeps(counter))
    assert await bump.run(ctx, {"by": 2}) == "42"
    assert counter.value == 42
    with pytest.raises(ToolRetry, match="counter"):
        await bump.run(ctx, {"counter": 1})


async def test_missing_dependency_is_a_tool_failure_the_model_sees(ctx: ToolContext) -> None:
    with pytest.raises(ToolFailed, match="bump is not available here"):
        await bump.run(ctx, {})
