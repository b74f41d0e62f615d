"""Log handlers: JSON lines off a TTY (journald), readable lines on a TTY; always stderr."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.logctx import LogContextFilter

__all__ = ["LogConfig", "setup_logging"]


class LogConfig(BaseModel):
    """Logging: ``format`` auto = JSON when stderr is not a TTY."""

    model_config = ConfigDict(extra="forbid")

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Least severe level logged."""
    format: Literal["auto", "json", "text"] = "auto"
    """``json``: one JSON object per line (for journald); ``text``: for people; ``auto``:
    JSON when stderr is not a terminal."""


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ("session_key", "message_id"):
            value = getattr(record, key, None)
            if value:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        ctx = " ".join(
            f"{k}={v}" for k in ("session_key", "message_id") if (v := getattr(record, k, None))
        )
        line = f"{stamp} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if ctx:
            line += f"  [{ctx}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


_NOISY = (
    "httpx2",
    "httpcore2",
    "mcp",
    "aiosqlite",
    "apscheduler",
    "alembic",
    "asyncio",
)
"""Libraries logged at WARNING and above only (whatever ``log.level`` says, down to INFO)."""


def setup_logging(config: LogConfig) -> None:
    """Install the one stderr handler (only the gateway installs handlers)."""
    use_json = config.format == "json" or (config.format == "auto" and not sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if use_json else _TextFormatter())
    handler.addFilter(LogContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(config.level)
    # httpx2 (the MCP SDK's client) logs every request URL at INFO, and MCP server URLs
    # often carry their key; the mcp SDK logs every request it serves at INFO.
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(config.level)))
