"""Retries, time budget and error mapping shared by the HTTP providers."""

from __future__ import annotations

import asyncio
import email.utils
import errno
import json
import logging
import random
import socket
import ssl
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from core.errors import ProviderError, ProviderRateLimited, ProviderRejected, ProviderUnavailable
from core.providers.base import Completion, StreamEvent
from core.providers.config import ProviderConfig

__all__ = [
    "AttemptFactory",
    "RetryPolicy",
    "StatusFailure",
    "display_url",
    "final_completion",
    "parse_json",
    "parse_retry_after",
    "raise_for_status",
]

logger = logging.getLogger(__name__)

AttemptFactory = Callable[[float], AsyncGenerator[StreamEvent, None]]
"""Starts one attempt of an LLM call: a fresh stream of events.

Its argument is the call's deadline (event-loop time): past it, the attempt raises
``TimeoutError`` (the HTTP providers make it aiohttp's ``total`` timeout, one timer per
request rather than one per event).
"""

_TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
_TRANSIENT_ERRORS = (
    aiohttp.ClientConnectionError,  # refused, DNS, TLS, timeouts, resets, disconnects
    aiohttp.ClientPayloadError,  # a body cut short or badly framed
    aiohttp.ClientResponseError,  # a malformed status line or headers (statuses are ours)
)
_DETAIL_LIMIT = 300
_DECODER = json.JSONDecoder()


class StatusFailure(Exception):
    """One attempt got an error status: an HTTP status, or an error event inside a stream.

    Raised by providers inside an attempt; :class:`RetryPolicy` decides from ``status``
    and ``retry_after`` whether to try again, and turns it into a ``ProviderError``.
    """

    def __init__(self, *, status: int, detail: str, retry_after: float | None = None) -> None:
        # The detail stays out of str(): servers may quote the API key back in it.
        super().__init__(f"HTTP {status}")
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


