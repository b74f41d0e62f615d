"""Request authentication (HMAC signature, bearer token) and the per-hook rate limit."""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from channels.webhook.config import HookConfig

__all__ = [
    "MAX_SKEW",
    "REPLAY_WINDOW",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Authenticated",
    "TokenBucket",
    "authenticate",
    "sign",
    "signed_headers",
]

SIGNATURE_HEADER = "X-Familiar-Signature"
TIMESTAMP_HEADER = "X-Familiar-Timestamp"
MAX_SKEW = 300
"""Seconds a request's timestamp may differ from our clock (replays older than this fail)."""
REPLAY_WINDOW = 2 * MAX_SKEW + 60
"""Seconds an accepted signature is remembered: a timestamp can stay acceptable for up
to ``2 * MAX_SKEW`` after it is first seen (one from the future), plus clock leeway."""

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """``sha256=<hex>``: the HMAC-SHA256 of ``"{timestamp}.{body}"`` with ``secret``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def signed_headers(secret: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    """The timestamp and signature headers of a request (or callback) carrying ``body``."""
    timestamp = int(time.time() if now is None else now)
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: sign(secret, timestamp, body)}


@dataclass(frozen=True, slots=True)
class Authenticated:
    """How a request was authenticated: ``signature`` is the lower-case hex of a valid
    signature (None when the token did it), the request's one-time key."""

    signature: str | None = None


def _signature_ok(secret: str, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    timestamp = headers.get(TIMESTAMP_HEADER, "")
    presented = headers.get(SIGNATURE_HEADER, "")
    if not timestamp or not presented:
        return "missing signature"
    if not _TIMESTAMP.fullmatch(timestamp):
        return "bad timestamp"
    if abs(now - int(timestamp)) > MAX_SKEW:
        return "timestamp outside the allowed window"
    found = _SIGNATURE.fullmatch(presented)
    expected = sign(secret, timestamp, body)
    got = f"sha256={found.group(1).lower()}" if found else "sha256=" + "0" * 64
    # Compared even when malformed, so the answer takes the same time either way.
    if not hmac.compare_digest(expected.encode(), got.encode()) or found is None:
        return "bad signature"
    return None


def _token_ok(token: str, headers: Mapping[str, str]) -> str | None:
    value = headers.get("Authorization", "")
    scheme, _, presented = value.partition(" ")
    if not value or scheme.lower() != "bearer":
        return "missing token"
    given = presented.strip().encode("utf-8", "surrogateescape")
    return None if hmac.compare_digest(token.encode(), given) else "bad token"


def authenticate(
    hook: HookConfig, headers: Mapping[str, str], body: bytes, *, now: float
) -> Authenticated | str:
    """How the request is authentic, else why it is not (for the log; answer 401).

    A hook with a secret and a token accepts either: a valid signature or the token.
    A valid signature wins (its answer names it): a replay is refused even when the
    request also carries the token.
    """
    reasons: list[str] = []
    if hook.secret is not None:
        reason = _signature_ok(hook.secret.get_secret_value(), headers, body, now)
        if reason is None:
            signature = headers[SIGNATURE_HEADER].removeprefix("sha256=").lower()
            return Authenticated(signature=signature)
        reasons.append(reason)
    if hook.token is not None:
        reason = _token_ok(hook.token.get_secret_value(), headers)
        if reason is None:
            return Authenticated()
        reasons.append(reason)
    # The most telling reason: a presented credential that failed beats a missing one.
    presented = [r for r in reasons if not r.startswith("missing")]
    return (presented or reasons)[0]


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up."""

    def __init__(
        self, *, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> int:
        """0 if a token was taken, else whole seconds until one is there (``Retry-After``)."""
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0
        return max(1, math.ceil((1.0 - self._tokens) / self._rate))
