"""Hot statements on SQLite, run by the sqlite3 driver under the job's own connection.

Through ``Connection.execute`` a prebuilt statement costs ~11 us on SQLite, the same SQL
through the sqlite3 connection ~1.5 us, and a message runs about thirteen of them. A
`Prepared` statement is compiled once by SQLAlchemy's public compiler API for the
connection's dialect (SQL text, parameter order, the statement's literal values and
scalar column defaults, the bind and result processors of its types) and then run on
the driver connection SQLAlchemy documents for raw DBAPI work
(``Connection.connection.driver_connection``), inside the job's transaction. Any other
dialect or driver, any statement or parameter set the fast path does not cover, and
any call outside a transaction goes through ``Connection.execute``.

The fast path skips SQLAlchemy's cursor events, statement logging, ``handle_error``
hooks and execution options such as ``schema_translate_map`` (the writer's engine uses
none of them). A driver error is wrapped as SQLAlchemy wraps it (``DBAPIError.instance``:
the same classes, the driver's error as ``orig``), so `core.store.faults` reads its
SQLite result code either way; a disconnect invalidates the connection, as it would.
Only public, documented SQLAlchemy names are used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NoReturn

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Prepared"]

_Params = Mapping[str, Any]
_Processor = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    constants: dict[str, Any]
    """The statement's own bind values (literals, scalar column defaults), processed."""
    processors: tuple[tuple[str, _Processor], ...]
    """Bind processors of the caller's parameters."""
    args: Callable[[dict[str, Any]], Any]
    """The positional arguments, in the SQL's order, from the merged parameters."""
    results: tuple[_Processor | None, ...] | None
    """Result processors of the returned columns; None when no column has one."""
    returns_rows: bool
    """A SELECT, or a statement with RETURNING."""
    lastrowid: bool
    """An INSERT whose new primary key is the cursor's ``lastrowid``."""


class Prepared:
    """A prebuilt statement, run fast on SQLite; one method per kind of result.

    Parameters are passed as a mapping, as to ``Connection.execute``; a statement is
    compiled once per distinct set of parameter names (an INSERT's columns follow them).
    """

    __slots__ = ("_compiled", "statement")

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._compiled: dict[tuple[str, ...], _Compiled | None] = {}

    def run(self, conn: Connection, params: _Params) -> int:
        """Execute; the number of rows matched (``rowcount``)."""
        fast = self._fast(conn, params)
        if fast is None:
            return int(conn.execute(self.statement, params).rowcount)
        compiled, args = fast
        cursor = _execute(conn, compiled.sql, args)
        if compiled.returns_rows:
            cursor.fetchall()  # RETURNING: the statement finishes when its rows are read
        return int(cursor.rowcount)

    def rows(self, conn: Connection, params: _Params) -> list[tuple[Any, ...]]:
        """Execute; every returned row (a SELECT's or a RETURNING clause's)."""
        fast = self._fast(conn, params)
        if fast is None:
            return [tuple(row) for row in conn.execute(self.statement, params)]
        compiled, args = fast
        rows: list[tuple[Any, ...]] = _execute(conn, compiled.sql, args).fetchall()
        if compiled.results is None:
            return rows
        return [_processed(row, compiled.results) for row in rows]

    def first(self, conn: Connection, params: _Params) -> tuple[Any, ...] | None:
        """Execute; the first returned row, or None."""
        rows = self.rows(conn, params)
        return rows[0] if rows else None

    def insert(self, conn: Connection, params: _Params) -> Any:
        """Execute a one-row INSERT; the new row's primary key (None if none came back)."""
        fast = self._fast(conn, params)
        if fast is None or not fast[0].lastrowid:
            key = conn.execute(self.statement, params).inserted_primary_key
            return None if key is None else key[0]
        compiled, args = fast
        return _execute(conn, compiled.sql, args).lastrowid

    def many(self, conn: Connection, rows: Sequence[_Params]) -> None:
        """Execute once per parameter set (``executemany``); nothing is returned."""
        if len(rows) == 1:
            self.run(conn, rows[0])
            return
        compiled = self._compiled_for(conn, rows[0]) if rows else None
        args = None
        if compiled is not None and not compiled.returns_rows:
            try:
                args = [_arguments(compiled, row) for row in rows]
            except Exception:  # SQLAlchemy raises its own error for it
                args = None
        if compiled is None or args is None:
            conn.execute(self.statement, list(rows))
            return
        sql = compiled.sql
        try:
            conn.connection.driver_connection.executemany(sql, args)  # type: ignore[union-attr]
        except Exception as exc:
            _reraise(conn, exc, sql, args)

    def _compiled_for(self, conn: Connection, params: _Params) -> _Compiled | None:
        if conn.dialect.driver != "pysqlite" or not conn.in_transaction():
            # Outside a transaction SQLAlchemy would begin one (autobegin): let it.
            return None
        keys = tuple(params)
        try:
            return self._compiled[keys]
        except KeyError:
            compiled = self._compiled[keys] = _compile(self.statement, keys, conn.dialect)
            return compiled

    def _fast(self, conn: Connection, params: _Params) -> tuple[_Compiled, Any] | None:
        compiled = self._compiled_for(conn, params)
        if compiled is None:
            return None
        try:
            return compiled, _arguments(compiled, params)
        except Exception:  # a bad value: SQLAlchemy raises its own error for it
            return None


