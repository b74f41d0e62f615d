"""How the server validates request bodies on the control socket (pydantic; server side).

The client writes these bodies with `gateway.control.protocol.send_body` (stdlib only,
so ``familiar send`` starts without pydantic); a contract test checks that every body
it writes validates here.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from channels.ui import ui_actor
from core.session_keys import DEFAULT_CLI_KEY, check_cli_key, check_ui_key
from gateway.control.protocol import CLIENT_ID_PATTERN

__all__ = ["ErrorBody", "ReadRequest", "SendRequest", "UiSendRequest", "validation_message"]


class _Send(BaseModel):
    """What every send carries: the text and how to wait for the reply."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    text: str
    stream: StrictBool = True
    """Send ``delta`` and ``progress`` lines while the reply is made."""
    timeout: Annotated[float, Field(gt=0, strict=True)] | None = None
    """Seconds to wait for the reply before answering ``timeout``; null: no limit."""
    client_id: Annotated[str, Field(pattern=CLIENT_ID_PATTERN)] | None = None
    """The caller's idempotency id: a second send with it within 24 h attaches to the first."""

    @field_validator("text", mode="after")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class SendRequest(_Send):
    """The body of ``POST /v1/messages``."""

    session: str = DEFAULT_CLI_KEY
    """A ``cli:NAME`` session key."""
    autopilot: StrictBool = False

    @field_validator("session", mode="after")
    @classmethod
    def _cli_session(cls, value: str) -> str:
        check_cli_key(value)
        return value


class UiSendRequest(_Send):
    """The body of ``POST /v1/ui/messages`` (the web panel's Chat page)."""

    session: str
    """A ``ui:NAME`` session key."""
    operator: str
    """The logged-in operator (checked by `channels.ui.ui_actor`)."""

    @field_validator("session", mode="after")
    @classmethod
    def _ui_session(cls, value: str) -> str:
        check_ui_key(value)
        return value

    @field_validator("operator", mode="after")
    @classmethod
    def _operator(cls, value: str) -> str:
        ui_actor(value)
        return value


class ReadRequest(BaseModel):
    """The body of ``POST /v1/sessions/{key}/read``: unread replies up to ``upto`` are read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    upto: Annotated[int, Field(ge=0, strict=True)]
    """The newest unread id the caller has shown (ids come from ``GET /v1/sessions/{key}``)."""


class ErrorBody(BaseModel):
    """The body of every 4xx/5xx answer (the client reads it with `protocol.error_text`)."""

    error: str


_PROBLEMS = {
    "missing": "{field} is required",
    "string_type": "{field} must be a string",
    "bool_type": "{field} must be true or false",
    "float_type": "{field} must be a number of seconds or null",
    "greater_than": "{field} must be positive (or null to wait as long as it takes)",
    "string_pattern_mismatch": "{field} must be 1-128 letters, digits or ._:-",
    "model_type": "the body must be a JSON object",
}


def validation_message(exc: ValidationError) -> str:
    """A one-line, user-facing account of what is wrong with a request body."""
    problems = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "body"
        template = _PROBLEMS.get(error["type"])
        if template is not None:
            problems.append(template.format(field=field))
        else:
            problems.append(f"{field}: {str(error['msg']).removeprefix('Value error, ')}")
    return "; ".join(problems)
