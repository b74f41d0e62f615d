"""McpTool: one tool of an MCP server, offered to the model as ``mcp__<server>__<tool>``."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import mcp_types

from core.bus.ephemeral import EphemeralHub
from core.errors import ToolFailed
from core.messages import InboundMessage, Progress
from core.tools.base import ToolContext

from .connection import McpConnection, ProgressFn

__all__ = ["McpTool", "progress_text", "render_result", "tool_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
"""OpenAI and Anthropic refuse longer function names."""
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def tool_name(server: str, tool: str) -> str:
    """The public name of ``tool`` of ``server``: ``mcp__<server>__<tool>``.

    Characters model APIs refuse in function names become ``_``; the name is cut at
    64 characters.
    """
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:_MAX_NAME]


def _decoded_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _block_text(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        size = _decoded_size(block.data)
        return f"[{block.type}: {block.mime_type}, {size if size is not None else '?'} bytes]"
    if isinstance(block, mcp_types.ResourceLink):
        what = f" — {block.description}" if block.description else ""
        return f"[resource link: {block.name} <{block.uri}>{what}]"
    resource = block.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return f"[resource <{resource.uri}>]\n{resource.text}"
    return f"[resource <{resource.uri}>: {resource.mime_type or 'binary'}]"


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[-(limit // 2) :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} chars truncated ...]\n{tail}"


def render_result(result: mcp_types.CallToolResult, *, limit: int) -> str:
    """The text the model sees for ``result``: its content blocks (images and other
    binary content described), or its structured content as JSON when there is no
    text; capped at ``limit`` characters (head and tail kept)."""
    parts = [_block_text(b) for b in result.content]
    text = "\n".join(p for p in parts if p)
    if not text.strip() and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return _capped(text, limit)


def progress_text(tool: str, progress: float, total: float | None, message: str | None) -> str:
    """A progress notification as the turn's progress note: ``tool: message (3/10)``."""
    count = f"{progress:g}/{total:g}" if total else f"{progress:g}"
    return (
        f"{tool}: {message.strip()} ({count})"
        if message and message.strip()
        else f"{tool}: {count}"
    )


def _reporter(hub: EphemeralHub, inbound: InboundMessage, tool: str) -> ProgressFn:
    async def report(progress: float, total: float | None, message: str | None) -> None:
        if hub.has_subscribers(inbound.id):  # asked each time: a sender may attach later
            text = progress_text(tool, progress, total, message)
            hub.emit(
                Progress(
                    inbound_id=inbound.id,
                    session_key=inbound.session_key,
                    delivery=inbound.delivery,
                    text=text,
                )
            )

    return report


class McpTool:
    """A tool of an MCP server, run through its `McpConnection`.

    Its parameters are the server's input schema, passed through unchanged (the server
    validates the arguments and answers bad ones with an error result).
    """

    def __init__(self, *, connection: McpConnection, tool: mcp_types.Tool, max_output: int) -> None:
        self.connection = connection
        self.remote_name = tool.name
        self.name = tool_name(connection.name, tool.name)
        summary = tool.description or tool.title or tool.name
        self.description = f"{summary} (MCP server {connection.name})"
        schema = dict(tool.input_schema) if tool.input_schema else dict(_EMPTY_SCHEMA)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.parameters: dict[str, Any] = schema
        self._max_output = max_output

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> str:
        """Call the remote tool; an ``is_error`` result raises `ToolFailed` with its text.

        The call asks for progress notifications; each becomes a progress note of the
        turn (what ``familiar chat``, Slack and Teams show while a reply is made).
        """
        hub = ctx.deps.get(EphemeralHub)
        progress = _reporter(hub, ctx.message, self.name) if hub and ctx.message else None
        result = await self.connection.call(self.remote_name, arguments, progress=progress)
        text = render_result(result, limit=self._max_output)
        if result.is_error:
            raise ToolFailed(text or f"{self.name} failed")
        return text
