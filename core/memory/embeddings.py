"""A client of an OpenAI-compatible ``/v1/embeddings`` endpoint (semantic recall)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import aiohttp
from yarl import URL

from core.memory.config import EmbeddingsConfig
from core.providers.body import encode_body
from core.providers.http import client_timeout, make_session, split_credentials

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
        self._url, basic_auth = split_credentials(config.base_url.rstrip("/") + "/embeddings")
        self._headers = {"Content-Type": "application/json"}
        if basic_auth is not None:
            self._headers["Authorization"] = basic_auth
        if config.api_key is not None:
            self._headers["Authorization"] = f"Bearer {config.api_key.get_secret_value()}"
        self._session: aiohttp.ClientSession | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalized vector per text, in order."""
        if not texts:
            return []
        if self._session is None:
            timeout = self._config.timeout
            self._session = make_session(
                client_timeout(connect=timeout, read=timeout), endpoint=URL(self._url), limit=4
            )
        body: dict[str, Any] = {"model": self._config.model, "input": list(texts)}
        if self._config.dimensions is not None:
            body["dimensions"] = self._config.dimensions
        try:
            async with self._session.post(
                self._url, data=encode_body(body), headers=self._headers, allow_redirects=False
            ) as response:
                response.raise_for_status()
                data = json.loads(await response.read())["data"]
            vectors = [item["embedding"] for item in sorted(data, key=lambda d: d["index"])]
        except (aiohttp.ClientError, ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"{type(exc).__name__}: {exc}"[:300]) from exc
        if len(vectors) != len(texts) or not all(vectors):
            raise EmbeddingError(f"{len(vectors)} embeddings for {len(texts)} texts")
        wanted = self._config.dimensions
        if wanted is not None and any(len(v) != wanted for v in vectors):
            raise EmbeddingError(f"the endpoint ignored dimensions={wanted}")
        return [normalized([float(x) for x in v]) for v in vectors]

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
