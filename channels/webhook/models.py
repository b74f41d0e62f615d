"""The webhook API's bodies as pydantic models: validation and the OpenAPI schema at once."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, field_validator

from core.session_keys import NAME_PATTERN

__all__ = [
    "SESSION_NAME",
    "Accepted",
    "CallbackBody",
    "ErrorBody",
    "MessageState",
    "MessageStatusBody",
    "ReplyBody",
    "TimeoutBody",
    "WebhookRequest",
]

SESSION_NAME = f"^{NAME_PATTERN}$"
"""A webhook session name: the one rule of `core.session_keys`."""
IDEMPOTENCY_KEY = r"^[\x21-\x7e]{1,200}$"

MessageState = Literal["pending", "running", "done", "failed"]


class WebhookRequest(BaseModel):
    """The body of ``POST /webhook/{name}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: Annotated[str, Field(min_length=1)]
    """The message for the assistant (at most the hook's ``max_text`` characters)."""
    session: Annotated[str, Field(pattern=SESSION_NAME)] = "default"
    """The conversation: session key ``webhook:<hook>:<session>``."""
    sender: Annotated[str, Field(max_length=200)] = ""
    """Who is speaking (shown to the assistant)."""
    wait: StrictBool = False
    """Answer 200 with the reply once it is ready (504 after the hook's ``wait_timeout``)."""
    callback_url: Annotated[str, Field(max_length=2000)] | None = None
    """POST the reply here (must start with one of the hook's ``callback_allow`` prefixes)."""
    idempotency_key: Annotated[str, Field(pattern=IDEMPOTENCY_KEY)] | None = None
    """A retry with the same key on the same hook within 24 h returns the first message."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Any JSON object; stored with the message."""

    @field_validator("text", "sender", mode="after")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
        return value

    @field_validator("text", mode="after")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class Accepted(BaseModel):
    """202: the message is stored and will be answered."""

    message_id: str
    session: str


class ReplyBody(BaseModel):
    """200 (``"wait": true``): the final reply. ``status`` is ``failed`` for an error reply."""

    message_id: str
    session: str
    reply: str
    status: Literal["done", "failed"]


class TimeoutBody(BaseModel):
    """504 (``"wait": true``): no reply within ``wait_timeout``; the message still runs."""

    error: str
    message_id: str


class MessageStatusBody(BaseModel):
    """``GET /webhook/{name}/messages/{id}``: where the message is; ``reply`` once done."""

    message_id: str
    session: str
    status: MessageState
    reply: str | None = None


class CallbackBody(BaseModel):
    """What is POSTed to a ``callback_url``, signed like a request to the hook."""

    message_id: str
    session: str
    reply: str
    status: Literal["done", "failed"]


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer."""

    error: str
