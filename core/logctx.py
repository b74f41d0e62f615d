"""Log context: the session key and message id of the work in progress, on every record."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["LogContextFilter", "log_context", "redact"]

_session_key: ContextVar[str | None] = ContextVar("familiar_session_key", default=None)
_message_id: ContextVar[str | None] = ContextVar("familiar_message_id", default=None)


@contextmanager
def log_context(*, session_key: str | None, message_id: str | None) -> Iterator[None]:
    """Tag log records emitted inside this block (and tasks it starts)."""
    t1 = _session_key.set(session_key)
    t2 = _message_id.set(message_id)
    try:
        yield
    finally:
        _message_id.reset(t2)
        _session_key.reset(t1)


class LogContextFilter(logging.Filter):
    """Adds ``session_key`` and ``message_id`` attributes to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.session_key = _session_key.get()
        record.message_id = _message_id.get()
        return True


_URL_SECRETS = re.compile(r"(?<=://)[^/@\s]+@|(?<=[?&])[^=&\s]+=[^&\s]+")
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_\-]{24,}")


def redact(text: str) -> str:
    """Mask what may be a credential in an error text from a library or a platform.

    URL user info and query parameters, and any token-like run of 24 or more
    characters (API keys, bot tokens), become ``***``. Errors from plugin channels
    can carry the URLs they called; this is applied before logging or storing them.
    """
    return _TOKEN_LIKE.sub("***", _URL_SECRETS.sub("***", text))
