"""The web panel's channel: the Chat page's ``ui:NAME`` sessions, via the control socket.

The panel (served by the gateway itself, behind its login) sends through the control
route ``POST /v1/ui/messages``, naming the logged-in operator; replies come back the way
they do for ``familiar chat`` (`LocalChannel`).
"""

from __future__ import annotations

import re
from typing import Literal

from channels.base import ChannelConfig, ChannelPlugin
from channels.local import LocalChannel, Submitted
from core.messages import Delivery, InboundMessage, new_message_id
from core.session_keys import check_ui_key

__all__ = ["UiChannel", "UiChannelConfig", "plugin", "ui_actor"]

_OPERATOR = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+=-]{0,63}")
"""An operator: an OS user name (letters, digits, ``_.@+=-``; up to 64)."""


class UiChannelConfig(ChannelConfig):
    """The web panel's channel (the Chat page's ``ui:NAME`` sessions)."""

    enabled: Literal[True] = True
    """Always on: only the panel sends through it (the panel itself is ``[ui] enabled``)."""


def ui_actor(operator: str) -> str:
    """How the panel's operator is named as a sender and approver: ``ui:<operator>``.

    Raises:
        ValueError: ``operator`` is not a user name (1-64 letters, digits or ``_.@+=-``).
    """
    if not _OPERATOR.fullmatch(operator):
        raise ValueError(
            f"{operator[:80]!r} is not an operator name: 1-64 letters, digits or _.@+=-"
        )
    return f"ui:{operator}"


class UiChannel(LocalChannel):
    """The web panel's Chat page: messages of the logged-in operator in ``ui:NAME``."""

    name = "ui"

    def __init__(
        self, *, config: UiChannelConfig | None = None, handover_grace: float = 30.0
    ) -> None:
        """Create the channel.

        Args:
            config: the channel's (empty) config.
            handover_grace: see `LocalChannel`.
        """
        super().__init__(handover_grace=handover_grace)
        self.config = config or UiChannelConfig()

    async def submit(
        self,
        session: str,
        text: str,
        *,
        operator: str,
        client_id: str | None = None,
        message_id: str | None = None,
    ) -> Submitted:
        """Publish what ``operator`` typed into ``session`` and attach the caller as its
        sender (see `LocalChannel.publish`).

        Args:
            session: the ``ui:NAME`` session key.
            text: the message.
            operator: the logged-in operator (the OS user who ran ``familiar ui``): the
                message's sender and approver are ``ui:<operator>``.
            client_id: the sender's idempotency id (the message's ``event_id``).
            message_id: the id to give the message (default: a fresh one).

        Raises:
            ValueError: bad session key or operator name.
            ChannelStopped: the channel is not running.
        """
        name = check_ui_key(session)
        actor = ui_actor(operator)
        message = InboundMessage(
            id=message_id or new_message_id(),
            session_key=session,
            text=text,
            delivery=Delivery(channel=self.name, chat_id=name),
            sender=actor,
            # The panel's login proves the operator (a token only `familiar ui`, on the
            # control socket, can get); never a field the browser typed.
            approver=actor,
            event_id=client_id,
        )
        return await self.publish(message)


def _create(config: UiChannelConfig) -> UiChannel:
    return UiChannel(config=config)


plugin = ChannelPlugin(name="ui", config_model=UiChannelConfig, create=_create)
"""The built-in web panel channel (always present, like ``cli``)."""
