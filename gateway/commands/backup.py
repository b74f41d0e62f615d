"""``familiar backup PATH``: a consistent copy of the database, safe while the gateway runs."""

from __future__ import annotations

from pathlib import Path

import click
from sqlalchemy.engine import make_url

from core.errors import ConfigError, StoreError
from core.store.backup import backup_sqlite
from core.store.sqlite_file import sqlite_path
from gateway.commands.common import fail, home_option, resolve_home
from gateway.config import load_config, store_url
from gateway.masking import mask_url

__all__ = ["backup"]


def _pg_dump_advice(url: str, target: Path, schema: str | None = None) -> str:
    """The ``pg_dump`` command that backs up the database of ``url`` (password masked),
    or only this assistant's ``schema`` (``store.schema``) of it."""
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    only = f"--schema '{schema}' " if schema else ""
    return (
        "the store is PostgreSQL: familiar does not copy it itself; back it up with pg_dump "
        "(the password comes from PGPASSWORD or ~/.pgpass):\n"
        f"  pg_dump --format=custom {only}--file '{target}' '{mask_url(plain)}'"
    )


@click.command("backup")
@click.argument("path", type=click.Path(path_type=Path), help="The file to write the copy to.")
@click.option("--force", is_flag=True, help="Replace PATH if it exists.")
@home_option
def backup(path: Path, force: bool, home: Path | None) -> None:
    """On PostgreSQL, prints the pg_dump command to use instead."""
    home_dir = resolve_home(home)
    try:
        config = load_config(home_dir)
        url = store_url(home_dir, config)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    target = path.expanduser().absolute()
    source = sqlite_path(url)
    if source is None:
        if make_url(url).get_backend_name() == "postgresql":
            click.echo(_pg_dump_advice(url, target, config.store.search_schema))
            return
        raise fail(f"nothing to back up: the store {mask_url(url)} is not a database file")
    try:
        result = backup_sqlite(source, target, force=force)
    except StoreError as exc:
        raise fail(str(exc)) from None
    rows = ", ".join(f"{table} {count}" for table, count in result.rows.items())
    click.echo(f"wrote {result.path} ({result.size} bytes) from {source}")
    click.echo(f"rows: {rows or 'no tables'}")
