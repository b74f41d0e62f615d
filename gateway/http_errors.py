"""Request bodies every aiohttp app of the gateway refuses before a handler sees them.

`body_checks` is a middleware for the control app and the public HTTP app (and the
webhook, Slack and Teams routes that will join it). A body that is not valid UTF-8, or
JSON that escapes a lone UTF-16 surrogate (``"\\ud800"``, which ``json.loads`` turns
into a string no database, log or JSON encoder accepts), gets a 400 naming the problem;
a body over the app's ``client_max_size`` gets a 413 naming the limit. Errors are JSON
``{"error": "..."}`` like every other error answer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from core.errors import StoreError, StoreFull
from gateway.sizes import size_text

__all__ = [
    "Handler",
    "body_checks",
    "body_problem",
    "error_response",
    "media_type",
    "size_text",
    "store_error_status",
    "store_errors",
]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Bodies we decode as text. Anything else (images, octet streams) is left to its route.
_TEXT_TYPES = frozenset({"", "application/json", "application/x-www-form-urlencoded"})
# A JSON escape: \uXXXX or a backslash and one character (so "\\ud800" is no escape).
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def error_response(status: int, message: str) -> web.Response:
    """The gateway's error answer: JSON ``{"error": message}``."""
    return web.json_response({"error": message}, status=status)


def body_problem(body: bytes, content_type: str = "application/json") -> str | None:
    """What makes ``body`` unusable as text (None when nothing does).

    Args:
        body: the raw request body.
        content_type: its media type; JSON types are also checked for lone surrogates.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = body[exc.start : exc.start + 1].hex()
        return f"the body is not valid UTF-8 (byte 0x{bad} at offset {exc.start})"
    if _is_json(content_type) and "\\u" in text and (where := _lone_surrogate(text)) is not None:
        return (
            f"the body's JSON has a lone UTF-16 surrogate escape {where} "
            "(it is not a character: send text as valid UTF-8)"
        )
    return None


def _is_json(content_type: str) -> bool:
    return content_type in ("", "application/json") or content_type.endswith("+json")


def _lone_surrogate(text: str) -> str | None:
    """The first ``\\uD800``-``\\uDFFF`` escape that is not half of a valid pair."""
    pending: re.Match[str] | None = None  # a high surrogate waiting for its low half
    for match in _ESCAPE.finditer(text):
        code = int(match.group(1), 16) if match.group(1) else None
        if pending is not None:
            if code is not None and 0xDC00 <= code <= 0xDFFF and match.start() == pending.end():
                pending = None
                continue
            return _where(pending)
        if code is None or not 0xD800 <= code <= 0xDFFF:
            continue
        if code >= 0xDC00:
            return _where(match)
        pending = match
    return _where(pending) if pending is not None else None


def _where(match: re.Match[str]) -> str:
    return f"{match.group(0)} at offset {match.start()}"


def media_type(request: web.Request) -> str:
    """What ``request.content_type`` says, without its cost.

    aiohttp parses the header with the ``email`` package, about a tenth of the control
    socket's CPU per message; the media type is the part before any ``;``. The same
    default: ``application/octet-stream`` when the header is missing or malformed.
    """
    media = request.headers.get(hdrs.CONTENT_TYPE, "").partition(";")[0].strip().lower()
    return media if media.count("/") == 1 else "application/octet-stream"


def _is_text(content_type: str) -> bool:
    return content_type in _TEXT_TYPES or content_type.startswith("text/") or _is_json(content_type)


def body_checks(*, too_large_hint: str) -> Middleware:
    """A middleware: 413 for bodies over the app's ``client_max_size``, 400 for bad text.

    Args:
        too_large_hint: what the sender can do instead, appended to the 413 message.
    """

    @web.middleware
    async def checks(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in _BODY_METHODS or not request.body_exists:
            return await handler(request)
        if (request.content_length or 0) > request.client_max_size:
            return _too_large(request, too_large_hint)
        try:
            # aiohttp keeps what it read: the handler's read()/json() get the same bytes.
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _too_large(request, too_large_hint)
        media = media_type(request)
        if _is_text(media) and (problem := body_problem(body, media)):
            return error_response(400, problem)
        return await handler(request)

    return checks


def _too_large(request: web.Request, hint: str) -> web.Response:
    limit, sent = request.client_max_size, request.content_length
    size = f" ({sent:,} bytes)" if sent is not None else ""
    return error_response(413, f"the request body is over {size_text(limit)}{size}; {hint}")


def store_error_status(exc: StoreError) -> int:
    """The HTTP status of a request that failed on the store: 507 for no space left (it
    was not stored), 503 otherwise (unavailable, or lost and the gateway is stopping)."""
    return 507 if isinstance(exc, StoreFull) else 503


@web.middleware
async def store_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A middleware: a `StoreError` becomes its JSON answer (`store_error_status`)."""
    try:
        return await handler(request)
    except StoreError as exc:
        log.warning("request failed on the store path=%s error=%s", request.path, exc)
        return error_response(store_error_status(exc), str(exc))
