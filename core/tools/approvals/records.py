"""Approval records as the service sees them, their ids, and the texts the model reads."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from core.errors import CommandError
from core.messages import Delivery

__all__ = [
    "ApprovalInfo",
    "ApprovalStatus",
    "command_digest",
    "new_approval_id",
    "outcome_message_id",
    "parse_approval_id",
]

ApprovalStatus = Literal["pending", "approved", "denied", "expired"]

_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
"""Lower case without look-alikes (no i, l, o, 0, 1): easy to read and type on a phone."""
_ID_LENGTH = 6
_ID_RE = re.compile(r"#?\s*([a-z0-9]{4,16})")


def new_approval_id() -> str:
    """A fresh six-character id such as ``k3xq7m`` (about 8.9e8 of them)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(_ID_LENGTH))


def parse_approval_id(text: str, *, usage: str) -> str:
    """An id as users type it: ``abc123``, ``#abc123``, any case.

    Raises:
        CommandError: ``usage``, when the text is not an id.
    """
    match = _ID_RE.fullmatch(text.strip().lower())
    if match is None:
        raise CommandError(usage)
    return match.group(1)


def command_digest(command: str, timeout: float) -> str:
    """SHA-256 (hex) of exactly what an approval runs: the command text and its timeout."""
    canonical = json.dumps({"command": command, "timeout": timeout}, ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def outcome_message_id(approval_id: str) -> str:
    """The inbound message id that carries an approval's outcome to the model (one only)."""
    return f"approval-{approval_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalInfo:
    """One row of the ``approvals`` table (times are unix seconds)."""

    id: str
    session_key: str
    message_id: str
    delivery: Delivery
    command: str
    timeout: float
    reason: str
    status: ApprovalStatus
    created_at: float
    expires_at: float
    decided_at: float | None = None
    decided_by: str | None = None
    decision_message_id: str | None = None
    reported_at: float | None = None
    command_sha256: str | None = None
    """``command_digest`` taken when the approval was asked (None on old rows)."""

    @property
    def intact(self) -> bool:
        """The command and timeout still hash to the digest taken when it was asked."""
        return self.command_sha256 == command_digest(self.command, self.timeout)

    def as_json(self) -> dict[str, Any]:
        """The control API's shape (times as ISO-8601 UTC, or null)."""
        return {
            "id": self.id,
            "session": self.session_key,
            "channel": self.delivery.channel,
            "command": self.command,
            "reason": self.reason,
            "timeout": self.timeout,
            "status": self.status,
            "requested_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "decided_at": _iso(self.decided_at),
            "decided_by": self.decided_by,
            "command_sha256": self.command_sha256,
            "intact": self.intact,
        }


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat()


def info_of_row(row: Mapping[Any, Any]) -> ApprovalInfo:
    """A stored row (any mapping of its columns) as an ApprovalInfo."""
    return ApprovalInfo(
        id=row["id"],
        session_key=row["session_key"],
        message_id=row["message_id"],
        delivery=Delivery.model_validate_json(row["delivery"]),
        command=row["command"],
        timeout=row["timeout"],
        reason=row["reason"],
        status=row["status"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        decided_at=row["decided_at"],
        decided_by=row["decided_by"],
        decision_message_id=row["decision_message_id"],
        reported_at=row["reported_at"],
        command_sha256=row["command_sha256"],
    )
