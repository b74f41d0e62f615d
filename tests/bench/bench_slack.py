"""Slack http mode under load: N concurrent threads, every event acked within Slack's 3 s.

The real gateway (in this process, Slack channel in http mode) answers N @-mentions,
each in its own channel thread, posted at once as signed Events API requests; the
fake Slack Web API runs in this process too, the fake OpenAI-compatible model as a
separate process with a fixed latency. Reports ack time p50/p99/max (request sent ->
HTTP answer), time to the last reply, and checks every thread got exactly one message
whose final text is the expected answer.

    python -m tests.bench.bench_slack [--n 200] [--latency-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fakes.fake_slack import FakeSlack, event_body
from tests.integration.slack_rig import gateway, mention, overrides

ROOT = Path(__file__).resolve().parents[2]


def _start_model(latency_ms: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0",
         "--latency-ms", str(latency_ms)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{proc.stdout.readline().split()[1]}/v1"


def _final_texts(slack: FakeSlack) -> dict[str, list[str]]:
    """thread ts -> the final text of each message the bot posted in it."""
    final: dict[str, str] = {}  # message ts -> latest text
    thread_of: dict[str, str] = {}
    ts_iter = iter(range(1, 10**9))
    for call in slack.api_calls:
        if call.method == "chat.postMessage":
            ts = f"{1_700_000_000 + next(ts_iter)}.000100"
            thread_of[ts] = str(call.args.get("thread_ts"))
            final[ts] = str(call.args["text"])
        elif call.method == "chat.update":
            final[str(call.args["ts"])] = str(call.args["text"])
    by_thread: dict[str, list[str]] = {}
    for ts, thread in thread_of.items():
        by_thread.setdefault(thread, []).append(final[ts])
    return by_thread


async def run(n: int, latency_ms: int, base_url: str) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    logging.disable(logging.INFO)
    try:
        async with FakeSlack() as slack:
            config = overrides(slack, None)
            config["provider"] = {
                "kind": "openai", "base_url": base_url, "model": "fake-model",
                "api_key": "sk-fake", "max_retries": 0,
            }  # fmt: skip
            config["agent"]["max_concurrent_sessions"] = n
            async with gateway(home, config) as gw:
                await gw.running()
                bodies = [event_body(mention(f"thread {i}", ts=f"{1000 + i}.5")) for i in range(n)]
                started = time.monotonic()
                acks = await asyncio.gather(*(gw.post_event(b) for b in bodies))
                acked_all = time.monotonic() - started
                expected = {f"{1000 + i}.5": f"echo: thread {i}" for i in range(n)}

                def answered() -> bool:
                    texts = _final_texts(slack)
                    return all(texts.get(t) == [e] for t, e in expected.items())

                async with asyncio.timeout(120):
                    while not answered():
                        await asyncio.sleep(0.02)
                total = time.monotonic() - started
                await asyncio.sleep(1.0)  # anything late (a second reply) shows up here
                texts = _final_texts(slack)
    finally:
        logging.disable(logging.NOTSET)
        shutil.rmtree(home, ignore_errors=True)
    statuses = {status for status, _, _ in acks}
    times = sorted(seconds for _, seconds, _ in acks)
    once = sum(texts.get(t) == [e] for t, e in expected.items())
    placeholders = sum(
        1 for c in slack.api_calls if c.method == "chat.update"
    )  # edits (placeholder progress and the final replacement)
    result = {
        "threads": n,
        "model_latency_ms": latency_ms,
        "ack_statuses": sorted(statuses),
        "ack_p50_ms": round(statistics.median(times) * 1000, 1),
        "ack_p99_ms": round(times[max(0, int(len(times) * 0.99) - 1)] * 1000, 1),
        "ack_max_ms": round(times[-1] * 1000, 1),
        "all_acked_s": round(acked_all, 3),
        "answered_once": once,
        "chat_updates": placeholders,
        "total_wall_s": round(total, 3),
    }
    assert statuses == {200}, result
    assert times[-1] < 3.0, result
    assert once == n, result
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--latency-ms", type=int, default=200)
    args = parser.parse_args(argv)
    model, base_url = _start_model(args.latency_ms)
    try:
        print(json.dumps(asyncio.run(run(args.n, args.latency_ms, base_url))), flush=True)
    finally:
        model.terminate()
        model.wait(10)


if __name__ == "__main__":
    main()
