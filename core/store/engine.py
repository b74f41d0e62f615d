"""The Store: an async SQLAlchemy engine, short write transactions, migrations at open."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Engine, RowMapping, Select, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError, IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from core.errors import ConfigError, StoreError, StoreFileError
from core.store.condition import ConditionHealth, StoreCondition
from core.store.config import StoreConfig
from core.store.faults import first_line
from core.store.health import ServerHealth, SqliteHealth, StoreHealth
from core.store.migrate import upgrade_to_head
from core.store.sqlite_file import no_create_url, prepare_sqlite_file, sqlite_path
from core.store.writer import Job, SqliteWriter, T, make_transactional

__all__ = ["Store"]

log = logging.getLogger(__name__)


class Store:
    """Owns the engines. Writes go through :meth:`transact`, reads through :meth:`read`.

    SQLite allows one writer at a time: every write is a job for the one writer thread
    (see :mod:`core.store.writer`), so in-process writers never contend for the file
    lock and the event loop never waits on it.
    """

    def __init__(self, *, url: str, config: StoreConfig | None = None) -> None:
        self.url = url
        self.config = config or StoreConfig()
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        self._engine: AsyncEngine | None = None
        self._autocommit: AsyncEngine | None = None
        self._writer: SqliteWriter | None = None
        self._health: StoreHealth | None = None
        self.path = sqlite_path(url) if self.dialect == "sqlite" else None
        """The SQLite database file (None on a server or in memory)."""
        self.schema = self.config.search_schema
        """PostgreSQL: the schema of this assistant's tables (None: the search path)."""
        if self.schema is not None and self.dialect != "postgresql":
            raise ConfigError(
                "store.schema is for PostgreSQL only (unset it, or set store.url to a "
                "postgresql+asyncpg:// database)",
                key="store.schema",
            )
        self.condition = StoreCondition(
            where=str(self.path) if self.path else parsed.render_as_string(hide_password=True),
            directory=self.path.parent if self.path else None,
        )
        """Out of space or lost, as this process saw it (see `core.store.condition`)."""

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def health(self) -> StoreHealth:
        """Checks on the open store (see `core.store.health`), behind its condition."""
        if self._health is None:
            raise StoreError("store is not open")
        return ConditionHealth(self._health, self.condition)

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise StoreError("store is not open")
        return self._engine

    async def open(self, *, migrate: bool = True) -> None:
        """Create the engine and bring the schema to the newest migration.

        An SQLite file is created private (0600) if missing and checked with
        ``PRAGMA quick_check`` first.

        Raises:
            StoreFileError: the SQLite file cannot be used (one line naming it).
            StoreError: the database refused the migration.
        """
        if self.path is not None:
            identity = await asyncio.to_thread(prepare_sqlite_file, self.path)
            self._health = await asyncio.to_thread(
                functools.partial(SqliteHealth, path=self.path, identity=identity)
            )
        kwargs: dict[str, Any] = {"echo": self.config.echo}
        if not self.is_sqlite:
            kwargs["pool_size"] = self.config.pool_size
            # A burst past the pool waits for a connection instead of opening more: with
            # overflow, six role processes could ask for 120 connections (PostgreSQL's
            # default max_connections is 100) and turns failed on "too many clients".
            kwargs["max_overflow"] = 0
        if self.schema is not None:
            # Every connection (pooled or not, the migrations' too) creates and finds its
            # tables in this schema: another assistant's tables are never used.
            # ``public`` after it: extensions (pgvector) live there by default.
            path = f'"{self.schema}", public'
            kwargs["connect_args"] = {"server_settings": {"search_path": path}}
        url = no_create_url(self.url, self.path) if self.path is not None else make_url(self.url)
        engine = create_async_engine(url, **kwargs)
        if self.is_sqlite:
            _sqlite_pragmas(engine.sync_engine, self.config.busy_timeout_ms)
        else:
            _replace_closed_connections(engine.sync_engine)
        self._engine = engine
        if not self.is_sqlite:
            # Reads on PostgreSQL need no transaction block (READ COMMITTED gives each
            # statement its own snapshot either way): that saves BEGIN and ROLLBACK round
            # trips. One-statement writes use it too (see `write_one`).
            self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        if migrate:
            try:
                if self.schema is not None:
                    await _create_schema(engine, self.schema)
                async with engine.begin() as conn:
                    await conn.run_sync(upgrade_to_head, self.schema)
            except (SQLAlchemyError, OSError) as exc:  # OSError: the server is unreachable
                await engine.dispose()
                self._engine = None
                if isinstance(self._health, SqliteHealth):
                    self._health.close()
                raise self._migration_error(exc) from exc
        if self._health is None:
            self._health = ServerHealth(engine=engine)
        if self.is_sqlite:
            sync_engine = create_engine(url.set(drivername="sqlite"))
            _sqlite_pragmas(sync_engine, self.config.busy_timeout_ms)
            make_transactional(sync_engine)
            lock = self.path.with_name(self.path.name + "-writer.lock") if self.path else None
            self._writer = SqliteWriter(engine=sync_engine, lock_path=lock)
            self._writer.start()
        log.info("store open dialect=%s", self.dialect)

    def _migration_error(self, exc: SQLAlchemyError | OSError) -> StoreError:
        cause = first_line(exc)
        if self.path is not None:
            return StoreFileError(str(self.path), f"cannot be migrated ({cause})")
        return StoreError(f"the database {self.condition.where}: {cause}")

    async def transact(self, job: Job[T]) -> T:
        """Run ``job(connection)`` in a write transaction and return its result.

        The hot path writes this way: on SQLite jobs are group-committed by one writer
        thread; on PostgreSQL each job is its own transaction on the async engine.
        """
        with self.condition.guard():
            if self._writer is not None:
                result = await self._writer.submit(job)
            else:
                async with self.engine.begin() as conn:
                    result = await conn.run_sync(job)
        self.condition.wrote()
        return result

    async def write_one(self, job: Job[T]) -> T:
        """Run ``job``, which writes with ONE statement (atomic by itself), and return its
        result.

        On PostgreSQL the statement runs outside a transaction block: no ``BEGIN`` and
        ``COMMIT`` round trips, which is most of the cost of a one-statement write (the
        hot path's claims, delivery marks and leases). On SQLite it is `transact`.
        """
        if self._autocommit is None:
            return await self.transact(job)
        with self.condition.guard():
            async with self._autocommit.connect() as conn:
                result = await conn.run_sync(job)
        self.condition.wrote()
        return result

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.close()
            self._writer = None
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None
            self._autocommit = None
        if isinstance(self._health, SqliteHealth):
            self._health.close()  # after SQLite's connections: it holds no lock now
        self._health = None

    async def fetch(self, query: Select[Any]) -> Sequence[RowMapping]:
        """Run a read ``query`` and return its rows as mappings of their columns."""
        async with self.read() as conn:
            rows: Sequence[RowMapping] = (await conn.execute(query)).mappings().all()
        return rows

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads (never committed).

        A Core connection, not an ORM session: a session's first query costs each
        process a few MiB of ORM machinery, and every read here is a Core statement.
        """
        with self.condition.guard():
            async with (self._autocommit or self.engine).connect() as conn:
                yield conn


async def _create_schema(engine: AsyncEngine, schema: str) -> None:
    """Create ``schema`` unless it exists (its name is checked by `StoreConfig`)."""
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    except IntegrityError:
        pass  # another process created it at the same moment: IF NOT EXISTS is not atomic


def _replace_closed_connections(engine: Engine) -> None:
    """A pooled connection the server closed (a restart, an idle timeout, a terminated
    backend) is replaced when it is checked out.

    What ``pool_pre_ping`` is for, without its cost: through asyncpg, the ping is three
    round trips (``BEGIN``, the ping, ``ROLLBACK``) on every checkout, as many as the
    hot path's one-statement writes themselves. asyncpg notices a closed socket while
    the connection idles in the pool, so checking its state is enough; a connection
    that dies in use fails that use, and SQLAlchemy then drops the pool's connections.
    """

    @event.listens_for(engine, "checkout")
    def _closed(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        driver = getattr(dbapi_conn, "driver_connection", None)
        if driver is not None and driver.is_closed():
            raise DisconnectionError("the database server closed this connection")


def _sqlite_pragmas(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        for pragma in (
            "journal_mode=WAL",
            f"busy_timeout={busy_timeout_ms}",
            "foreign_keys=ON",
            "synchronous=NORMAL",
        ):
            cur.execute(f"PRAGMA {pragma}")
        cur.close()
