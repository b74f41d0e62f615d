"""Teams activities -> what to do with them: ignore, refuse, or an InboundMessage (pure)."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

from microsoft_agents.activity import Activity, ActivityTypes, ConversationReference

from channels.teams.config import REFERENCE_KEY, TeamsConfig
from core.messages import Delivery, InboundMessage

__all__ = [
    "CHANNEL",
    "Incoming",
    "allowed",
    "from_activity",
    "reference_of",
    "session_key",
    "to_inbound",
]

CHANNEL = "teams"
_THREAD = ";messageid="


@dataclass(frozen=True, slots=True)
class Incoming:
    """A Teams message the bot may answer.

    Attributes:
        conversation: the conversation id replies go to (a channel thread's id carries
            ``;messageid=<reply chain id>``).
        kind: ``personal`` (1:1), ``groupChat`` or ``channel``.
        chain: the reply chain (thread) id in a channel; None elsewhere.
        user: the sender's Entra object id (else their Teams id).
        reference: the conversation reference replies are sent through (JSON-ready).
    """

    conversation: str
    kind: str
    chain: str | None
    tenant: str
    user: str
    text: str
    activity_id: str
    reference: dict[str, Any]

    @property
    def session_key(self) -> str:
        return session_key(self.conversation, self.chain)

    @property
    def event_id(self) -> str:
        """The bus's dedupe id: a redelivered activity is stored (and answered) once."""
        return f"{self.conversation}|{self.activity_id}"


def session_key(conversation: str, chain: str | None) -> str:
    """``teams:<conversation id>`` for chats; ``teams:<channel id>:<reply chain id>`` for
    a channel thread."""
    if chain is None:
        return f"{CHANNEL}:{conversation}"
    return f"{CHANNEL}:{conversation.partition(_THREAD)[0]}:{chain}"


def from_activity(activity: Activity) -> Incoming | None:
    """The message in ``activity``, or None to ignore it.

    Ignored: anything but a message (conversation updates, reactions, invokes), messages
    without a conversation or id, the bot's own, and in group chats and channels those
    that do not @-mention the bot (Teams sends those only to apps with resource-specific
    consent). The mention is stripped from the text.
    """
    if activity.type != ActivityTypes.message or not activity.id or activity.conversation is None:
        return None
    sender = activity.from_property
    me = activity.recipient
    if sender is None or (me is not None and sender.id == me.id):
        return None
    conversation = activity.conversation
    kind = conversation.conversation_type or ("groupChat" if conversation.is_group else "personal")
    if kind != "personal" and not activity.is_recipient_mentioned():
        return None
    text = activity.remove_recipient_mention() if kind != "personal" else (activity.text or "")
    chain: str | None = None
    conversation_id = conversation.id
    if kind == "channel":
        base, _, chain_id = conversation_id.partition(_THREAD)
        chain = chain_id or activity.id
        conversation_id = f"{base}{_THREAD}{chain}"
    reference = activity.get_conversation_reference()
    reference.conversation = conversation.model_copy(update={"id": conversation_id})
    return Incoming(
        conversation=conversation_id,
        kind=kind,
        chain=chain,
        tenant=_tenant(activity),
        user=sender.aad_object_id or sender.id,
        text=html.unescape(text).strip(),
        activity_id=activity.id,
        reference=reference.model_dump(mode="json", by_alias=True, exclude_none=True),
    )


def _tenant(activity: Activity) -> str:
    if activity.conversation is not None and activity.conversation.tenant_id:
        return activity.conversation.tenant_id
    data = activity.channel_data
    tenant = data.get("tenant") if isinstance(data, dict) else getattr(data, "tenant", None)
    if isinstance(tenant, dict):
        return str(tenant.get("id") or "")
    return str(getattr(tenant, "id", "") or "")


def allowed(incoming: Incoming, config: TeamsConfig) -> bool:
    """Whether the allow-lists let this user, from this tenant, talk to the bot."""
    if config.allow_tenants and incoming.tenant not in config.allow_tenants:
        return False
    return not config.allow_users or incoming.user in config.allow_users


def to_inbound(incoming: Incoming, *, message_id: str) -> InboundMessage:
    """The bus message for ``incoming``; its delivery carries the conversation reference."""
    return InboundMessage(
        id=message_id,
        session_key=incoming.session_key,
        text=incoming.text or "(empty message)",
        delivery=Delivery(
            channel=CHANNEL,
            chat_id=incoming.conversation,
            thread_id=incoming.chain,
            route={REFERENCE_KEY: json.dumps(incoming.reference, separators=(",", ":"))},
        ),
        sender=incoming.user,
        approver=incoming.user,  # from the token-checked activity, never the message text
        event_id=incoming.event_id,
    )


def reference_of(delivery: Delivery) -> ConversationReference:
    """The conversation reference stored in a delivery (replies and schedule firings).

    Raises:
        ValueError: the delivery carries no (valid) reference.
    """
    raw = delivery.route.get(REFERENCE_KEY)
    if not raw:
        raise ValueError(f"no Teams conversation reference stored for {delivery.chat_id!r}")
    return ConversationReference.model_validate_json(raw)
