"""The one exception tree of familiar.

    FamiliarError
    ├── ConfigError              bad or missing configuration (names the key)
    ├── StoreError               the database failed or is unreachable
    │   ├── StoreFileError       the SQLite file cannot be used (names the file, the cause, a hint)
    │   ├── StoreFull            no space left for a write: refused until there is
    │   └── StoreLost            corrupted, deleted, dropped: the gateway stops (not retryable)
    ├── BusError                 the bus refused an operation
    ├── RetryLater               rate-limited: try again after retry_after (not a failure)
    ├── ProviderError            the LLM call failed (carries status / retry_after)
    │   ├── ProviderUnavailable  cannot connect / 5xx / timeout after retries
    │   ├── ProviderRateLimited  429 after retries
    │   └── ProviderRejected     4xx other than 429 (bad key, bad request)
    ├── ToolError                a tool could not do what was asked
    │   ├── ToolRetry            the model should fix its arguments and retry
    │   └── ToolFailed           the tool ran and failed
    │       └── McpRefused       an MCP server answered a request with an error
    ├── PolicyDenied             a tool call refused by policy or a hook
    ├── MemoryRefused            bad memory input or a scope the caller may not touch
    │   └── MemoryNotFound       no memory entry with that id
    ├── CommandError             a slash command was malformed (message is user-facing)
    ├── TaskRefused              a subagent operation was refused (unknown agent, caps, owner)
    │   └── TaskNotFound         no subagent with that id
    └── TurnCancelled            a running turn was stopped (/stop)

Channels turn these into platform-appropriate replies; core never swallows them.
"""

from __future__ import annotations

__all__ = [
    "BusError",
    "CommandError",
    "ConfigError",
    "FamiliarError",
    "McpRefused",
    "MemoryNotFound",
    "MemoryRefused",
    "PolicyDenied",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderRejected",
    "ProviderUnavailable",
    "RetryLater",
    "StoreError",
    "StoreFileError",
    "StoreFull",
    "StoreLost",
    "TaskNotFound",
    "TaskRefused",
    "ToolError",
    "ToolFailed",
    "ToolRetry",
    "TurnCancelled",
]


class FamiliarError(Exception):
    """Base of every error familiar raises on purpose."""


class ConfigError(FamiliarError):
    """Configuration is invalid; the message names the offending key."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class StoreError(FamiliarError):
    """The store failed."""


class StoreFileError(StoreError):
    """The SQLite database file cannot be used: missing, replaced, unreadable, corrupted.

    Its message is one line: the file, what is wrong, and what to do about it.

    Attributes:
        path: the database file.
        cause: what is wrong with it (one line).
    """

    HINT = 'restore it from a backup or move it aside; see "familiar doctor"'

    def __init__(self, path: str, cause: str, *, hint: str | None = None) -> None:
        self.path = path
        self.cause = " ".join(cause.split())
        super().__init__(f"the database {path} {self.cause} ({hint or self.HINT})")


class StoreFull(StoreError):
    """A write failed for lack of space (SQLite's SQLITE_FULL, ENOSPC, PostgreSQL's
    disk_full). Nothing of it was stored; writes work again once there is space."""


class StoreLost(StoreError):
    """The store cannot be used any more: its file is corrupted, deleted or replaced, or
    the database or its schema is gone. Retrying cannot help: the gateway stops."""


class BusError(FamiliarError):
    """The bus refused an operation."""


class RetryLater(FamiliarError):
    """The other side asked us to wait (a rate limit): try again after ``retry_after``
    seconds. A delivery that raises it is rescheduled without using up an attempt.

    Attributes:
        retry_after: seconds to wait before trying again.
    """

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(0.0, retry_after)


class ProviderError(FamiliarError):
    """An LLM provider call failed.

    Attributes:
        status: HTTP status if there was one.
        retry_after: seconds the server asked us to wait, if it said.
    """

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ProviderUnavailable(ProviderError):
    """The provider could not be reached or kept failing (connect error, 5xx, timeout)."""


class ProviderRateLimited(ProviderError):
    """The provider kept answering 429."""


class ProviderRejected(ProviderError):
    """The provider refused the request (bad key, bad model, bad request)."""


class ToolError(FamiliarError):
    """A tool could not do what was asked; becomes a tool result, not a crash."""


class ToolRetry(ToolError):
    """The model should fix its arguments and call again."""


class ToolFailed(ToolError):
    """The tool ran and failed."""


class McpRefused(ToolFailed):
    """An MCP server answered a request with an error (not: it could not be reached).

    Attributes:
        code: the JSON-RPC error code it sent.
    """

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


class PolicyDenied(FamiliarError):
    """A tool call was refused by policy or a hook."""


class MemoryRefused(FamiliarError):
    """A memory operation was refused (empty or oversized text, too many tags, a bad
    query, or a scope the caller may not write); the message is for the model or user."""


class MemoryNotFound(MemoryRefused):
    """No memory entry has that id."""


class CommandError(FamiliarError):
    """A slash command was malformed; the message is shown to the user as is."""


class TaskRefused(FamiliarError):
    """A subagent could not be started, messaged or cancelled; the message says why
    (an unknown agent type with the valid ones, a depth or concurrency cap, not yours)."""


class TaskNotFound(TaskRefused):
    """No subagent has that id (or name)."""


class TurnCancelled(FamiliarError):
    """The running turn was stopped by the user."""
