"""``familiar doctor``'s store checks: the database is there, private and sound.

Run locally, without the gateway: SQLite is opened read-only and read through by
``PRAGMA quick_check``; PostgreSQL answers ``SELECT 1``.
"""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from core.errors import StoreError
from core.store.condition import FULL_BELOW
from core.store.engine import Store
from core.store.faults import free_bytes
from core.store.sqlite_file import quick_check, sqlite_path
from gateway.commands.doctor_check import Check
from gateway.config import FamiliarConfig, store_url
from gateway.init import RUN_DIR
from gateway.masking import mask_url

__all__ = ["store_checks"]

_NAME = "store healthy"
_LOCK = "gateway.lock"  # left behind by every gateway that ran on the home


async def store_checks(home: Path, config: FamiliarConfig | None) -> list[Check]:
    """The store's checks (none when the config is invalid: that check already failed)."""
    if config is None:
        return []
    url = store_url(home, config)
    path = sqlite_path(url)
    if path is not None:
        return await asyncio.to_thread(_sqlite_checks, home, path)
    return [await _server_check(url, config)]


def _sqlite_checks(home: Path, path: Path) -> list[Check]:
    if not path.exists():
        if (home / RUN_DIR / _LOCK).exists():
            reason = (
                f"{path} is missing, but a gateway has run on this home: the next start "
                "creates an empty database; restore it from a backup (familiar backup) first"
            )
            return [Check(_NAME, False, reason)]
        return [Check(_NAME, True, f"{path} not created yet (the gateway creates it)")]
    if not path.is_file():
        return [Check(_NAME, False, f"{path} is not a file: move it away")]
    problem = quick_check(path, read_only=True)
    health = Check(_NAME, problem is None, f"{path} {problem or 'passes quick_check'}")
    return [health, _private_check(path), _space_check(path)]


def _space_check(path: Path) -> Check:
    """Room on the database's disk: a full disk makes the gateway refuse new messages."""
    name = "store disk space"
    try:
        free = free_bytes(path.parent)
    except OSError as exc:
        return Check(name, False, f"cannot check {path.parent}: {exc.strerror}")
    where = f"{free / 2**20:.1f} MiB free on the disk of {path.parent}"
    if free < FULL_BELOW:
        return Check(name, False, f"{where}: the disk is full; new messages are refused")
    return Check(name, True, where)


def _private_check(path: Path) -> Check:
    name = "store files private"
    loose = []
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = stat.S_IMODE(candidate.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            loose.append(f"{candidate.name} {mode:04o}")
    if loose:
        reason = f"readable by others: {', '.join(loose)} (the gateway tightens them at start)"
        return Check(name, False, reason)
    return Check(name, True, "owner only (0600)")


async def _server_check(url: str, config: FamiliarConfig) -> Check:
    store = Store(url=url, config=config.store)
    try:
        await store.open(migrate=False)
        status = await store.health.check()
    except (StoreError, OSError, ImportError) as exc:
        return Check(_NAME, False, f"{mask_url(url)}: {exc}")
    finally:
        await store.close()
    return Check(_NAME, status.ok, f"{mask_url(url)}: {status.detail}")
