"""Request bodies: the tool specs' cached JSON spliced in equals encoding the whole body."""

from __future__ import annotations

import json
from typing import Any

from core.providers.base import ToolSpec
from core.providers.body import ToolsJson, encode_body
from core.tools.decorator import tool
from core.tools.registry import ToolRegistry

READ = ToolSpec(
    name="read_file",
    description="Read a file — «quoted» ✓",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "default": 3}},
        "required": ["path"],
    },
)
EXEC = ToolSpec(
    name="exec",
    description='Run "a" command\n(with newlines)',
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)
PAYLOAD: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "system", "content": 'Sei breve. 日本語 \u2028 \\ "q"'},
        {"role": "user", "content": "hi"},
    ],
    "temperature": 0.2,
    "stream": True,
}


def openai_shape(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def test_spliced_tools_equal_encoding_the_whole_payload() -> None:
    tools = ToolsJson(openai_shape)
    specs = (READ, EXEC)
    before = json.dumps({**PAYLOAD, "tools": [openai_shape(s) for s in specs]})

    first = encode_body(PAYLOAD, tools=tools.encode(specs))
    cached = encode_body(PAYLOAD, tools=tools.encode(specs))

    assert json.loads(first) == json.loads(before)
    assert cached == first
    assert json.loads(encode_body(PAYLOAD)) == PAYLOAD
    assert json.loads(encode_body(PAYLOAD, tools=tools.encode(()))) == {**PAYLOAD, "tools": []}


def test_a_new_spec_is_encoded_afresh_and_order_is_kept() -> None:
    tools = ToolsJson(openai_shape)
    tools.encode((READ, EXEC))
    changed = ToolSpec(name="read_file", description="other", parameters={"type": "object"})

    encoded = json.loads(tools.encode((EXEC, changed)))

    assert encoded == [openai_shape(EXEC), openai_shape(changed)]


def test_the_cache_is_bounded_and_still_right_when_cleared() -> None:
    tools = ToolsJson(openai_shape, limit=2)
    specs = [
        ToolSpec(name=f"t{i}", description="d", parameters={"type": "object", "i": i})
        for i in range(5)
    ]

    for spec in specs:
        assert json.loads(tools.encode((spec,))) == [openai_shape(spec)]
    assert json.loads(tools.encode(specs)) == [openai_shape(s) for s in specs]


@tool
async def ping(host: str) -> str:
    """Ping a host."""
    return host


def test_the_registry_hands_out_one_spec_per_tool() -> None:
    registry = ToolRegistry(tools=[ping])

    [first] = registry.specs()
    [again] = registry.specs(["pi*"])

    assert again is first
    assert (first.name, first.description, first.parameters) == (
        ping.name,
        ping.description,
        ping.parameters,
    )
    registry.unregister("ping")
    assert registry.specs() == []
