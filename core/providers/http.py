"""The aiohttp session and the plumbing shared by the HTTP providers."""

from __future__ import annotations

import asyncio
import base64
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
from yarl import URL

from core.providers.base import ChatRequest, Completion, StreamEvent, ToolSpec
from core.providers.body import ToolsJson, encode_body
from core.providers.config import ProviderConfig
from core.providers.retry import RetryPolicy, final_completion, parse_json, raise_for_status

__all__ = ["HttpProvider", "client_timeout", "make_session", "split_credentials"]


def client_timeout(
    *, connect: float, read: float, total: float | None = None
) -> aiohttp.ClientTimeout:
    """``connect`` bounds getting a connection (pool wait included), ``read`` the longest
    gap between two chunks of a response (or before the first), ``total`` everything."""
    return aiohttp.ClientTimeout(total=total, connect=connect, sock_connect=connect, sock_read=read)


def make_session(
    timeout: aiohttp.ClientTimeout,
    *,
    endpoint: URL,
    limit: int = 1000,
    headers: Mapping[str, str] | None = None,
) -> aiohttp.ClientSession:
    """A session for an API client, sending ``headers`` on every request; call it inside
    the running event loop.

    aiohttp's connector, unlike httpcore's pool, does not scan every connection for
    every queued request (the top cost at a thousand concurrent sessions). API calls
    need no cookies, so none are kept. The environment's proxy for ``endpoint``
    (``HTTPS_PROXY``, ``NO_PROXY``...) is honoured, as it was when the providers spoke
    httpx; it is looked up once here (aiohttp's ``trust_env`` reads ~/.netrc on every
    request).
    """
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit),
        timeout=timeout,
        cookie_jar=aiohttp.DummyCookieJar(),
        headers=headers,
        proxy=env_proxy(endpoint),
    )


def env_proxy(endpoint: URL) -> str | None:
    """The proxy the environment names for ``endpoint`` (None: connect directly)."""
    if endpoint.host is None or urllib.request.proxy_bypass(endpoint.host):
        return None
    return urllib.request.getproxies().get(endpoint.scheme)


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

    Subclasses call ``__init__`` with their endpoint path, headers (their key header
    among them) and their tools' JSON shape, and give the payload (:meth:`_payload`),
    one streamed attempt (:meth:`_stream_once`, with :meth:`_post`) and the parse of a
    non-streamed answer (:meth:`_final`).
    """

    def __init__(
        self,
        *,
        config: ProviderConfig,
        base_url: str,
        model: str,
        path: str,
        headers: Mapping[str, str],
        tool_json: Callable[[ToolSpec], dict[str, Any]],
    ) -> None:
        self._config = config
        self._tools = ToolsJson(tool_json)
        self._model = model
        url, basic_auth = split_credentials(f"{base_url}{path}")
        self._url = URL(url)
        self._retry = RetryPolicy.from_config(config, base_url=base_url)
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
        return self._retry.run(lambda deadline: self._stream_once(request, deadline))

    async def complete(self, request: ChatRequest) -> Completion:
        """One call without streaming.

        Raises:
            ProviderError: a subclass, once retries are exhausted.
        """
        return await final_completion(
            self._retry.run(lambda deadline: self._complete_once(request, deadline))
        )

    async def aclose(self) -> None:
        """Close the HTTP session (a later call opens a new one)."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _post(
        self, body: bytes, *, deadline: float, headers: Mapping[str, str] | None = None
    ) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
        """POST ``body`` to the endpoint, to be done (body read) by ``deadline`` (loop time).

        The response is not checked (see ``raise_for_status``). ``headers`` add to or
        replace the session's (those given to ``__init__``).
        """
        if self._session is None:
            self._session = make_session(
                self._timeout(total=None), endpoint=self._url, headers=self._headers
            )
        remaining = deadline - asyncio.get_running_loop().time()
        return self._session.post(
            self._url,
            data=body,
            headers=headers,
            allow_redirects=False,
            timeout=self._timeout(total=max(remaining, 0.001)),  # 0 would mean no limit
        )

    def _timeout(self, *, total: float | None) -> aiohttp.ClientTimeout:
        return client_timeout(
            connect=self._config.timeout_connect, read=self._config.timeout_read, total=total
        )

    def _body(self, request: ChatRequest, *, stream: bool) -> bytes:
        """The request body: :meth:`_payload`, with the tools' cached JSON spliced in."""
        tools = self._tools.encode(request.tools) if request.tools else None
        return encode_body(self._payload(request, stream=stream), tools=tools)

    async def _complete_once(
        self, request: ChatRequest, deadline: float
    ) -> AsyncGenerator[StreamEvent, None]:
        async with self._post(self._body(request, stream=False), deadline=deadline) as response:
            await raise_for_status(response)
            data = await response.read()
        yield self._final(parse_json(data))

    def _stream_once(
        self, request: ChatRequest, deadline: float
    ) -> AsyncGenerator[StreamEvent, None]:
        raise NotImplementedError

    def _payload(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The body without its tools, in the API's shape."""
        raise NotImplementedError

    def _final(self, body: Any) -> Completion:
        """The :class:`Completion` of a non-streamed answer's body."""
        raise NotImplementedError
