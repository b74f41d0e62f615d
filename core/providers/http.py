"""The shared HTTP client factory for LLM providers."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from core.providers.base import ChatRequest, Completion, StreamEvent
from core.providers.config import ProviderConfig
from core.providers.retry import RetryPolicy, final_completion

__all__ = ["HttpProvider", "make_client", "split_credentials"]


def make_client(timeout: httpx.Timeout, *, max_connections: int = 1000) -> httpx.AsyncClient:
    """An httpx client on aiohttp's connection pool.

    httpcore's pool scans every connection for every queued request, which made the
    pool the top cost at a thousand concurrent sessions (see README, Benchmarks);
    aiohttp's connector does not. The provider code keeps speaking httpx.
    """
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    return httpx.AsyncClient(timeout=timeout, transport=_Transport(limits=limits))


class _Transport(AiohttpTransport):
    """Fixes one error mapping: httpx-aiohttp reports a refused connection as a timeout."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except httpx.ConnectTimeout as exc:
            cause = exc.__cause__
            if isinstance(cause, aiohttp.ClientConnectorError) and not isinstance(
                cause, aiohttp.ServerTimeoutError
            ):
                raise httpx.ConnectError(str(cause), request=request) from cause
            raise


def split_credentials(url: str) -> tuple[str, str | None]:
    """``(url without user:password@, Basic auth header value or None)``.

    Credentials in the base URL become an Authorization header (as httpx would send
    them); an API key's own header replaces it.
    """
    parsed = httpx.URL(url)
    if not parsed.userinfo:
        return url, None
    auth = httpx.BasicAuth(parsed.username, parsed.password)
    header = next(auth.auth_flow(httpx.Request("GET", url))).headers["Authorization"]
    return str(parsed.copy_with(username=None, password=None)), header


class HttpProvider:
    """What the HTTP providers share: endpoint, timeouts, retries, and the client's life.

    Subclasses call ``__init__`` with their endpoint path and fixed headers, add their
    own key header, and implement one streaming and one non-streaming attempt.
    """

    def __init__(
        self,
        *,
        config: ProviderConfig,
        base_url: str,
        model: str,
        path: str,
        headers: dict[str, str],
        client: httpx.AsyncClient | None,
    ) -> None:
        self._config = config
        self._model = model
        self._url, basic_auth = split_credentials(f"{base_url}{path}")
        self._retry = RetryPolicy.from_config(config, base_url=base_url)
        self._timeout = httpx.Timeout(
            connect=config.timeout_connect,
            read=config.timeout_read,
            write=config.timeout_connect,
            pool=config.timeout_connect,
        )
        self._headers = dict(headers)
        if basic_auth is not None:
            self._headers["Authorization"] = basic_auth
        self._owns_client = client is None
        self._client = client if client is not None else make_client(self._timeout)

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream one call: text deltas, then one :class:`Completion`.

        Raises:
            ProviderError: a subclass, once retries are exhausted or after output began.
        """
        return self._retry.run(lambda: self._stream_once(request))

    async def complete(self, request: ChatRequest) -> Completion:
        """One call without streaming.

        Raises:
            ProviderError: a subclass, once retries are exhausted.
        """
        return await final_completion(self._retry.run(lambda: self._complete_once(request)))

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._owns_client:
            await self._client.aclose()

    def _stream_once(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        raise NotImplementedError

    def _complete_once(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        raise NotImplementedError
