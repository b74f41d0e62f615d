"""``POST /v1/messages``, ``POST /v1/ui/messages`` and ``GET /v1/watch/{session}``: talking
through the CLI channel and the web panel's channel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Literal

from aiohttp import web
from pydantic import ValidationError

from channels.cli import CliChannel
from channels.local import ChannelStopped, LocalChannel, Submitted
from channels.ui import UiChannel
from core.bus.ephemeral import EphemeralHub, Subscription
from core.bus.sql import SqlBus
from core.messages import EphemeralMessage, OutboundMessage, StreamDelta, new_message_id
from core.session_keys import UI_PREFIX, check_cli_key, check_ui_key
from gateway.control.protocol import (
    Accepted,
    DeltaLine,
    ProgressLine,
    ReplyLine,
    TimeoutLine,
    encode_line,
)
from gateway.control.requests import ErrorBody, SendRequest, UiSendRequest, validation_message

__all__ = ["MessageRoutes", "error"]

log = logging.getLogger(__name__)

_NDJSON = {"Content-Type": "application/x-ndjson"}

WaitEnded = Literal["timeout", "stopping"]
"""Why a sender's wait ended without a reply (the `TimeoutLine` ``reason``)."""


def error(status: int, message: str) -> web.Response:
    """The control API's error answer."""
    return web.json_response(ErrorBody(error=message).model_dump(), status=status)


Submit = Callable[[str], Awaitable[Submitted]]
"""Publishes the request's message with the given id."""


