"""The ``[ui]`` section: the web control panel (`gateway.ui`) under ``/ui`` on the HTTP port."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

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
