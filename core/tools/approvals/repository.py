"""The ``approvals`` table: every SQL statement of approvals, each write with its event."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Table, insert, select, update

from core.event_data import ApprovalDecided, ApprovalRequested
from core.events import Event, EventLog
from core.messages import Delivery
from core.store.engine import Store
from core.store.models import ApprovalRow

from .records import ApprovalInfo, ApprovalStatus, command_digest, info_of_row, new_approval_id

__all__ = ["ApprovalRepository", "Decided", "NewApproval"]

_approvals: Table = ApprovalRow.__table__  # type: ignore[attr-defined]
_PENDING = _approvals.c.status == "pending"
_ID_ATTEMPTS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class NewApproval:
    """What a turn asks approval for."""

    session_key: str
    message_id: str
    delivery: Delivery
    command: str
    timeout: float
    reason: str


@dataclass(frozen=True, slots=True)
class Decided:
    """An approval after an answer; ``fresh`` when this very call decided it.

    ``refused``: an approve found the command no longer hashing to its digest, and
    denied it instead.
    """

    info: ApprovalInfo
    fresh: bool
    refused: bool = False


def _decided_event(info: ApprovalInfo, message_id: str | None) -> Event:
    data = ApprovalDecided(
        approval_id=info.id,
        command=info.command,
        reason=info.reason,
        decision=info.status,
        decided_by=info.decided_by,
    )
    return Event(session_key=info.session_key, message_id=message_id, data=data)


def _row(conn: Connection, approval_id: str) -> ApprovalInfo | None:
    found = conn.execute(select(_approvals).where(_approvals.c.id == approval_id)).mappings()
    row = found.first()
    return None if row is None else info_of_row(row)


def _set_status(
    conn: Connection, info: ApprovalInfo, status: ApprovalStatus, **values: Any
) -> ApprovalInfo | None:
    """Move a pending approval on (None when another writer got there first)."""
    statement = (
        update(_approvals)
        .where(_approvals.c.id == info.id, _PENDING)
        .values(status=status, **values)
    )
    if conn.execute(statement).rowcount != 1:
        return None
    return _row(conn, info.id)


class ApprovalRepository:
    """Reads on the store's read path; writes as transaction jobs with their events."""

    def __init__(self, *, store: Store) -> None:
        self._store = store

    async def get(self, approval_id: str) -> ApprovalInfo | None:
        rows = await self._store.fetch(select(_approvals).where(_approvals.c.id == approval_id))
        return info_of_row(rows[0]) if rows else None

    async def pending_for(self, message_id: str) -> list[ApprovalInfo]:
        """The approvals the turn answering ``message_id`` asked for, still pending."""
        query = (
            select(_approvals)
            .where(_approvals.c.message_id == message_id, _approvals.c.status == "pending")
            .order_by(_approvals.c.created_at)
        )
        return [info_of_row(r) for r in await self._store.fetch(query)]

    async def pending(self, now: float, *, limit: int = 500) -> list[ApprovalInfo]:
        """Pending approvals of every session whose time has not run out, oldest first."""
        query = (
            select(_approvals)
            .where(_PENDING, _approvals.c.expires_at > now)
            .order_by(_approvals.c.created_at)
            .limit(limit)
        )
        return [info_of_row(r) for r in await self._store.fetch(query)]

    async def decided(self, *, limit: int = 20) -> list[ApprovalInfo]:
        """The latest answered or expired approvals of every session, newest first."""
        query = (
            select(_approvals)
            .where(_approvals.c.status != "pending")
            .order_by(_approvals.c.decided_at.desc())
            .limit(limit)
        )
        return [info_of_row(r) for r in await self._store.fetch(query)]

    async def create(self, new: NewApproval, *, now: float, expires_at: float) -> ApprovalInfo:
        """Insert a pending approval and its ``tool.approval_requested`` event.

        Once per (message, command): a redelivered turn gets the earlier one back.
        """
        values: dict[str, Any] = {
            "session_key": new.session_key,
            "message_id": new.message_id,
            "delivery": new.delivery.model_dump_json(),
            "command": new.command,
            "timeout": new.timeout,
            "command_sha256": command_digest(new.command, new.timeout),
            "reason": new.reason,
            "status": "pending",
            "created_at": now,
            "expires_at": expires_at,
        }
        earlier = select(_approvals).where(
            _approvals.c.message_id == new.message_id, _approvals.c.command == new.command
        )

        def job(conn: Connection) -> ApprovalInfo:
            found = conn.execute(earlier).mappings().first()
            if found is not None:
                return info_of_row(found)
            approval_id = _free_id(conn)
            conn.execute(insert(_approvals).values(id=approval_id, **values))
            info = _row(conn, approval_id)
            if info is None:
                raise RuntimeError(f"approval {approval_id} vanished after its insert")
            data = ApprovalRequested(
                approval_id=approval_id,
                command=new.command,
                reason=new.reason,
                expires_at=datetime.fromtimestamp(expires_at, UTC).isoformat(),
            )
            EventLog.add_in(
                conn, [Event(session_key=new.session_key, message_id=new.message_id, data=data)]
            )
            return info

        return await self._store.transact(job)

    async def decide(
        self,
        approval_id: str,
        session_key: str,
        *,
        decision: ApprovalStatus,
        now: float,
        by: str,
        message_id: str,
    ) -> Decided | None:
        """Answer a pending approval of ``session_key`` (None if it has no such approval).

        One whose time ran out is marked ``expired`` instead, and one already decided
        is returned as it is (``fresh`` False either way). An approve of a command that
        no longer hashes to the digest taken when it was asked denies it (``refused``).
        """

        def job(conn: Connection) -> Decided | None:
            info = _row(conn, approval_id)
            if info is None or info.session_key != session_key:
                return None
            if info.status != "pending":
                return Decided(info, fresh=False)
            if info.expires_at <= now:
                expired = _expire_in(conn, info, now)
                return Decided(expired or _row(conn, approval_id) or info, fresh=False)
            values = {"decided_at": now, "decided_by": by, "decision_message_id": message_id}
            refused = decision == "approved" and not info.intact
            changed = _set_status(conn, info, "denied" if refused else decision, **values)
            if changed is None:
                return Decided(_row(conn, approval_id) or info, fresh=False)
            EventLog.add_in(conn, [_decided_event(changed, message_id)])
            return Decided(changed, fresh=True, refused=refused)

        return await self._store.transact(job)

    async def expire_due(self, now: float, *, limit: int = 100) -> list[ApprovalInfo]:
        """Mark pending approvals whose time ran out as ``expired`` (with their events)."""
        due = (
            select(_approvals)
            .where(_PENDING, _approvals.c.expires_at <= now)
            .order_by(_approvals.c.expires_at)
            .limit(limit)
        )

        def job(conn: Connection) -> list[ApprovalInfo]:
            found = [info_of_row(r) for r in conn.execute(due).mappings().all()]
            return [e for info in found if (e := _expire_in(conn, info, now)) is not None]

        return await self._store.transact(job)

    async def unreported(self, *, limit: int = 100) -> list[ApprovalInfo]:
        """Denied or expired approvals whose outcome was not published yet (a crash between)."""
        query = (
            select(_approvals)
            .where(
                _approvals.c.status.in_(("denied", "expired")),
                _approvals.c.reported_at.is_(None),
            )
            .limit(limit)
        )
        return [info_of_row(r) for r in await self._store.fetch(query)]

    async def mark_reported(self, approval_id: str, now: float) -> None:
        statement = (
            update(_approvals)
            .where(_approvals.c.id == approval_id, _approvals.c.reported_at.is_(None))
            .values(reported_at=now)
        )
        await self._store.transact(lambda conn: conn.execute(statement))


def _expire_in(conn: Connection, info: ApprovalInfo, now: float) -> ApprovalInfo | None:
    expired = _set_status(conn, info, "expired", decided_at=now)
    if expired is not None:
        EventLog.add_in(conn, [_decided_event(expired, None)])
    return expired


def _free_id(conn: Connection) -> str:
    for _ in range(_ID_ATTEMPTS):
        candidate = new_approval_id()
        if _row(conn, candidate) is None:
            return candidate
    raise RuntimeError("no free approval id after several tries")