class MessageRoutes:
    """Publishes through the CLI channel (or the web panel's) and streams the answer back
    as NDJSON."""

    def __init__(self, *, cli: CliChannel, ui: UiChannel, bus: SqlBus, hub: EphemeralHub) -> None:
        self._cli = cli
        self._ui = ui
        self._bus = bus
        self._hub = hub

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self.send)
        app.router.add_post("/v1/ui/messages", self.send_ui)
        app.router.add_get("/v1/watch/{key:.+}", self.watch)

    async def send(self, request: web.Request) -> web.StreamResponse:
        try:
            ask = SendRequest.model_validate(await request.json())
        except ValueError as exc:
            return error(400, _body_problem(exc))

        def submit(draft_id: str) -> Awaitable[Submitted]:
            return self._cli.submit(
                ask.session,
                ask.text,
                autopilot=ask.autopilot,
                client_id=ask.client_id,
                message_id=draft_id,
            )

        return await self._answer(request, self._cli, ask, submit)

    async def send_ui(self, request: web.Request) -> web.StreamResponse:
        """The web panel's Chat page: ``ui:NAME`` sessions, as the logged-in operator.

        Only the gateway's own process (where the panel runs, behind its login) may
        send here: the operator it names becomes the approver of the message.
        """
        if not _from_this_process(request):
            return error(403, "ui sessions are written by the web panel only (familiar ui)")
        try:
            ask = UiSendRequest.model_validate(await request.json())
        except ValueError as exc:
            return error(400, _body_problem(exc))

        def submit(draft_id: str) -> Awaitable[Submitted]:
            return self._ui.submit(
                ask.session,
                ask.text,
                operator=ask.operator,
                client_id=ask.client_id,
                message_id=draft_id,
            )

        return await self._answer(request, self._ui, ask, submit)

    async def _answer(
        self,
        request: web.Request,
        channel: LocalChannel,
        ask: SendRequest | UiSendRequest,
        submit: Submit,
    ) -> web.StreamResponse:
        async with contextlib.AsyncExitStack() as stack:
            draft_id = new_message_id()
            # Subscribed before publishing, so no delta comes before the subscription.
            sub = await _subscribe(stack, self._hub, draft_id, ask.stream)
            try:
                submitted = await submit(draft_id)
            except ChannelStopped as exc:
                return error(503, str(exc))
            message_id = submitted.message_id
            stack.callback(channel.detach, message_id)
            if submitted.duplicate:
                found = await self._bus.message_status(message_id)
                if found is not None and found.session != ask.session:
                    return error(
                        409, f"client_id {ask.client_id!r} was used for session {found.session}"
                    )
                sub = await _subscribe(stack, self._hub, message_id, ask.stream)
            response = web.StreamResponse(headers=_NDJSON)
            try:
                await response.prepare(request)
                accepted = Accepted(message_id=message_id, session=ask.session)
                await response.write(encode_line(accepted))
                reply = await self._relay(response, channel, message_id, sub, ask.timeout)
                if isinstance(reply, OutboundMessage):
                    final: ReplyLine | TimeoutLine = ReplyLine.of(reply)
                else:
                    final = TimeoutLine(message_id=message_id, session=ask.session, reason=reply)
                await response.write(encode_line(final))
                await response.write_eof()
                if isinstance(reply, OutboundMessage):
                    channel.handed(message_id)
            except ConnectionResetError:
                log.info("control client went away message_id=%s (reply is kept)", message_id)
        return response

    async def _relay(
        self,
        response: web.StreamResponse,
        channel: LocalChannel,
        message_id: str,
        sub: Subscription | None,
        limit: float | None,
    ) -> OutboundMessage | WaitEnded:
        """Write ephemerals until the reply is there; the reply, or why none came."""
        if sub is None:  # nothing to stream: just the wait
            return await self._wait_reply(channel, message_id, limit)
        waiting = asyncio.ensure_future(self._wait_reply(channel, message_id, limit))
        try:
            while not waiting.done():
                getting = asyncio.ensure_future(sub.get())
                try:
                    await asyncio.wait({waiting, getting}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    getting.cancel()
                if getting.done() and not getting.cancelled():
                    await _write_ephemeral(response, getting.result())
            while (item := sub.get_nowait()) is not None:
                await _write_ephemeral(response, item)
            return await waiting
        finally:
            waiting.cancel()

    async def _wait_reply(
        self, channel: LocalChannel, message_id: str, limit: float | None
    ) -> OutboundMessage | WaitEnded:
        """The reply through the bus; ``timeout`` after ``limit``, ``stopping`` when the
        channel stops (the gateway is shutting down)."""
        reply = asyncio.ensure_future(self._bus.wait_reply(message_id, limit))
        channel.cancel_on_stop(reply)
        try:
            found = await reply
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not channel.stopped or (task is not None and task.cancelling()):
                raise  # this request was cancelled, not the wait by the channel's stop
            return "stopping"
        finally:
            channel.forget(reply)
            reply.cancel()
        return "timeout" if found is None else found

    async def watch(self, request: web.Request) -> web.StreamResponse:
        """NDJSON ``reply`` lines for the session's replies no sender received.

        What ``familiar chat`` (and the panel's Chat page, for ``ui:NAME``) shows between
        turns: schedule firings, check-ins.
        """
        key = request.match_info["key"]
        ui = key.startswith(UI_PREFIX)
        channel: LocalChannel = self._ui if ui else self._cli
        try:
            (check_ui_key if ui else check_cli_key)(key)
        except ValueError as exc:
            return error(400, str(exc))
        response = web.StreamResponse(headers=_NDJSON)
        # Watching before the headers go out: once the client sees the response start,
        # no reply can slip past it.
        async with channel.watch(key) as queue:
            with contextlib.suppress(ConnectionResetError):
                await response.prepare(request)
                while (reply := await queue.get()) is not None:
                    await response.write(encode_line(ReplyLine.of(reply)))
        return response


def _body_problem(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        return validation_message(exc)
    return "the body must be JSON"


def _from_this_process(request: web.Request) -> bool:
    """Whether the peer on the Unix socket is this very process (SO_PEERCRED)."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is None or sock.family != socket.AF_UNIX:
        return False
    size = struct.calcsize("3i")
    pid, _uid, _gid = struct.unpack(
        "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size)
    )
    return bool(pid == os.getpid())


async def _subscribe(
    stack: contextlib.AsyncExitStack, hub: EphemeralHub, message_id: str, wanted: bool
) -> Subscription | None:
    if not wanted:
        return None
    return await stack.enter_async_context(hub.subscribe(message_id))


async def _write_ephemeral(response: web.StreamResponse, item: EphemeralMessage) -> None:
    line = (
        DeltaLine(text=item.text) if isinstance(item, StreamDelta) else ProgressLine(text=item.text)
    )
    await response.write(encode_line(line))
