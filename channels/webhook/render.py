"""Pure conversions between webhook bodies and bus messages."""

from __future__ import annotations

import json
from typing import Literal

from channels.webhook.models import CallbackBody, WebhookRequest
from core.messages import Delivery, InboundMessage, OutboundMessage

__all__ = ["reply_status", "session_key", "session_name", "to_callback", "to_inbound"]


def session_key(hook: str, session: str) -> str:
    """``webhook:<hook>:<session>``."""
    return f"webhook:{hook}:{session}"


def session_name(key: str) -> str:
    """The ``<session>`` part of ``webhook:<hook>:<session>``."""
    return key.split(":", 2)[-1]


def to_inbound(
    hook: str, sent: WebhookRequest, callback: str | None = None, *, allow_approve: bool = False
) -> InboundMessage:
    """The bus message for a request to ``hook``; ``callback`` (the checked, normalised
    callback URL) rides in its delivery.

    The body's ``sender`` is only a display name: approvals are answered (when the hook's
    ``allow_approve`` lets them be) as the authenticated hook, ``webhook:<hook>``.
    """
    route = {"callback_url": callback} if callback else {}
    return InboundMessage(
        session_key=session_key(hook, sent.session),
        text=sent.text,
        delivery=Delivery(channel="webhook", chat_id=hook, route=route),
        sender=sent.sender or f"webhook:{hook}",
        approver=f"webhook:{hook}" if allow_approve else None,
        event_id=f"{hook}:{sent.idempotency_key}" if sent.idempotency_key else None,
        metadata=sent.metadata,
    )


def reply_status(reply: OutboundMessage) -> Literal["done", "failed"]:
    """``failed`` for an error reply (the agent or the provider failed), else ``done``."""
    return "done" if reply.kind == "reply" else "failed"


def to_callback(reply: OutboundMessage) -> bytes:
    """The JSON body POSTed to a callback URL."""
    body = CallbackBody(
        message_id=reply.inbound_id,
        session=session_name(reply.session_key),
        reply=reply.text,
        status=reply_status(reply),
    )
    return json.dumps(body.model_dump(mode="json"), ensure_ascii=False).encode()
