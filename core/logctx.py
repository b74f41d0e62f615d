"""Log context: the session key and message id of the work in progress, on every record."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["LogContextFilter", "log_context"]

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
