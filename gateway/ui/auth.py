"""Who may use the web panel: one-time login tokens, session cookies and CSRF tokens.

`familiar ui` asks the daemon over the control socket (mode 0600: only the owner of the
home reaches it) for a login token; ``/ui/login?token=...`` redeems it once, within
``[ui] login_token_seconds``, for a session cookie. Every state-changing request must
carry the session's CSRF token as well. Everything is held in memory: a restarted
gateway forgets its sessions, and the operator logs in again.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.ui_config import UiConfig

__all__ = ["COOKIE", "OPERATOR_PATTERN", "UiAuth", "UiSession"]

COOKIE = "familiar_ui"
OPERATOR_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9._@-]{0,63}"
_OPERATOR = re.compile(OPERATOR_PATTERN)
_MAX_TOKENS = 32
"""Login tokens outstanding at once (a loop calling `familiar ui` cannot fill memory)."""
_MAX_SESSIONS = 64
"""Logged-in browsers at once; the oldest is logged out to make room."""


@dataclass(frozen=True)
class UiSession:
    """One logged-in browser.

    Attributes:
        id: the cookie's value.
        operator: the OS user who ran `familiar ui` (shown, and recorded on decisions).
        csrf: the token every state-changing request of this session carries.
        expires: when the session ends (the auth's clock).
    """

    id: str
    operator: str
    csrf: str
    expires: float


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class UiAuth:
    """Login tokens and sessions of the web panel (one per gateway process serving ``/ui``).

    Args:
        config: token and session lifetimes.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(self, config: UiConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._clock = clock
        self._tokens: dict[str, tuple[str, float]] = {}
        self._sessions: dict[str, UiSession] = {}
        self.base_url: str | None = None
        """``http://host:port`` where ``/ui`` is served (None until HTTP listens)."""

    def listening_on(self, host: str, port: int) -> None:
        """Record where the HTTP server listens, for the login URLs (``[ui] public_url``
        instead, when set)."""
        if self._config.public_url is not None:
            self.base_url = self._config.public_url
            return
        if host in ("", "0.0.0.0", "::"):  # every address: loopback is one of them
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        self.base_url = f"http://{host}:{port}"

    def origin_ok(self, origin: str | None, reached: str) -> bool:
        """Whether a state-changing request's ``Origin`` is the panel's: none or ``null``
        (form posts under ``Referrer-Policy: no-referrer``), ``reached`` (the scheme and
        host the request came in with), or ``[ui] public_url``."""
        return origin in (None, "null", reached) or origin == self._config.public_url

    @property
    def secure_cookie(self) -> bool:
        """The panel is reached over TLS through a proxy (``public_url`` is https)."""
        url = self._config.public_url
        return url is not None and url.startswith("https://")

    def issue(self, operator: str) -> str:
        """A new single-use login token for ``operator``.

        Raises:
            ValueError: ``operator`` is not a user name.
        """
        if not _OPERATOR.fullmatch(operator):
            raise ValueError(f"operator must match {OPERATOR_PATTERN}")
        now = self._clock()
        self._tokens = {k: v for k, v in self._tokens.items() if v[1] > now}
        while len(self._tokens) >= _MAX_TOKENS:
            del self._tokens[next(iter(self._tokens))]
        token = secrets.token_urlsafe(32)
        self._tokens[_digest(token)] = (operator, now + self._config.login_token_seconds)
        return token

    def redeem(self, token: str) -> UiSession | None:
        """A new session for a valid token (which is then spent); None when it is unknown,
        already used or expired."""
        found = self._tokens.pop(_digest(token), None)
        now = self._clock()
        if found is None or found[1] <= now:
            return None
        self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now}
        while len(self._sessions) >= _MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        session = UiSession(
            id=secrets.token_urlsafe(32),
            operator=found[0],
            csrf=secrets.token_urlsafe(32),
            expires=now + self._config.session_hours * 3600,
        )
        self._sessions[_digest(session.id)] = session
        return session

    def session(self, cookie: str | None) -> UiSession | None:
        """The live session a cookie value names, or None."""
        if not cookie:
            return None
        found = self._sessions.get(_digest(cookie))
        if found is None:
            return None
        if found.expires <= self._clock():
            del self._sessions[_digest(cookie)]
            return None
        return found

    def end(self, session: UiSession) -> None:
        """Log a session out."""
        self._sessions.pop(_digest(session.id), None)

    @staticmethod
    def csrf_ok(session: UiSession, given: str | None) -> bool:
        """Whether ``given`` is the session's CSRF token (compared in constant time)."""
        return given is not None and hmac.compare_digest(session.csrf, given)

    @property
    def token_seconds(self) -> float:
        """How long a login token stays valid."""
        return self._config.login_token_seconds

    @property
    def session_seconds(self) -> float:
        """How long a session lasts."""
        return self._config.session_hours * 3600
