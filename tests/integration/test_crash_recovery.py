"""kill -9 mid-turn loses no accepted message and makes no second final reply."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlmodel import select

from core.bus.sql import SqlBus
from core.bus.tables import InboundRow, OutboundRow
from core.store.engine import Store
from tests.fakes.fake_openai import FakeOpenAI
from tests.integration.harness import inbound
from tests.waiting import eventually

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


async def _spawn(store_url: str, ws: Path, base_url: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.core_worker",
        store_url,
        str(ws),
        base_url,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    async with asyncio.timeout(60):
        assert (await proc.stdout.readline()).strip() == b"READY"
    return proc


async def test_sigkill_mid_turn_then_restart(store_url: str, tmp_path: Path) -> None:
    store = Store(url=store_url)
    await store.open()
    bus = SqlBus(store=store)
    async with FakeOpenAI() as fake:
        slow = inbound("cli:crash", "!sleep 1.5")
        after = inbound("cli:crash", "and then this")
        others = [inbound(f"cli:o{i}", f"other {i}") for i in range(5)]
        for m in (slow, after, *others):
            await bus.publish_inbound(m)
        proc = await _spawn(store_url, tmp_path / "ws", fake.base_url)

        async def slow_in_flight() -> bool:
            return any("!sleep" in str(r["messages"][-1]) for r in fake.requests)

        await eventually(slow_in_flight, timeout=60, what="the slow turn calls the LLM")
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

        async with store.read() as conn:
            query = select(InboundRow.status).where(InboundRow.id == slow.id)
            status = (await conn.execute(query)).scalar_one()
        assert status == "claimed"  # the kill really happened mid-turn

        proc = await _spawn(store_url, tmp_path / "ws", fake.base_url)
        try:
            ids = {m.id for m in (slow, after, *others)}

            async def all_done() -> bool:
                async with store.read() as conn:
                    rows = (await conn.execute(select(InboundRow.id, InboundRow.status))).all()
                return all(st == "done" for i, st in rows if i in ids)

            await eventually(all_done, timeout=60, what="every message is done")
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
    async with store.read() as conn:
        replies = (await conn.execute(select(OutboundRow.inbound_id, OutboundRow.payload))).all()
    await store.close()
    per_inbound = Counter(i for i, _ in replies)
    assert set(per_inbound) == ids
    assert all(n == 1 for n in per_inbound.values())
    texts = {i: p for i, p in replies}
    assert "echo: and then this" in texts[after.id]
