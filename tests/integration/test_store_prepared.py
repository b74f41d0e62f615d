"""Prepared statements: the same results and errors as ``Connection.execute`` on every
dialect, and on SQLite the hot path runs through the sqlite3 driver."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, bindparam, create_engine, event, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, StatementError

from core.bus.base import Claim
from core.bus.sql import SqlBus
from core.bus.tables import InboundRow
from core.errors import StoreFull
from core.event_data import UserMessage
from core.events import Event, EventLog
from core.messages import Delivery, InboundMessage, OutboundMessage
from core.providers.base import ChatMessage
from core.sessions import SessionStore
from core.store.engine import Store
from core.store.faults import Fault, classify
from core.store.migrate import upgrade_to_head
from core.store.models import HistoryRow
from core.store.prepared import Prepared
from core.store.sql import insert_ignore
from core.store.writer import make_transactional

_inbound = InboundRow.__table__  # type: ignore[attr-defined]
_history = HistoryRow.__table__  # type: ignore[attr-defined]
_INSERT = Prepared(insert(_inbound))
_CONTROL = Prepared(select(_inbound.c.id, _inbound.c.control).where(_inbound.c.seq > 0))
_TAKE = Prepared(
    update(_inbound)
    .where(_inbound.c.session_key == bindparam("key"), _inbound.c.status == "pending")
    .values(status="claimed", lease_until=bindparam("until"))
    .returning(_inbound.c.id, _inbound.c.lease_until, _inbound.c.control)
)
_HISTORY = Prepared(insert(_history))


def _row(mid: str, *, control: bool = False) -> dict[str, Any]:
    return {
        "id": mid,
        "session_key": "cli:a",
        "status": "pending",
        "control": control,
        "payload": "{}",
        "created_at": 1.0,
        "attempts": 0,
    }


def _history_row(content: str) -> dict[str, Any]:
    return {"session_key": "cli:a", "epoch": 0, "role": "user", "content": content, "created_at": 2}


@contextmanager
def _cursor_statements() -> Iterator[list[str]]:
    """Every statement SQLAlchemy sends to a cursor meanwhile (the fast path sends none)."""
    seen: list[str] = []

    def record(_c: Any, _cur: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


async def test_results_match_on_every_dialect(store: Store) -> None:
    dialect = store.dialect

    def job(conn: Connection) -> None:
        assert _INSERT.run(conn, _row("m1", control=True)) == 1
        ignore = insert_ignore(dialect, _inbound)
        assert ignore.run(conn, _row("m1")) == 0  # ON CONFLICT DO NOTHING
        assert ignore.run(conn, _row("m2")) == 1
        # Bind and result processors: booleans in, booleans out.
        assert sorted(_CONTROL.rows(conn, {})) == [("m1", True), ("m2", False)]
        taken = sorted(_TAKE.rows(conn, {"key": "cli:a", "until": 5}))
        assert taken == [("m1", 5.0, True), ("m2", 5.0, False)]
        assert _TAKE.first(conn, {"key": "cli:a", "until": 6}) is None
        assert _TAKE.run(conn, {"key": "nobody", "until": 6}) == 0
        # The new row's key; a column default (unread) filled in; executemany.
        first = _HISTORY.insert(conn, _history_row("one"))
        _HISTORY.many(conn, [_history_row("two"), _history_row("three")])
        rows = conn.execute(
            select(_history.c.id, _history.c.content, _history.c.unread).order_by(_history.c.id)
        ).all()
        assert [tuple(r) for r in rows] == [
            (first, "one", False),
            (first + 1, "two", False),
            (first + 2, "three", False),
        ]

    await store.transact(job)


async def test_errors_are_sqlalchemys_on_every_dialect(store: Store) -> None:
    def duplicate(conn: Connection) -> None:
        _INSERT.run(conn, _row("m1"))
        _INSERT.run(conn, _row("m1"))

    with pytest.raises(IntegrityError):
        await store.transact(duplicate)

    def duplicate_many(conn: Connection) -> None:
        _INSERT.many(conn, [_row("m2"), _row("m2")])

    with pytest.raises(IntegrityError):
        await store.transact(duplicate_many)

    def not_a_boolean(conn: Connection) -> None:
        _INSERT.run(conn, {**_row("m3"), "control": "yes"})

    with pytest.raises(StatementError, match="Not a boolean value"):
        await store.transact(not_a_boolean)

    def missing(conn: Connection) -> None:
        _TAKE.rows(conn, {"key": "cli:a"})

    with pytest.raises(StatementError, match="until"):
        await store.transact(missing)
    # Every failed job was rolled back.
    assert await store.transact(lambda conn: _CONTROL.rows(conn, {})) == []


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = create_engine(f"sqlite:///{tmp_path / 'prepared.db'}")
    make_transactional(engine)
    with engine.begin() as conn:
        upgrade_to_head(conn)
    yield engine
    engine.dispose()


def test_sqlite_statements_skip_sqlalchemys_cursor(sqlite_engine: Engine) -> None:
    with sqlite_engine.begin() as conn, _cursor_statements() as seen:
        _INSERT.run(conn, _row("m1"))
        _HISTORY.insert(conn, _history_row("one"))
        _HISTORY.many(conn, [_history_row("two"), _history_row("three")])
        assert _TAKE.rows(conn, {"key": "cli:a", "until": 5}) == [("m1", 5.0, False)]
    assert seen == []


def test_a_driver_fault_on_the_fast_path_keeps_its_class_and_sqlite_code(
    sqlite_engine: Engine,
) -> None:
    """A full database met by the sqlite3 driver: wrapped as SQLAlchemy wraps it (the
    driver's error as ``orig``), so the store's fault detection reads SQLite's code."""
    with sqlite_engine.begin() as conn, _cursor_statements() as seen:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
        conn.exec_driver_sql(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(OperationalError) as full:
            _HISTORY.many(conn, [_history_row("x" * 4000) for _ in range(20)])
        assert full.value.orig.sqlite_errorcode == 13  # type: ignore[union-attr]
        assert [s for s in seen if not s.startswith("PRAGMA")] == []  # it was the fast path
        fault = classify(full.value)
        assert fault is not None and fault.kind == "full", fault
        with pytest.raises(OperationalError) as single:
            _HISTORY.insert(conn, _history_row("x" * 40_000))
        assert classify(single.value) == Fault("full", fault.cause)


async def test_a_full_database_on_the_fast_path_is_store_full(tmp_path: Path) -> None:
    store = Store(url=f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}")
    await store.open()

    def fill(conn: Connection) -> None:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
        conn.exec_driver_sql(f"PRAGMA max_page_count = {pages}")
        _HISTORY.insert(conn, _history_row("x" * 40_000))

    try:
        with pytest.raises(StoreFull, match="the disk is full"):
            await store.transact(fill)
    finally:
        await store.close()


def test_outside_a_transaction_sqlalchemy_begins_one(sqlite_engine: Engine) -> None:
    with sqlite_engine.connect() as conn, _cursor_statements() as seen:
        _INSERT.run(conn, _row("m1"))  # autobegin, as conn.execute does
        assert conn.in_transaction()
        conn.rollback()
        assert _CONTROL.rows(conn, {}) == []
    assert seen[0] == "BEGIN IMMEDIATE"


def _message(text: str) -> InboundMessage:
    return InboundMessage(
        session_key="cli:a", text=text, delivery=Delivery(channel="cli", chat_id="a")
    )


async def test_a_message_on_sqlite_runs_its_hot_statements_through_the_driver(
    tmp_path: Path,
) -> None:
    """publish, claim, the turn's begin and settle jobs, the delivery lease and mark."""
    store = Store(url=f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}")
    await store.open()
    bus = SqlBus(store=store)
    sessions = SessionStore(store=store)
    try:
        with _cursor_statements() as seen:
            message = _message("hi")
            await bus.publish_inbound(message)
            (claim,) = await bus.claim(owner="w", limit=5, lease_seconds=30)
            await store.transact(lambda conn: _begin(conn, sessions, claim))
            reply = OutboundMessage.answering(message, "hello")

            def settle(conn: Connection) -> bool:
                kept = bus.settle_in(conn, message.id, owner="w", reply=reply)
                answer = ChatMessage(role="assistant", content="hello")
                sessions.add_messages_in(
                    conn, key="cli:a", epoch=0, inbound_id=message.id, messages=[answer]
                )
                sessions.touch_in(conn, key="cli:a", added=2)
                EventLog.add_in(conn, [_event(message), _event(message)])
                return kept

            assert await store.transact(settle)
            (due,) = await bus.due_outbound("cli", limit=5, lease_seconds=30)
            assert due.message.text == "hello"
            assert await bus.mark_delivered(reply.id)
        assert [s for s in seen if s not in ("BEGIN IMMEDIATE", "COMMIT")] == []
        history = await sessions.get("cli:a")
        assert history is not None and history.message_count == 2
    finally:
        await store.close()


def _event(message: InboundMessage) -> Event:
    return Event(
        session_key="cli:a",
        message_id=message.id,
        data=UserMessage(text=message.text, origin=message.origin),
    )


def _begin(conn: Connection, sessions: SessionStore, claim: Claim) -> None:
    state = sessions.ensure_in(conn, "cli:a", "cli")
    history = sessions.begin_turn_in(conn, state, inbound_id=claim.message.id, text="hi")
    assert [h.message.content for h in history] == ["hi"]
    EventLog.add_in(conn, [_event(claim.message)])
