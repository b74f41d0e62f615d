"""The aiohttp session and the plumbing shared by the HTTP providers."""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
from yarl import URL

from core.providers.base import ChatRequest, Completion, StreamEvent
from core.providers.config import ProviderConfig
from core.providers.retry import RetryPolicy, final_completion

__all__ = ["HttpProvider", "client_timeout", "make_session", "split_credentials"]


def client_timeout(*, connect: float, read: float) -> aiohttp.ClientTimeout:
    """No overall limit; ``connect`` bounds getting a connection (pool wait included),
    ``read`` the longest gap between two chunks of a response (or before the first)."""
    return aiohttp.ClientTimeout(total=None, connect=connect, sock_connect=connect, sock_read=read)


def make_session(timeout: aiohttp.ClientTimeout, *, limit: int = 1000) -> aiohttp.ClientSession:
    """A session for an API client; call it inside the running event loop.

    aiohttp's connector, unlike httpcore's pool, does not scan every connection for
    every queued request (the top cost at a thousand concurrent sessions). API calls
    need no cookies, so none are kept.
    """
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit),
        timeout=timeout,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def split_credentials(url: str) -> tuple[str, str | None]:
    """``(url without user:password@, Basic auth header value or None)``.

    Credentials in the base URL become an Authorization header; an API key's own
    header replaces it.
    """
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    username, _, password = userinfo.partition(":")
    pair = f"{unquote(username)}:{unquote(password)}".encode()
    header = f"Basic {base64.b64encode(pair).decode()}"
    return urlunsplit(parts._replace(netloc=host)), header


class HttpProvider:
    """What the HTTP providers share: endpoint, timeouts, retries, and the session's life.

    Subclasses call ``__init__`` with their endpoint path and headers (their key header
    among them), and implement one streaming and one non-streaming attempt with
    :meth:`_post`.
    """

    def __init__(
        self,
        *,
        config: ProviderConfig,
        base_url: str,
        model: str,
        path: str,
        headers: Mapping[str, str],
    ) -> None:
        self._config = config
        self._model = model
        url, basic_auth = split_credentials(f"{base_url}{path}")
        self._url = URL(url)
        self._retry = RetryPolicy.from_config(config, base_url=base_url)
        self._timeout = client_timeout(connect=config.timeout_connect, read=config.timeout_read)
        self._headers = {
            **({"Authorization": basic_auth} if basic_auth is not None else {}),
            "Content-Type": "application/json",
            **headers,
        }
        self._session: aiohttp.ClientSession | None = None

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
        """Close the HTTP session (a later call opens a new one)."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _post(
        self, body: bytes, headers: Mapping[str, str]
    ) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
        """POST ``body`` to the endpoint; the response is not checked (see raise_for_status)."""
        if self._session is None:
            self._session = make_session(self._timeout)
        return self._session.post(self._url, data=body, headers=headers, allow_redirects=False)

    def _stream_once(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        raise NotImplementedError

    def _complete_once(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        raise NotImplementedError
