"""What an MCP connection asks of familiar when its server asks something of the client.

A server may ask the person a question (``elicitation/create``), ask the model
(``sampling/createMessage``) and report a task's progress; the connection only knows
which call (or task) the request belongs to, the `McpHost` knows whose conversation
that is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from core.messages import Delivery

if TYPE_CHECKING:  # the SDK's types cost half a second: only with MCP servers
    import mcp_types

__all__ = ["RELATED_TASK_KEY", "CallOwner", "McpHost", "related_task"]

RELATED_TASK_KEY = "io.modelcontextprotocol/related-task"
"""The ``_meta`` key that ties a server's request to one of its tasks."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOwner:
    """The conversation a tool call is made for.

    Attributes:
        session_key: the session whose turn made the call (a subagent's, a schedule's...).
        root_key: the session a person talks to at the top of that chain (where
            questions are asked: a subagent has nobody to answer).
        delivery: where the root session's replies go (its channel, chat, thread).
        message_id: the message being answered when the call was made.
    """

    session_key: str
    root_key: str
    delivery: Delivery | None
    message_id: str | None = None


def related_task(meta: Mapping[str, Any] | None) -> str | None:
    """The server task a request belongs to (``_meta`` related-task), if any."""
    found = (meta or {}).get(RELATED_TASK_KEY)
    if isinstance(found, Mapping):
        task_id = found.get("taskId")
        return task_id if isinstance(task_id, str) else None
    return None


class McpHost(Protocol):
    """Answers a server's requests for the connection (elicitation, sampling, progress)
    and runs its task tools (`core.mcp.hosting.McpHostService`)."""

    async def start(self) -> None:
        """Resume following the tasks left running (by a restart)."""
        ...

    async def stop(self) -> None:
        """Stop following tasks (another start resumes them)."""
        ...

    async def call_as_task(self, ctx: Any, tool: Any, arguments: dict[str, Any]) -> str:
        """Run a call of ``tool`` (an `McpTool`) as an MCP task; what the model gets."""
        ...

    async def elicit(
        self, server: str, owner: CallOwner | None, task: str | None, params: Any
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """Ask the owner's person; ``task``: the server task it belongs to, if any."""
        ...

    async def sample(
        self,
        server: str,
        owner: CallOwner | None,
        task: str | None,
        params: mcp_types.CreateMessageRequestParams,
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        """Ask familiar's model, if the server may."""
        ...

    async def progress(self, server: str, notification: mcp_types.ProgressNotification) -> None:
        """A progress notification no pending call took (a task's, after its start)."""
        ...
