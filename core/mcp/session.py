"""An MCP client session that declares what familiar can do: tasks, elicitation, sampling.

The SDK's ``Client`` announces only the capabilities it has callbacks for and knows no
``tasks`` capability, so the session is opened here: a `ClientSession` over our own
`JSONRPCDispatcher`, and the ``initialize`` handshake sent with our capabilities. Task
requests (``tasks/get``, ``tasks/result``, ``tasks/cancel``, a task-augmented
``tools/call``) are not in the SDK's typed surface: they go through the dispatcher raw and
are validated here into the SDK's task types.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import mcp_types
from mcp.client.session import ClientSession, ElicitationFnT, MessageHandlerFnT, SamplingFnT
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

__all__ = ["OpenSession", "capabilities", "open_session"]

_CLIENT = mcp_types.Implementation(name="familiar", version="1")


def capabilities(*, sampling: bool) -> mcp_types.ClientCapabilities:
    """What familiar tells a server it supports: tasks, elicitation (form and URL), and
    sampling only where the operator allowed it (``[mcp.servers.<name>] sampling``)."""
    return mcp_types.ClientCapabilities(
        tasks=mcp_types.ClientTasksCapability(),
        elicitation=mcp_types.ElicitationCapability(
            form=mcp_types.FormElicitationCapability(), url=mcp_types.UrlElicitationCapability()
        ),
        sampling=mcp_types.SamplingCapability() if sampling else None,
    )


@dataclass(frozen=True, slots=True)
class OpenSession:
    """A session after the handshake, and the dispatcher it runs on (for raw requests)."""

    session: ClientSession
    dispatcher: JSONRPCDispatcher
    version: str

    async def raw(
        self, method: str, params: Mapping[str, Any] | None, *, timeout: float
    ) -> dict[str, Any]:
        """Send a request the SDK has no typed method for; its result as received.

        Raises:
            MCPError: the server answered with an error, or the request timed out.
        """
        return await self.dispatcher.send_raw_request(
            method,
            params,
            {"timeout": timeout, "headers": {MCP_PROTOCOL_VERSION_HEADER: self.version}},
        )


async def open_session(
    stack: AsyncExitStack,
    transport: Any,
    *,
    sampling: bool,
    elicitation_callback: ElicitationFnT,
    sampling_callback: SamplingFnT,
    message_handler: MessageHandlerFnT,
) -> OpenSession:
    """Enter ``transport`` and a session on it (onto ``stack``) and run the handshake.

    Raises:
        MCPError: the server refused ``initialize``.
        RuntimeError: it answered with a protocol version we do not speak.
    """
    read_stream, write_stream = await stack.enter_async_context(transport)
    dispatcher = JSONRPCDispatcher(read_stream, write_stream)
    session = ClientSession(
        dispatcher=dispatcher,
        elicitation_callback=elicitation_callback,
        sampling_callback=sampling_callback,
        message_handler=message_handler,
        client_info=_CLIENT,
    )
    await stack.enter_async_context(session)
    result = await session.send_request(
        mcp_types.InitializeRequest(
            params=mcp_types.InitializeRequestParams(
                protocol_version=LATEST_HANDSHAKE_VERSION,
                capabilities=capabilities(sampling=sampling),
                client_info=_CLIENT,
            )
        ),
        mcp_types.InitializeResult,
    )
    if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        raise RuntimeError(f"unsupported protocol version {result.protocol_version!r}")
    session.adopt(result)
    await session.send_notification(mcp_types.InitializedNotification())
    return OpenSession(session=session, dispatcher=dispatcher, version=result.protocol_version)
