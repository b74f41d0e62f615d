"""McpTool: one tool of an MCP server, offered to the model as ``mcp__<server>__<tool>``."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Literal

import mcp_types

from core.bus.ephemeral import EphemeralHub
from core.errors import ToolFailed
from core.messages import InboundMessage, Progress
from core.tools.base import ToolContext

from .connection import McpConnection, ProgressFn
from .host import CallOwner

__all__ = ["McpTool", "call_owner", "progress_text", "render_result", "tool_name"]

TaskSupport = Literal["forbidden", "optional", "required"]

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


def call_owner(ctx: ToolContext) -> CallOwner:
    """Whose conversation a call made from ``ctx`` belongs to."""
    message = ctx.message
    return CallOwner(
        session_key=ctx.session_key,
        root_key=ctx.root_session_key,
        delivery=message.delivery if message is not None and ctx.lineage is None else None,
        message_id=message.id if message is not None else None,
    )


class McpTool:
    """A tool of an MCP server, run through its `McpConnection`.

    Its parameters are the server's input schema, passed through unchanged (the server
    validates the arguments and answers bad ones with an error result). A tool whose
    ``execution.taskSupport`` is ``required`` (or ``optional``, on a server with
    ``tasks = "optional"``) is called as a task, through the connection's `McpHost`.
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
        execution = tool.execution
        self.task_support: TaskSupport = (
            execution.task_support if execution and execution.task_support else "forbidden"
        )

    @property
    def as_task(self) -> bool:
        """Whether calls of this tool are task-augmented (run as ``mcp-task`` records)."""
        wanted = self.connection.config.tasks
        return self.task_support == "required" or (
            self.task_support == "optional" and wanted == "optional"
        )

    def render(self, result: mcp_types.CallToolResult) -> str:
        """The model's text of a result (capped at ``max_output``)."""
        return render_result(result, limit=self._max_output)

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> str:
        """Call the remote tool; an ``is_error`` result raises `ToolFailed` with its text.

        The call asks for progress notifications; each becomes a progress note of the
        turn (what ``familiar chat``, Slack and Teams show while a reply is made).
        """
        if self.as_task:
            host = self.connection.host
            if host is None:
                raise ToolFailed(f"{self.name} runs as an MCP task, which is not available here")
            return await host.call_as_task(ctx, self, arguments)
        hub = ctx.deps.get(EphemeralHub)
        progress = _reporter(hub, ctx.message, self.name) if hub and ctx.message else None
        result = await self.connection.call(
            self.remote_name, arguments, progress=progress, owner=call_owner(ctx)
        )
        text = render_result(result, limit=self._max_output)
        if result.is_error:
            raise ToolFailed(text or f"{self.name} failed")
        return text
