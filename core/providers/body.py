"""Request bodies as JSON bytes, with the tool specs' encoding cached."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from core.providers.base import ToolSpec

__all__ = ["ToolsJson", "encode_body"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_body(body: dict[str, Any], *, tools: str | None = None) -> bytes:
    """``body`` as compact UTF-8 JSON, with ``tools`` (a JSON array) spliced in if given."""
    text = _ENCODER.encode(body)
    if tools is not None:
        # body is a non-empty object: replace its closing brace with one more member.
        text = f'{text[:-1]},"tools":{tools}}}'
    return text.encode()


class ToolsJson:
    """The JSON array of a request's tool specs, in one provider's shape.

    The tools' schemas are the costliest part of a request body and the same on every
    call, so each spec's encoding is kept, keyed by the spec object: the registry hands
    out the same :class:`ToolSpec` for a tool on every call (specs are frozen). The
    cache holds the spec too, so its id cannot be reused while the entry lives.
    """

    def __init__(self, shape: Callable[[ToolSpec], dict[str, Any]], *, limit: int = 1024) -> None:
        self._shape = shape
        self._limit = limit
        self._cache: dict[int, tuple[ToolSpec, str]] = {}

    def encode(self, tools: Sequence[ToolSpec]) -> str:
        """``json`` of ``[shape(tool) for tool in tools]``."""
        parts: list[str] = []
        for tool in tools:
            entry = self._cache.get(id(tool))
            if entry is None:
                if len(self._cache) >= self._limit:
                    self._cache.clear()  # callers that build specs afresh every call
                entry = (tool, _ENCODER.encode(self._shape(tool)))
                self._cache[id(tool)] = entry
            parts.append(entry[1])
        return f"[{','.join(parts)}]"