def _arguments(compiled: _Compiled, params: _Params) -> Any:
    merged = {**compiled.constants, **params}
    for key, process in compiled.processors:
        merged[key] = process(merged[key])
    return compiled.args(merged)


def _processed(row: tuple[Any, ...], results: tuple[_Processor | None, ...]) -> tuple[Any, ...]:
    return tuple(v if p is None else p(v) for v, p in zip(row, results, strict=True))


def _execute(conn: Connection, sql: str, args: Any) -> Any:
    try:
        return conn.connection.driver_connection.execute(sql, args)  # type: ignore[union-attr]
    except Exception as exc:
        _reraise(conn, exc, sql, args)


def _reraise(conn: Connection, exc: Exception, sql: str, args: Any) -> NoReturn:
    dialect = conn.dialect
    dbapi = dialect.loaded_dbapi
    if not isinstance(exc, dbapi.Error):
        raise exc
    gone = dialect.is_disconnect(exc, conn.connection.dbapi_connection, None)
    if gone:
        conn.invalidate(exc)
    wrapped = DBAPIError.instance(
        sql,
        args,
        exc,
        dbapi.Error,
        hide_parameters=True,
        connection_invalidated=gone,
        dialect=dialect,
        ismulti=isinstance(args, list),
    )
    raise wrapped from exc


def _compile(statement: Executable, keys: tuple[str, ...], dialect: Dialect) -> _Compiled | None:
    """The statement as the sqlite3 driver runs it, or None where the fast path would
    not be faithful (then ``Connection.execute`` runs it)."""
    compiled = statement.compile(dialect=dialect, column_keys=list(keys))  # type: ignore[attr-defined]
    if (
        not isinstance(compiled, SQLCompiler)
        or compiled.positiontup is None
        or compiled.literal_execute_params
        or compiled.post_compile_params
        or compiled.escaped_bind_names
        or compiled.update_prefetch
    ):
        return None
    defaults = {column.key: column.default for column in compiled.insert_prefetch}
    constants: dict[str, Any] = {}
    processors: list[tuple[str, _Processor]] = []
    for name in dict.fromkeys(compiled.positiontup):
        bind = compiled.binds[name]
        if name not in keys:
            if name in defaults:
                default = defaults[name]
                if default is None or not default.is_scalar:
                    return None  # a Python-side default computed per row
                constants[name] = default.arg  # type: ignore[attr-defined]
            elif bind.required or bind.callable is not None:
                return None  # a missing parameter: SQLAlchemy raises its own error
            else:
                constants[name] = bind.value
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is None:
            continue
        if name in constants:
            constants[name] = process(constants[name])
        else:
            processors.append((name, process))
    columns = list(getattr(statement, "exported_columns", ()))
    results = tuple(
        column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns
    )
    return _Compiled(
        sql=compiled.string,
        constants=constants,
        processors=tuple(processors),
        args=_positional(compiled.positiontup),
        results=results if any(p is not None for p in results) else None,
        returns_rows=bool(columns),
        lastrowid=_lastrowid(compiled, keys),
    )


def _positional(order: Sequence[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    if len(order) > 1:
        return itemgetter(*order)
    return lambda merged: tuple(merged[name] for name in order)


def _lastrowid(compiled: SQLCompiler, keys: tuple[str, ...]) -> bool:
    """Whether ``inserted_primary_key`` is the cursor's ``lastrowid``: a one-table
    INSERT without RETURNING that leaves its integer key to the database."""
    if not compiled.isinsert or compiled.effective_returning:
        return False
    table = getattr(compiled.statement, "table", None)
    column = table.autoincrement_column if isinstance(table, Table) else None
    return column is not None and column.key not in keys
