"""CPU per message of the bus and the turn's store writes, in one process, on SQLite.

The real bus, agent loop and store with the scripted provider (no LLM process, no
network): N sessions with one message each, published at once, answered and delivered;
the figure is this process's CPU over the burst divided by N, taken over ``--rounds``
bursts (the lowest and the median are printed: the machine's noise only adds). It
isolates what the store path costs a message, which the full benchmarks see through
the noise of the daemon, the senders and the fake LLM. With ``--count`` it also counts
the SQL statements a message costs (SQLAlchemy's ``before_cursor_execute`` event).

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_bus_cpu`` (``--n 500
--rounds 7``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from core.agent.config import AgentConfig
from core.app import build_core
from core.providers.scripted import ScriptedProvider
from core.tools.config import ToolsConfig
from tests.integration.harness import Replies, inbound


async def _burst(app: Any, replies: Replies, n: int, tag: str) -> float:
    msgs = [inbound(f"bench:{tag}:{i}", f"{tag} message {i}") for i in range(n)]
    cpu0 = time.process_time()
    await asyncio.gather(*(app.bus.publish_inbound(m) for m in msgs))
    got = await replies.wait([m.id for m in msgs], timeout=600)
    cpu = time.process_time() - cpu0
    wrong = [r.text for m, r in zip(msgs, got, strict=True) if r.text != f"echo: {m.text}"]
    assert not wrong, f"{len(wrong)} replies are not the echo of their message: {wrong[:3]}"
    return cpu / n * 1000


async def _main(n: int, rounds: int, count: bool) -> None:
    statements: Counter[str] = Counter()

    def counted(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements[statement.split(None, 1)[0].upper()] += 1

    with tempfile.TemporaryDirectory() as tmp:
        app = await build_core(
            store_url=f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}",
            workspace=Path(tmp) / "workspace",
            agent=AgentConfig(max_concurrent_sessions=n),
            tools=ToolsConfig(),
            provider=ScriptedProvider(),
        )
        replies = Replies(app)
        pump = asyncio.create_task(replies.pump())
        await app.start()
        try:
            await _burst(app, replies, 10, "warm")  # first compile of each statement
            if count:
                event.listen(Engine, "before_cursor_execute", counted)
            per_message = [await _burst(app, replies, n, f"r{r}") for r in range(rounds)]
        finally:
            pump.cancel()
            await app.stop(grace=1)
    print(
        f"n={n} rounds={rounds} cpu_ms_per_msg min={min(per_message):.3f} "
        f"median={statistics.median(per_message):.3f} all={[round(x, 3) for x in per_message]}"
    )
    if count:
        total = n * rounds
        per = {kind: round(c / total, 2) for kind, c in statements.most_common()}
        print(f"statements per message: {round(sum(statements.values()) / total, 2)} {per}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=500, help="sessions (messages) per burst")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--count", action="store_true", help="count SQL statements too")
    args = parser.parse_args()
    asyncio.run(_main(args.n, args.rounds, args.count))


if __name__ == "__main__":
    main()