def display_url(url: str) -> str:
    """``url`` without credentials, query or fragment, fit for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a ``Retry-After`` (or ``retry-after-ms``) header, if usable.

    ``headers`` is case-insensitive (a response's headers).
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def parse_json(data: str | bytes) -> Any:
    """``json.loads``, with malformed data reported as a (retryable) bad-gateway failure.

    Bytes must be UTF-8 (as JSON on the wire is); decoding them first spares
    ``json.loads`` its encoding detection. JSON with no whitespace around it (a stream
    chunk) is read by ``raw_decode`` alone, without ``json.loads``' two whitespace scans.
    """
    try:
        text = data.decode() if isinstance(data, bytes) else data
        value, end = _DECODER.raw_decode(text)
        if end == len(text):
            return value
    except ValueError:
        pass  # json.loads says what is wrong, or reads what raw_decode does not
    try:
        return json.loads(data.decode() if isinstance(data, bytes) else data)
    except ValueError as exc:
        snippet = data[:100] if isinstance(data, str) else data[:100].decode(errors="replace")
        raise StatusFailure(status=502, detail=f"malformed JSON from server: {snippet!r}") from exc


async def final_completion(events: AsyncGenerator[StreamEvent, None]) -> Completion:
    """Drain ``events`` and return its closing :class:`Completion`."""
    completion: Completion | None = None
    async with aclosing(events):
        async for event in events:
            if isinstance(event, Completion):
                completion = event
    if completion is None:
        raise ProviderUnavailable("the LLM response ended without a completion")
    return completion


def _error_detail(response: aiohttp.ClientResponse, body: bytes) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:_DETAIL_LIMIT]
        if isinstance(error, str):
            return error[:_DETAIL_LIMIT]
    text = body.decode(errors="replace").strip()
    return text[:_DETAIL_LIMIT] or response.reason or "no details"


async def raise_for_status(response: aiohttp.ClientResponse) -> None:
    """Raise :class:`StatusFailure` if ``response`` (possibly streamed) is an error."""
    if response.status < 400:
        return
    body = await response.read()
    raise StatusFailure(
        status=response.status,
        detail=_error_detail(response, body),
        retry_after=parse_retry_after(response.headers),
    )


def _is_retryable(exc: Exception) -> bool:
    if isinstance(exc, StatusFailure):
        return exc.status in _TRANSIENT_STATUSES or exc.status >= 500
    return isinstance(exc, _TRANSIENT_ERRORS)


def _connect_reason(exc: BaseException) -> str:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or (
            isinstance(seen, OSError) and seen.errno == errno.ECONNREFUSED
        ):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return "host name not found"
        if isinstance(seen, ssl.SSLError):
            return "TLS handshake failed"
        seen = seen.__cause__ or seen.__context__
    return "connection failed"


def _attempts(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How one provider retries: attempts, backoff, total budget, and error wording.

    Attributes:
        target: the endpoint as shown in messages (see :func:`display_url`).
        max_retries: retries after the first attempt.
        backoff: base seconds of the exponential backoff.
        backoff_cap: the longest backoff between two attempts (Retry-After may exceed it).
        timeout_read: the read timeout, quoted in messages.
        timeout_total: the budget of a whole call, retries and waits included.
        secret: the API key, scrubbed from every message.
    """

    target: str
    max_retries: int = 3
    backoff: float = 1.0
    backoff_cap: float = 30.0
    timeout_read: float = 120.0
    timeout_total: float = 600.0
    secret: str | None = None

    @classmethod
    def from_config(cls, config: ProviderConfig, *, base_url: str) -> RetryPolicy:
        """The policy of a provider built from ``config`` that calls ``base_url``."""
        return cls(
            target=display_url(base_url),
            max_retries=config.max_retries,
            backoff=config.retry_backoff,
            timeout_read=config.timeout_read,
            timeout_total=config.timeout_total,
            secret=config.api_key.get_secret_value() if config.api_key else None,
        )

    async def run(self, attempt: AttemptFactory) -> AsyncGenerator[StreamEvent, None]:
        """Run ``attempt`` until it succeeds, retrying transient failures.

        Retries only while nothing has been yielded yet: once a delta went out, a
        failure is final. The whole call, waits included, is bounded by
        ``timeout_total``.

        Raises:
            ProviderRateLimited: still 429 after the last attempt.
            ProviderUnavailable: unreachable, 5xx, timeouts, or out of time.
            ProviderRejected: any other 4xx, at once.
        """
        deadline = asyncio.get_running_loop().time() + self.timeout_total
        total = self.max_retries + 1
        for number in range(1, total + 1):
            emitted = False
            try:
                async with aclosing(attempt(deadline)) as events:
                    async for event in events:
                        emitted = True
                        yield event
                return
            except (StatusFailure, aiohttp.ClientError) as exc:
                delay = self._next_delay(exc, number, emitted=emitted, deadline=deadline)
                if delay is None:
                    raise self._error_for(exc, number, emitted=emitted) from exc
                logger.warning(
                    "LLM provider at %s: attempt %d/%d failed (%s); retrying in %.2f s",
                    self.target,
                    number,
                    total,
                    self._redact(self._short_reason(exc)),
                    delay,
                )
                await asyncio.sleep(delay)
            except TimeoutError as exc:
                # aiohttp's own timeouts are ClientErrors, caught above: this is the budget.
                raise self._error_out_of_time() from exc

    def _next_delay(
        self, exc: Exception, number: int, *, emitted: bool, deadline: float
    ) -> float | None:
        """Seconds to wait before the next attempt, or None to give up now."""
        if emitted or number > self.max_retries or not _is_retryable(exc):
            return None
        exponential = min(self.backoff_cap, self.backoff * 2.0 ** (number - 1))
        delay = exponential * (0.5 + random.random() / 2)
        if isinstance(exc, StatusFailure) and exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        if asyncio.get_running_loop().time() + delay >= deadline:
            return None
        return delay

    def _short_reason(self, exc: Exception) -> str:
        if isinstance(exc, StatusFailure):
            return f"HTTP {exc.status}"
        if isinstance(exc, aiohttp.ClientConnectorError):
            return _connect_reason(exc)
        return type(exc).__name__

    def _redact(self, text: str) -> str:
        if self.secret:
            text = text.replace(self.secret, "***")
        return text

    def _error_out_of_time(self) -> ProviderError:
        return ProviderUnavailable(
            f"LLM provider at {self.target} did not finish within "
            f"{self.timeout_total:g} s (timeout_total)"
        )

    def _error_for(self, exc: Exception, number: int, *, emitted: bool) -> ProviderError:
        after = "after part of the reply was streamed" if emitted else f"after {_attempts(number)}"
        if isinstance(exc, StatusFailure):
            return self._status_error(exc, after)
        if isinstance(exc, aiohttp.ClientConnectorError):
            message = f"is unreachable ({_connect_reason(exc)}) {after}"
        elif isinstance(exc, aiohttp.ConnectionTimeoutError):
            message = f"is unreachable (connect timed out) {after}"
        elif isinstance(exc, aiohttp.ServerTimeoutError):
            message = f"sent nothing for {self.timeout_read:g} s (read timeout) {after}"
        elif isinstance(exc, _TRANSIENT_ERRORS):
            message = f"dropped the connection ({type(exc).__name__}) {after}"
        else:
            message = f"could not be called ({type(exc).__name__}: {exc})"
        return ProviderUnavailable(self._redact(f"LLM provider at {self.target} {message}"))

    def _status_error(self, exc: StatusFailure, after: str) -> ProviderError:
        detail = self._redact(exc.detail)
        prefix = f"LLM provider at {self.target}"
        if exc.status == 429:
            return ProviderRateLimited(
                f"{prefix} is rate limiting us (HTTP 429) {after}: {detail}",
                status=429,
                retry_after=exc.retry_after,
            )
        if _is_retryable(exc):
            return ProviderUnavailable(
                f"{prefix} failed (HTTP {exc.status}) {after}: {detail}",
                status=exc.status,
                retry_after=exc.retry_after,
            )
        return ProviderRejected(
            f"{prefix} rejected the request (HTTP {exc.status}): {detail}", status=exc.status
        )
