"""The ``[ui]`` section: the web control panel (`gateway.ui`) under ``/ui`` on the HTTP port."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["UiConfig"]


class UiConfig(BaseModel):
    """The web control panel (``/ui`` on the gateway's HTTP port; `familiar ui` logs in).

    It is served only where the HTTP server runs (``[http] enabled``).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Serve ``/ui``; false: every ``/ui`` path answers 404 and `familiar ui` refuses."""
    login_token_seconds: float = Field(default=120.0, gt=0, le=3600)
    """How long the one-time login URL that `familiar ui` prints stays valid."""
    session_hours: float = Field(default=12.0, gt=0, le=720)
    """How long a browser stays logged in after using a login URL."""
    public_url: str | None = None
    """Where browsers reach the panel when not on the HTTP port itself, e.g. behind a TLS
    reverse proxy: ``https://panel.example.com`` (scheme, host and port only). Login
    URLs use it, requests from that origin are accepted, and an ``https`` one makes the
    session cookie ``Secure``."""

    @field_validator("public_url")
    @classmethod
    def _an_origin(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username is not None
            or parts.password is not None
        ):
            raise ValueError(
                f"{value!r} is not a panel address: http:// or https://, a host and "
                "optionally a port, nothing else (the panel is at its /ui)"
            )
        return f"{parts.scheme}://{parts.netloc}"
