"""The local CLI channel: messages from ``familiar send``/``chat`` via the control socket."""

from __future__ import annotations

from typing import Literal

from channels.base import ChannelConfig, ChannelPlugin
from channels.local import ChannelStopped, LocalChannel, Submitted
from core.messages import Delivery, InboundMessage, new_message_id
from core.session_keys import check_cli_key

__all__ = ["ChannelStopped", "CliChannel", "CliConfig", "Submitted", "plugin"]


class CliConfig(ChannelConfig):
    """The local CLI channel (``familiar send`` / ``chat`` through the control socket)."""

    enabled: Literal[True] = True
    """Always on: the control socket's ``send`` and ``chat`` go through it."""


def _to_inbound(
    session: str,
    text: str,
    *,
    autopilot: bool = False,
    client_id: str | None = None,
    message_id: str | None = None,
) -> InboundMessage:
    """The inbound message for ``text`` typed into CLI session ``session`` (``cli:NAME``)."""
    name = check_cli_key(session)
    return InboundMessage(
        id=message_id or new_message_id(),
        session_key=session,
        text=text,
        delivery=Delivery(channel="cli", chat_id=name),
        sender="cli",
        approver="cli",  # the control socket is the operator's own (file permissions)
        autopilot=autopilot,
        event_id=client_id,
    )


class CliChannel(LocalChannel):
    """The local CLI channel: ``familiar send``/``chat`` through the control socket.

    See `LocalChannel` for how a sender waits for its reply and what becomes of the
    replies nobody waited for.
    """

    name = "cli"

    def __init__(self, *, config: CliConfig | None = None, handover_grace: float = 30.0) -> None:
        """Create the channel.

        Args:
            config: the channel's (empty) config.
            handover_grace: how long `send` waits for a connected sender to hand the reply
                over before counting it as unattended.
        """
        super().__init__(handover_grace=handover_grace)
        self.config = config or CliConfig()

    async def submit(
        self,
        session: str,
        text: str,
        *,
        autopilot: bool = False,
        client_id: str | None = None,
        message_id: str | None = None,
    ) -> Submitted:
        """Publish ``text`` on ``session`` durably and attach the caller as its sender.

        With a ``client_id`` already used within the dedupe window nothing new is stored:
        the caller is attached to the first message instead. Call `detach` when done.

        Args:
            session: the ``cli:NAME`` session key.
            text: the message.
            autopilot: run the message in autopilot mode.
            client_id: the sender's idempotency id (the message's ``event_id``).
            message_id: the id to give the message (default: a fresh one), e.g. one the
                caller subscribed to ephemerals of before publishing.

        Raises:
            ValueError: bad session key.
            ChannelStopped: the channel is not running.
        """
        message = _to_inbound(
            session, text, autopilot=autopilot, client_id=client_id, message_id=message_id
        )
        return await self.publish(message)


def _create(config: CliConfig) -> CliChannel:
    return CliChannel(config=config)


plugin = ChannelPlugin(name="cli", config_model=CliConfig, create=_create)
"""The ``familiar.channels`` entry point of the built-in CLI channel."""
