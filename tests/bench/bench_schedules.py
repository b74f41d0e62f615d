"""Create, list and start 10,000 schedules; print how long each step takes.

Run: ``.venv/bin/python -m tests.bench.bench_schedules [--count N] [--store-url URL]``
(default: a fresh SQLite file in a temporary directory; an empty PostgreSQL database
works too). Creation is idempotent per asking message, so each create has its own
message; the rows really created are counted and must equal ``--count``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select

from core.bus.sql import SqlBus
from core.events import EventLog
from core.messages import Delivery, InboundMessage, utcnow
from core.scheduling import SchedulerConfig, ScheduleService, validate_spec
from core.store.engine import Store
from core.store.models import ScheduleRow

KINDS = (("every", "1h"), ("cron", "*/30 * * * *"), ("after", "1d"), ("every", "10m"))


def _service(store: Store) -> ScheduleService:
    return ScheduleService(
        config=SchedulerConfig(timezone="UTC"),
        store=store,
        bus=SqlBus(store=store),
        events=EventLog(store=store),
    )


async def bench(count: int, store_url: str, concurrency: int) -> None:
    store = Store(url=store_url)
    await store.open()
    service = _service(store)
    await service.start()
    now = utcnow()
    specs = [
        validate_spec(kind, spec, f"prompt {i}", tz=None, now=now, default_tz="UTC")
        for i, (kind, spec) in enumerate(KINDS)
    ]
    # One asking message per schedule, spread over 100 sessions.
    origins = [
        InboundMessage(
            session_key=f"bench:{i % 100}", text="/x", delivery=Delivery(channel="bench")
        )
        for i in range(count)
    ]
    semaphore = asyncio.Semaphore(concurrency)

    async def create(i: int) -> None:
        async with semaphore:
            await service.create(origins[i], specs[i % len(specs)])

    started = time.perf_counter()
    await asyncio.gather(*(create(i) for i in range(count)))
    created = time.perf_counter() - started
    rows = await _count_rows(store)
    started = time.perf_counter()
    listed = await service.list()
    listing = time.perf_counter() - started
    started = time.perf_counter()
    one_session = await service.list("bench:7")
    session_listing = time.perf_counter() - started
    await service.stop()

    restarted = _service(store)
    started = time.perf_counter()
    await restarted.start()
    startup = time.perf_counter() - started
    await restarted.stop()
    await store.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"store: {store.dialect}  schedules: {count}  concurrency: {concurrency}")
    print(f"rows created:     {rows}")
    print(f"create:           {created:7.2f} s  ({count / created:,.0f}/s)")
    print(f"list all:         {listing * 1000:7.1f} ms  ({len(listed)} rows)")
    print(f"list one session: {session_listing * 1000:7.1f} ms  ({len(one_session)} rows)")
    print(f"start (load+arm): {startup * 1000:7.1f} ms")
    print(f"peak RSS:         {rss_mb:7.1f} MiB")
    assert rows == count, f"asked for {count} schedules, {rows} rows were created"


async def _count_rows(store: Store) -> int:
    async with store.read() as conn:
        query = select(func.count()).select_from(ScheduleRow.__table__)  # type: ignore[attr-defined]
        return int((await conn.execute(query)).scalar_one())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--store-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store_url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        asyncio.run(bench(args.count, url, args.concurrency))


if __name__ == "__main__":
    main()
