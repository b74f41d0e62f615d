"""AnthropicProvider: the Anthropic Messages API, streamed with named SSE events."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from core.errors import ConfigError
from core.providers.base import (
    ChatMessage,
    ChatRequest,
    Completion,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from core.providers.config import DEFAULT_BASE_URLS, ProviderConfig
from core.providers.http import HttpProvider
from core.providers.retry import (
    StatusFailure,
    parse_json,
    raise_for_status,
)
from core.providers.sse import sse_events

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicProvider"]

logger = logging.getLogger(__name__)

_STREAM_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires ``max_tokens``; used when neither config nor request sets it."""

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}
"""Anthropic stop reasons, in the OpenAI vocabulary every provider reports."""

_ERROR_STATUSES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""In-stream ``error`` event types mapped to the HTTP status Anthropic uses for them."""


class AnthropicProvider(HttpProvider):
    """Anthropic's Messages API (``POST {base_url}/v1/messages``), streamed over SSE."""

    name = "anthropic"

    def __init__(self, *, config: ProviderConfig) -> None:
        """Create the provider.

        Args:
            config: endpoint, key, model, timeouts and retry settings.

        Raises:
            ConfigError: no model could be determined.
        """
        base_url = config.effective_base_url or DEFAULT_BASE_URLS["anthropic"]
        model = config.effective_model
        if model is None:
            raise ConfigError("provider.model is required", key="provider.model")
        key = config.api_key
        super().__init__(
            config=config,
            base_url=base_url,
            model=model,
            path="/v1/messages",
            headers={
                "anthropic-version": ANTHROPIC_VERSION,
                **({"x-api-key": key.get_secret_value()} if key else {}),
            },
            tool_json=_tool_json,
        )

    async def _stream_once(
        self, request: ChatRequest, deadline: float
    ) -> AsyncGenerator[StreamEvent, None]:
        state = _StreamState()
        body = self._body(request, stream=True)
        async with self._post(body, deadline=deadline, headers=_STREAM_HEADERS) as response:
            await raise_for_status(response)
            if response.content_type != "text/event-stream":
                raise StatusFailure(
                    status=502,
                    detail=f"expected an event stream, got {response.content_type!r}",
                )
            async with aclosing(sse_events(response.content.iter_any())) as events:
                async for event in events:
                    if event.event == "ping" or not event.data:
                        continue
                    text = state.feed(event.event, parse_json(event.data))
                    if text:
                        yield TextDelta(text=text)
                    if state.done:
                        break
        yield state.completion()

    def _final(self, body: Any) -> Completion:
        return _parse_message(body)

    def _payload(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The body without its tools (:meth:`_body` splices in their cached JSON)."""
        system, messages = _to_anthropic_messages(request)
        body: dict[str, Any] = {
            "model": request.model or self._model,
            "max_tokens": request.max_tokens or self._config.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
        }
        if system:
            body["system"] = system
        temperature = (
            request.temperature if request.temperature is not None else self._config.temperature
        )
        if temperature is not None:
            # Anthropic's range is 0..1, OpenAI's (and our config's) 0..2.
            body["temperature"] = min(temperature, 1.0)
        if stream:
            body["stream"] = True
        return body


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
            }
        ]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def _to_anthropic_messages(request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """Our OpenAI-like list as Anthropic wants it: system apart, roles alternating.

    Tool results become user-role ``tool_result`` blocks, and consecutive messages of
    one role (several tool results, a result then a user note) merge into one message.
    """
    system_parts = [request.system] if request.system else []
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            system_parts.append(message.content)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message) or [{"type": "text", "text": "(empty)"}]
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    for merged in messages:
        # Anthropic wants tool results before any other block of a user message.
        merged["content"].sort(key=lambda block: block["type"] != "tool_result")
    return "\n\n".join(system_parts), messages


def _parse_input(raw: str, name: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        logger.warning("model sent non-object input for tool %s: %.200r", name, raw)
        return {}
    return parsed


def _status_failure(error: Any) -> StatusFailure:
    error = error if isinstance(error, dict) else {}
    kind = str(error.get("type") or "api_error")
    message = str(error.get("message") or kind)
    return StatusFailure(status=_ERROR_STATUSES.get(kind, 500), detail=message)


def _parse_message(body: Any) -> Completion:
    if not isinstance(body, dict):
        raise StatusFailure(status=502, detail="response is not a JSON object")
    if body.get("type") == "error":
        raise _status_failure(body.get("error"))
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in body.get("content") or []:
        if block.get("type") == "text":
            texts.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(
                ToolCall(id=block["id"], name=block["name"], arguments=block.get("input") or {})
            )
    usage = body.get("usage") or {}
    return Completion(
        text="".join(texts),
        tool_calls=tuple(calls),
        finish_reason=_STOP_REASONS.get(body.get("stop_reason") or "", body.get("stop_reason")),
        usage=Usage(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
        ),
    )


class _StreamState:
    """Accumulates Messages API stream events into the final :class:`Completion`."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.tools: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.done = False

    def feed(self, event: str, data: Any) -> str:
        """Take one event; return the text it adds (maybe empty)."""
        if not isinstance(data, dict):
            raise StatusFailure(status=502, detail=f"{event} event is not a JSON object")
        if event == "error":
            raise _status_failure(data.get("error"))
        if event == "message_start":
            self._count((data.get("message") or {}).get("usage"))
        elif event == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                self.tools[int(data.get("index", 0))] = {
                    "id": block.get("id", ""),
                    "name": block.get("name", ""),
                    "json": [],
                }
        elif event == "content_block_delta":
            return self._delta(int(data.get("index", 0)), data.get("delta") or {})
        elif event == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
            self._count(data.get("usage"))
        elif event == "message_stop":
            self.done = True
        return ""

    def _delta(self, index: int, delta: dict[str, Any]) -> str:
        if delta.get("type") == "text_delta":
            text = str(delta.get("text") or "")
            self.text.append(text)
            return text
        if delta.get("type") == "input_json_delta" and index in self.tools:
            self.tools[index]["json"].append(str(delta.get("partial_json") or ""))
        return ""

    def _count(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.input_tokens = int(usage.get("input_tokens") or self.input_tokens)
            self.output_tokens = int(usage.get("output_tokens") or self.output_tokens)

    def completion(self) -> Completion:
        calls = tuple(
            ToolCall(
                id=tool["id"],
                name=tool["name"],
                arguments=_parse_input("".join(tool["json"]), tool["name"]),
            )
            for _, tool in sorted(self.tools.items())
        )
        reason = self.stop_reason or ""
        return Completion(
            text="".join(self.text),
            tool_calls=calls,
            finish_reason=_STOP_REASONS.get(reason, self.stop_reason),
            usage=Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens),
        )
