"""The gateway's recent warnings and errors, kept in memory for the web panel's System page."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from core.logctx import redact

__all__ = ["RecentErrors"]

_KEEP = 50


class RecentErrors(logging.Handler):
    """A logging handler that keeps the last warnings and errors of this process.

    Only the message is kept (formatted, one line, at most 500 characters). familiar's
    own log lines carry no secrets, but a library's warning may quote a URL with a token
    in it, and the panel shows these lines: credential-like parts are masked.
    """

    def __init__(self, keep: int = _KEEP) -> None:
        super().__init__(level=logging.WARNING)
        self._records: deque[dict[str, Any]] = deque(maxlen=keep)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a call whose arguments do not fit its format
            message = str(record.msg)
        message = redact(" ".join(message.split()))[:500]
        self._records.append(
            {
                "ts": record.created,
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": message,
            }
        )

    def recent(self) -> list[dict[str, Any]]:
        """Newest first."""
        return list(reversed(self._records))
