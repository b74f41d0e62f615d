"""Sampling: an MCP server asks familiar's model (``sampling/createMessage``).

Off by default: only a server with ``[mcp.servers.<name>] sampling = true`` is told
familiar can sample (the capability) and answered; any other is refused with an error
saying how to allow it. ``maxTokens`` is lowered to ``mcp.sampling_max_tokens``. Each
request, answered or refused, is an ``mcp.sampling`` event of the session that made the
call, with the tokens it cost; a request outside any call (or for a task that is not
ours) has no such session and is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import mcp_types

from core.errors import ProviderError
from core.event_data import McpSampling
from core.events import Event, EventLog
from core.providers.base import ChatMessage, ChatRequest, Provider

from .config import McpServerConfig
from .host import CallOwner

__all__ = ["SamplingService"]

log = logging.getLogger(__name__)


def _text(content: object) -> str:
    blocks = content if isinstance(content, list) else [content]
    parts = []
    for block in blocks:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} omitted]")
    return "\n".join(parts)


class SamplingService:
    """Answers servers' sampling requests with the configured model, where allowed.

    Args:
        provider: the model (None: refused, there is none).
        events: the session event log.
        servers: a server's definition by name (None: unknown).
        max_tokens: the cap on ``maxTokens`` (``mcp.sampling_max_tokens``).
        model: the model name answers report.
    """

    def __init__(
        self,
        *,
        provider: Provider | None,
        events: EventLog,
        servers: Callable[[str], McpServerConfig | None],
        max_tokens: int,
        model: str | None = None,
    ) -> None:
        self._provider = provider
        self._events = events
        self._servers = servers
        self._max_tokens = max_tokens
        self._model = model

    async def sample(
        self, server: str, owner: CallOwner | None, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        """Ask the model, or refuse; record the request on the owner's session."""
        limit = min(params.max_tokens, self._max_tokens)
        config = self._servers(server)
        refused = None
        if config is None or not config.sampling:
            refused = (
                f"familiar does not let MCP server {server!r} use its model "
                f"(allow it with [mcp.servers.{server}] sampling = true)"
            )
        elif owner is None:
            # No call or task of ours: no session to record the request and its cost in.
            refused = f"{server!r} asked outside any conversation"
        elif self._provider is None:
            refused = "familiar has no model configured"
        if refused is not None:
            log.info("mcp sampling refused server=%s: %s", server, refused)
            await self._record(owner, server, params, limit, refused=refused)
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=refused)
        assert self._provider is not None
        messages = tuple(
            ChatMessage(role=m.role, content=_text(m.content)) for m in params.messages
        )
        request = ChatRequest(
            system=params.system_prompt or "",
            messages=messages,
            max_tokens=limit,
            temperature=params.temperature,
        )
        try:
            completion = await self._provider.complete(request)
        except ProviderError as exc:
            await self._record(owner, server, params, limit, refused=f"model failed: {exc}")
            return mcp_types.ErrorData(
                code=mcp_types.INTERNAL_ERROR, message=f"model failed: {exc}"
            )
        usage = completion.usage
        await self._record(
            owner, server, params, limit, tokens=(usage.input_tokens, usage.output_tokens)
        )
        log.info(
            "mcp sampling answered server=%s input_tokens=%d output_tokens=%d",
            server,
            usage.input_tokens,
            usage.output_tokens,
        )
        stop = "maxTokens" if completion.finish_reason == "length" else "endTurn"
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=completion.text),
            model=self._model or self._provider.name,
            stop_reason=stop,
        )

    async def _record(
        self,
        owner: CallOwner | None,
        server: str,
        params: mcp_types.CreateMessageRequestParams,
        limit: int,
        *,
        refused: str | None = None,
        tokens: tuple[int, int] = (0, 0),
    ) -> None:
        if owner is None:
            return
        data = McpSampling(
            server=server,
            messages=len(params.messages),
            max_tokens=limit,
            model=None if refused else self._model,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            refused=refused,
        )
        await self._events.append(
            Event(session_key=owner.session_key, message_id=owner.message_id, data=data)
        )
