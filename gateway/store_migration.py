"""The store's migrations in a process of their own (``python -m gateway.daemon --migrate``).

The supervisor has the zygote fork this before it starts the roles. A store already at
the newest revision is recognised without alembic; migrating one imports alembic, mako
and pygments (~12 MiB), which the process that migrates keeps for as long as it runs.
Done here, that process exits at once, and the channels role (which opens the store
first) finds it migrated.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from core.errors import ConfigError, FamiliarError, StoreError
from core.store.engine import Store
from gateway.config import store_url
from gateway.init import LoadedHome, ready_home, unusable_home
from gateway.logging_setup import setup_logging
from gateway.process_table import EX_STORE, SUPERVISED_ENV

__all__ = ["migrate_store"]


async def migrate_store(home: Path, loaded: LoadedHome | None = None) -> int:
    """Open the store of ``home``, which brings it to the newest migration, and close it
    (``loaded``: the home as the supervisor prepared it, see `ready_home`).

    Returns:
        0 once the store is at the newest migration; 78 (EX_CONFIG) for bad
        configuration and 1 when the store cannot be opened or migrated (`EX_STORE`
        under the supervisor), with one line on stderr saying why, as a role says it.
    """
    try:
        config = (await ready_home(home, loaded)).config
    except (ConfigError, OSError) as exc:
        return unusable_home(home, exc)
    setup_logging(config.log)
    store = Store(url=store_url(home, config), config=config.store)
    try:
        await store.open()
    except (FamiliarError, OSError) as exc:
        print(f"familiar: cannot migrate the store: {' '.join(str(exc).split())}", file=sys.stderr)
        # The supervisor stops, rather than start roles on a store they cannot use.
        supervised = isinstance(exc, StoreError) and os.environ.get(SUPERVISED_ENV)
        return EX_STORE if supervised else 1
    await store.close()
    return 0
