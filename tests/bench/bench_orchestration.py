"""/fleet and /research with a model of fixed latency: what parallel delegation buys.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_orchestration [--todos 6]
[--latency-ms 200]``. An in-process core on SQLite talks to the loopback OpenAI fake.
Shapes, each on a fresh store:

- ``fleet``: ``/fleet`` with N independent todos and one that depends on all of them;
  the model adds them, starts the ready ones, and the run waits for its agents.
- ``fleet-chain``: the same N + 1 todos, each depending on the one before (no
  parallelism possible), for comparison.
- ``research``: ``/research`` with N parallel ``research`` children, a report written,
  then ``task_complete``.

It prints the wall time of the command's message, its LLM calls, the agents that ran
and the todos done (or the report's size), so a fast number cannot come from skipped work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tools.config import ToolsConfig
from core.tools.subagents_config import SubagentsConfig
from tests.fakes.fake_openai import FakeOpenAI, ScriptItem
from tests.integration.harness import inbound, running_core

MAIN = "bench:orchestrate"


def _todos(shape: str, count: int) -> list[tuple[str, list[str]]]:
    ids = [f"t{i}" for i in range(count)]
    if shape == "fleet-chain":
        return [(t, [ids[i - 1]] if i else []) for i, t in enumerate([*ids, "final"])]
    return [*[(t, []) for t in ids], ("final", ids)]


def _fleet(shape: str, count: int) -> Any:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return "done: " + str(messages[-1].get("content"))[:40]
        last = messages[-1]
        text = str(last.get("content"))
        if last.get("role") == "user" and "Fleet request" in text:
            adds = [
                ("todo", {"action": "add", "id": t, "title": f"step {t}", "depends_on": d})
                for t, d in _todos(shape, count)
            ]
            return [*adds, ("todo", {"action": "start"})]
        if last.get("role") == "tool":
            return "waiting"
        if "Ready to start now" in text:
            return [("todo", {"action": "start"})]
        if "Still running" in text:
            return "waiting"
        return [("task_complete", {"summary": "all done"})]

    return respond


def _research(count: int) -> Any:
    def respond(session: str | None, messages: list[dict[str, Any]]) -> ScriptItem:
        if session and session.startswith("subagent:"):
            return "finding (source: docs/x.md) for " + str(messages[-1].get("content"))[:40]
        prompt = next(str(m["content"]) for m in messages if m.get("role") == "user")
        report = re.search(r"`(research/[a-z0-9-]+\.md)`", prompt)
        assert report is not None
        steps = sum(1 for m in messages if m.get("role") == "assistant")
        if steps == 0:
            return [
                ("sessions_spawn", {"agent_type": "research", "prompt": f"thread {i}"})
                for i in range(count)
            ]
        if steps == 1:
            found = [json.loads(str(m["content"]))["result"] for m in messages[-count:]]
            body = "# Report\n\n" + "\n".join(f"- {f}" for f in found)
            return [("write_file", {"path": report.group(1), "content": body})]
        return [("task_complete", {"summary": f"report in {report.group(1)}"})]

    return respond


async def _run(shape: str, count: int, latency: float) -> dict[str, Any]:
    tools = ToolsConfig(subagents=SubagentsConfig(max_concurrent=max(8, count + 1)))
    responder = _research(count) if shape == "research" else _fleet(shape, count)
    root = Path(tempfile.mkdtemp(prefix="fam-bench-orch-"))
    try:
        async with FakeOpenAI(latency=latency, responder=responder) as fake:
            provider = OpenAIProvider(
                config=ProviderConfig(kind="openai", base_url=fake.base_url, model="fake")
            )
            async with running_core(
                store_url=f"sqlite+aiosqlite:///{root / 'familiar.db'}",
                workspace=root / "ws",
                provider=provider,
                tools=tools,
            ) as (app, replies):
                text = "/research parallel queues" if shape == "research" else "/fleet ship"
                start = time.perf_counter()
                message = inbound(MAIN, text)
                await app.bus.publish_inbound(message)
                await replies.wait([message.id], timeout=600)
                wall = time.perf_counter() - start
                tasks = await app.tasks.repo.list(owner_key=MAIN)
                assert app.orchestration is not None
                todos = await app.orchestration.todos.list(MAIN)
                report = root / "ws" / "research" / "parallel-queues.md"
                return {
                    "shape": shape,
                    "wall": wall,
                    "calls": len(fake.log),
                    "main_calls": sum(e["session"] == MAIN for e in fake.log),
                    "agents": sum(t.status == "completed" for t in tasks),
                    "done": sum(t.status == "done" for t in todos),
                    "report": report.stat().st_size if report.exists() else 0,
                }
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def main(count: int, latency_ms: float, shapes: list[str]) -> None:
    print(f"{count} todos / threads, model latency {latency_ms:g} ms per call")
    print(
        f"{'shape':<12} {'wall':>8} {'LLM calls':>10} {'main calls':>11} {'agents':>7} "
        f"{'todos done':>11} {'report bytes':>13}"
    )
    for shape in shapes:
        r = await _run(shape, count, latency_ms / 1000)
        print(
            f"{r['shape']:<12} {r['wall']:>7.2f}s {r['calls']:>10} {r['main_calls']:>11} "
            f"{r['agents']:>7} {r['done']:>11} {r['report']:>13}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--todos", type=int, default=6)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument(
        "--shapes", nargs="+", default=["fleet", "fleet-chain", "research"],
        choices=["fleet", "fleet-chain", "research"],
    )  # fmt: skip
    args = parser.parse_args()
    asyncio.run(main(args.todos, args.latency_ms, args.shapes))
