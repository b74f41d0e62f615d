"""A client of an OpenAI-compatible ``/v1/embeddings`` endpoint (semantic recall)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx

from core.memory.config import EmbeddingsConfig
from core.providers.http import make_client

__all__ = ["EmbeddingClient", "EmbeddingError", "normalized"]


class EmbeddingError(Exception):
    """The endpoint failed or answered something that is not embeddings."""


def normalized(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1 (cosine similarity becomes a dot product)."""
    length = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / length for x in vector]


class EmbeddingClient:
    """Embeds texts with ``[memory.embeddings] model``; every failure is an EmbeddingError."""

    def __init__(self, config: EmbeddingsConfig) -> None:
        self._config = config
        self._url = config.base_url.rstrip("/") + "/embeddings"
        self._headers = {"Content-Type": "application/json"}
        if config.api_key is not None:
            self._headers["Authorization"] = f"Bearer {config.api_key.get_secret_value()}"
        self._client: httpx.AsyncClient | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalized vector per text, in order."""
        if not texts:
            return []
        if self._client is None:
            self._client = make_client(httpx.Timeout(self._config.timeout), max_connections=4)
        body: dict[str, Any] = {"model": self._config.model, "input": list(texts)}
        if self._config.dimensions is not None:
            body["dimensions"] = self._config.dimensions
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers)
            response.raise_for_status()
            data = response.json()["data"]
            vectors = [item["embedding"] for item in sorted(data, key=lambda d: d["index"])]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"{type(exc).__name__}: {exc}"[:300]) from exc
        if len(vectors) != len(texts) or not all(vectors):
            raise EmbeddingError(f"{len(vectors)} embeddings for {len(texts)} texts")
        wanted = self._config.dimensions
        if wanted is not None and any(len(v) != wanted for v in vectors):
            raise EmbeddingError(f"the endpoint ignored dimensions={wanted}")
        return [normalized([float(x) for x in v]) for v in vectors]

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
