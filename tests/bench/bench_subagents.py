"""Fan-out to subagents: a parent starts N children in one model response.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_subagents [--children 8]
[--latency-ms 200]``. An in-process core on SQLite talks to the loopback OpenAI fake
with a fixed model latency. Three shapes of the same work, each on a fresh store:

- ``sync``: N ``sync`` spawns in one response (run concurrently); the parent's answer
  carries every child's result.
- ``sync-serial``: the same with ``tools.parallel_tools = []`` (one child after the
  other), the old behaviour, for comparison.
- ``background``: N ``background`` spawns; the parent answers at once, each child's
  handoff arrives as a message the parent then answers (one at a time: one session).

It prints, per shape, the wall time until the children are done and until the parent
has answered everything, and what was really done (LLM requests, children completed,
results that reached the parent), so a fast number cannot come from skipped work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tasks.handoff import HANDOFF_MARKER
from core.tools.config import ToolsConfig
from core.tools.subagents_config import SubagentsConfig
from tests.fakes.fake_openai import FakeOpenAI, ScriptItem
from tests.integration.harness import inbound, running_core

PARENT = "bench:parent"


@dataclass(frozen=True)
class Result:
    shape: str
    children_s: float
    parent_s: float
    requests: int
    completed: int
    results_seen: int


def _responder(children: int, mode: str) -> Any:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        last = messages[-1]
        users = [m for m in messages if m.get("role") == "user"]
        user = str(users[-1].get("content") or "") if users else ""
        if session and session.startswith("subagent:"):
            return f"child result for {user}"
        if last.get("role") == "tool":
            return "parent done"
        if user.startswith(HANDOFF_MARKER):
            return "parent noted a handoff"
        return [
            (
                "sessions_spawn",
                {"agent_type": "general-purpose", "prompt": f"part {i}", "mode": mode},
            )
            for i in range(children)
        ]

    return respond


async def _run(shape: str, children: int, latency: float) -> Result:
    mode = "background" if shape == "background" else "sync"
    tools = ToolsConfig(subagents=SubagentsConfig(max_concurrent=max(8, children)))
    if shape == "sync-serial":
        tools = tools.model_copy(update={"parallel_tools": []})
    root = Path(tempfile.mkdtemp(prefix="fam-bench-sub-"))
    try:
        async with FakeOpenAI(latency=latency, responder=_responder(children, mode)) as fake:
            provider = OpenAIProvider(
                config=ProviderConfig(kind="openai", base_url=fake.base_url, model="fake")
            )
            async with running_core(
                store_url=f"sqlite+aiosqlite:///{root / 'familiar.db'}",
                workspace=root / "ws",
                provider=provider,
                tools=tools,
            ) as (app, replies):
                start = time.perf_counter()
                message = inbound(PARENT, "fan out")
                await app.bus.publish_inbound(message)
                (reply,) = await replies.wait([message.id], timeout=600)
                while True:
                    tasks = await app.tasks.repo.list(owner_key=PARENT)
                    if len(tasks) == children and all(t.status == "completed" for t in tasks):
                        break
                    await asyncio.sleep(0.005)
                children_s = max(t.finished_at or 0 for t in tasks) - min(
                    t.created_at for t in tasks
                )
                if mode == "background":
                    expected = children + 1
                    while sum(r.session_key == PARENT for r in replies.by_inbound.values()) < (
                        expected
                    ):
                        await asyncio.sleep(0.005)
                parent_s = time.perf_counter() - start
                history = await app.sessions.all_history(PARENT)
                if mode == "sync":
                    seen = sum(
                        json.loads(m.content).get("status") == "completed"
                        for m in history
                        if m.role == "tool"
                    )
                else:
                    seen = sum(m.content.startswith(HANDOFF_MARKER) for m in history)
                assert reply.text, "the parent answered"
                return Result(
                    shape=shape,
                    children_s=children_s,
                    parent_s=parent_s,
                    requests=len(fake.log),
                    completed=sum(t.status == "completed" for t in tasks),
                    results_seen=seen,
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def main(children: int, latency_ms: float, shapes: list[str]) -> None:
    latency = latency_ms / 1000
    print(f"fan-out to {children} children, model latency {latency_ms:g} ms per call")
    print(
        f"{'shape':<12} {'children done':>14} {'parent done':>12} {'LLM calls':>10} "
        f"{'completed':>10} {'results in parent':>18}"
    )
    for shape in shapes:
        r = await _run(shape, children, latency)
        print(
            f"{r.shape:<12} {r.children_s:>13.2f}s {r.parent_s:>11.2f}s {r.requests:>10} "
            f"{r.completed:>10} {r.results_seen:>18}"
        )
    print(f"(one child alone costs about {latency_ms:g} ms of model time)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument(
        "--shapes", nargs="+", default=["sync", "sync-serial", "background"],
        choices=["sync", "sync-serial", "background"],
    )  # fmt: skip
    args = parser.parse_args()
    asyncio.run(main(args.children, args.latency_ms, args.shapes))
