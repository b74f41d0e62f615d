"""The local CLI channel: messages from ``familiar send``/``chat`` via the control socket."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator

from pydantic import BaseModel, ConfigDict

from channels.base import ChannelContext
from core.errors import BusError
from core.messages import Delivery, InboundMessage, OutboundMessage

__all__ = ["SESSION_PREFIX", "ChannelStopped", "CliChannel", "CliConfig", "parse_session"]

log = logging.getLogger(__name__)

SESSION_PREFIX = "cli:"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=-]{0,127}")


class CliConfig(BaseModel):
    """The ``cli`` channel has nothing to configure yet; it is always on."""

    model_config = ConfigDict(extra="forbid")


class ChannelStopped(BusError):
    """The CLI channel stopped while a caller waited for a reply."""


def parse_session(session: str) -> str:
    """Return the NAME of a ``cli:NAME`` session key.

    Raises:
        ValueError: the key is not ``cli:`` followed by 1-128 letters, digits or
            ``._@+=-`` (starting with a letter or digit); the message is user-facing.
    """
    if not session.startswith(SESSION_PREFIX):
        raise ValueError(f"session must look like cli:NAME, not {session[:80]!r}")
    name = session.removeprefix(SESSION_PREFIX)
    if not _NAME.fullmatch(name):
        raise ValueError(
            "session name must be 1-128 letters, digits or ._@+=- and start with a letter "
            f"or digit, not {name[:80]!r}"
        )
    return name


def _to_inbound(session: str, text: str, *, autopilot: bool = False) -> InboundMessage:
    """The inbound message for ``text`` typed into CLI session ``session`` (``cli:NAME``)."""
    name = parse_session(session)
    return InboundMessage(
        session_key=session,
        text=text,
        delivery=Delivery(channel="cli", chat_id=name),
        sender="cli",
        autopilot=autopilot,
    )


def _render(message: OutboundMessage) -> dict[str, str]:
    """The control API's final ``reply`` line for ``message``."""
    return {
        "type": "reply",
        "message_id": message.inbound_id,
        "session": message.session_key,
        "kind": message.kind,
        "text": message.text,
    }


class CliChannel:
    """Publishes CLI messages and hands their final replies to whoever waits for them.

    Waiters are registered (by :meth:`submit`) before a message is published, so a reply
    can never slip past its waiter. A reply nobody waits for (the client went away, or
    the daemon restarted) is simply marked delivered: it stays readable in the store.
    """

    name = "cli"

    def __init__(self, *, config: CliConfig | None = None) -> None:
        self.config = config or CliConfig()
        self._context: ChannelContext | None = None
        # None as a result means "the channel stopped".
        self._waiters: dict[str, asyncio.Future[OutboundMessage | None]] = {}
        # Terminals watching a session for replies nobody waits for (schedules, check-ins).
        # None in a queue means "the channel stopped".
        self._watchers: dict[str, set[asyncio.Queue[OutboundMessage | None]]] = {}

    @property
    def waiting(self) -> int:
        """How many replies are awaited right now."""
        return len(self._waiters)

    async def start(self, context: ChannelContext) -> None:
        self._context = context

    async def stop(self) -> None:
        self._context = None
        for queues in self._watchers.values():
            for queue in queues:
                queue.put_nowait(None)
        waiters, self._waiters = self._waiters, {}
        for future in waiters.values():
            if not future.done():
                future.set_result(None)

    async def send(self, message: OutboundMessage) -> None:
        # The waiter stays registered until wait_reply (or forget) takes it: the reply
        # may come before the caller starts waiting.
        future = self._waiters.get(message.inbound_id)
        if future is None:
            watchers = self._watchers.get(message.session_key, set())
            log.debug(
                "reply without a waiter message_id=%s watchers=%d",
                message.inbound_id,
                len(watchers),
            )
            for queue in watchers:
                queue.put_nowait(message)
        elif not future.done():
            future.set_result(message)

    @contextlib.asynccontextmanager
    async def watch(self, session: str) -> AsyncIterator[asyncio.Queue[OutboundMessage | None]]:
        """Receive the replies of ``session`` that no sender waits for (e.g. schedules).

        A None in the queue means the channel stopped.
        """
        queue: asyncio.Queue[OutboundMessage | None] = asyncio.Queue()
        self._watchers.setdefault(session, set()).add(queue)
        try:
            yield queue
        finally:
            watchers = self._watchers.get(session, set())
            watchers.discard(queue)
            if not watchers:
                self._watchers.pop(session, None)

    def expect(self, message_id: str) -> None:
        """Register interest in the reply to ``message_id`` (before publishing it)."""
        if message_id not in self._waiters:
            self._waiters[message_id] = asyncio.get_running_loop().create_future()

    async def submit(self, session: str, text: str, *, autopilot: bool = False) -> InboundMessage:
        """Publish ``text`` on ``session`` durably; its reply can then be awaited.

        Raises:
            ValueError: bad session key.
            ChannelStopped: the channel is not running.
        """
        if self._context is None:
            raise ChannelStopped("the cli channel is not running")
        message = _to_inbound(session, text, autopilot=autopilot)
        self.expect(message.id)
        try:
            await self._context.bus.publish_inbound(message)
        except BaseException:
            self.forget(message.id)
            raise
        return message

    def forget(self, message_id: str) -> None:
        """Stop waiting for the reply to ``message_id``."""
        future = self._waiters.pop(message_id, None)
        if future is not None:
            future.cancel()

    # The control API passes the client's timeout through: part of the contract.
    async def wait_reply(
        self,
        message_id: str,
        timeout: float | None,
    ) -> OutboundMessage | None:
        """The reply to ``message_id``, or None after ``timeout`` seconds (None: no limit).

        One waiter per message: use the one :meth:`submit` (or :meth:`expect`)
        registered before publishing; without it, a reply delivered earlier is only in
        the store. The waiter is gone when this returns.

        Raises:
            ChannelStopped: the channel stopped before the reply came.
        """
        self.expect(message_id)
        future = self._waiters[message_id]
        try:
            async with asyncio.timeout(timeout):
                reply = await asyncio.shield(future)
        except TimeoutError:
            return None
        finally:
            if self._waiters.get(message_id) is future:
                del self._waiters[message_id]
        if reply is None:
            raise ChannelStopped("the gateway is stopping")
        return reply
