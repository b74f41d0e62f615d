"""Deterministic embeddings for the fake OpenAI server: a hashed bag of meanings.

Each word is first mapped to its meaning (a small synonym table: ``car`` and
``automobile`` mean the same), then hashed into one of ``dims`` buckets; the vector is
the normalized bucket count. Texts sharing meanings are close even with no shared
word, which is what a test of semantic recall needs.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from aiohttp import web

__all__ = ["MEANINGS", "embeddings_route", "meaning_vector"]

MEANINGS: dict[str, str] = {
    word: meaning
    for meaning, words in {
        "vehicle": ("car", "cars", "automobile", "vehicle", "auto", "sedan"),
        "parking": ("parked", "parking", "garage", "whereabouts", "left"),
        "medic": ("doctor", "physician", "dentist", "clinic", "gp"),
        "money": ("salary", "pay", "wage", "income", "paycheck"),
    }.items()
    for word in words
}
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(["a", "an", "the", "is", "on", "of", "in", "my", "to", "at", "and", "for"])


def meaning_vector(text: str, dims: int = 64) -> list[float]:
    counts = [0.0] * dims
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        meaning = MEANINGS.get(word, word)
        bucket = int.from_bytes(hashlib.blake2b(meaning.encode(), digest_size=4).digest()) % dims
        counts[bucket] += 1.0
    length = math.sqrt(sum(c * c for c in counts)) or 1.0
    return [c / length for c in counts]


def embeddings_route(down: list[bool]) -> Any:
    """``POST /v1/embeddings`` (503 while ``down[0]`` is true)."""

    async def handler(request: web.Request) -> web.Response:
        if down[0]:
            return web.json_response({"error": {"message": "embeddings down"}}, status=503)
        body = await request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = int(body.get("dimensions") or 64)
        data = [
            {"object": "embedding", "index": i, "embedding": meaning_vector(t, dims)}
            for i, t in enumerate(inputs)
        ]
        return web.json_response({"object": "list", "data": data, "model": body["model"]})

    return handler
