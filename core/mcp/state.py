"""Where an MCP server connection is in its life (without importing the mcp SDK)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ServerState"]


class ServerState(StrEnum):
    """Where a server connection is in its life."""

    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    """Not connected; the owner retries after a backoff."""
