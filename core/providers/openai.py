"""OpenAIProvider: the Chat Completions API (OpenAI, Ollama, vLLM, llama.cpp, OpenRouter)."""

from __future__ import annotations

import json
import logging
import uuid
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
    display_url,
    parse_json,
    raise_for_status,
)
from core.providers.sse import sse_lines

__all__ = ["OpenAIProvider"]

logger = logging.getLogger(__name__)

_STREAM_HEADERS = {"Accept": "text/event-stream"}
_NO_USAGE = Usage()


class OpenAIProvider(HttpProvider):
    """An OpenAI-compatible Chat Completions endpoint, streamed over SSE.

    Needs nothing vendor-specific: any server that speaks ``POST {base_url}/chat/completions``
    works. Retries, timeouts and error mapping follow :class:`RetryPolicy`.
    """

    name = "openai"

    def __init__(self, *, config: ProviderConfig) -> None:
        """Create the provider.

        Args:
            config: endpoint, key, model, timeouts and retry settings.

        Raises:
            ConfigError: no model is configured for a self-hosted endpoint.
        """
        base_url = config.effective_base_url or DEFAULT_BASE_URLS["openai"]
        model = config.effective_model
        if model is None:
            raise ConfigError(
                "provider.model is required for the OpenAI-compatible server at "
                f"{display_url(base_url)} "
                "(e.g. the model name shown by `ollama list`)",
                key="provider.model",
            )
        key = config.api_key
        super().__init__(
            config=config,
            base_url=base_url,
            model=model,
            path="/chat/completions",
            headers={
                "Accept": "application/json",
                **({"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}),
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
            async with aclosing(sse_lines(response.content.iter_any())) as lines:
                async for line in lines:
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        break
                    if data:
                        for text in state.feed(parse_json(data)):
                            yield TextDelta(text=text)
        yield state.completion()

    def _final(self, body: Any) -> Completion:
        return _parse_completion(body)

    def _payload(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The body without its tools (:meth:`_body` splices in their cached JSON)."""
        body: dict[str, Any] = {
            "model": request.model or self._model,
            "messages": _to_openai_messages(request),
        }
        max_tokens = request.max_tokens or self._config.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        temperature = (
            request.temperature if request.temperature is not None else self._config.temperature
        )
        if temperature is not None:
            body["temperature"] = temperature
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _to_openai_messages(request: ChatRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend(_to_openai_message(message) for message in request.messages)
    return messages


def _to_openai_message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _parse_arguments(raw: Any, name: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        # The tool's validation then tells the model its arguments were missing.
        logger.warning("model sent non-object arguments for tool %s: %.200r", name, raw)
        return {}
    return parsed


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
    )


def _raise_stream_error(error: Any) -> None:
    """OpenRouter and some proxies report failures as a JSON ``error`` chunk."""
    if isinstance(error, dict):
        code = error.get("code")
        status = code if isinstance(code, int) and 400 <= code < 600 else 502
        raise StatusFailure(status=status, detail=str(error.get("message") or error)[:300])
    raise StatusFailure(status=502, detail=str(error)[:300])


def _parse_completion(body: Any) -> Completion:
    if not isinstance(body, dict):
        raise StatusFailure(status=502, detail="response is not a JSON object")
    if body.get("error"):
        _raise_stream_error(body["error"])
    choices = body.get("choices") or [{}]
    choice = choices[0]
    message = choice.get("message") or {}
    calls = []
    for raw in message.get("tool_calls") or []:
        call = _PartialCall()
        call.feed(raw)
        calls.append(call.build())
    return Completion(
        text=message.get("content") or "",
        tool_calls=tuple(calls),
        finish_reason=choice.get("finish_reason"),
        usage=_usage(body.get("usage")) or _NO_USAGE,
    )


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class _PartialCall:
    """A tool call being assembled from streamed fragments."""

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []

    def feed(self, fragment: dict[str, Any]) -> None:
        if fragment.get("id") and not self.id:
            self.id = fragment["id"]
        function = fragment.get("function") or {}
        if function.get("name") and not self.name:
            self.name = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            self.arguments = [json.dumps(arguments)]
        elif arguments:
            self.arguments.append(arguments)

    def build(self) -> ToolCall:
        return ToolCall(
            id=self.id or _new_call_id(),
            name=self.name,
            arguments=_parse_arguments("".join(self.arguments), self.name),
        )


class _StreamState:
    """Accumulates streamed chunks into the final :class:`Completion`."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish_reason: str | None = None
        self.usage = _NO_USAGE

    def feed(self, chunk: Any) -> list[str]:
        """Take one chunk; return the text it adds."""
        if not isinstance(chunk, dict):
            raise StatusFailure(status=502, detail="stream chunk is not a JSON object")
        if chunk.get("error"):
            _raise_stream_error(chunk["error"])
        self.usage = _usage(chunk.get("usage")) or self.usage
        texts: list[str] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                texts.append(delta["content"])
            for fragment in delta.get("tool_calls") or []:
                self._feed_call(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        self.text.extend(texts)
        return texts

    def _feed_call(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if not isinstance(index, int):
            # Servers that send whole calls without an index: a new id starts a new call.
            index = len(self.calls) if fragment.get("id") or not self.calls else len(self.calls) - 1
        self.calls.setdefault(index, _PartialCall()).feed(fragment)

    def completion(self) -> Completion:
        return Completion(
            text="".join(self.text),
            tool_calls=tuple(self.calls[i].build() for i in sorted(self.calls)),
            finish_reason=self.finish_reason,
            usage=self.usage,
        )
