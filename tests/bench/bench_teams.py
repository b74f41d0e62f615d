"""Teams under load: N concurrent conversations, every activity acknowledged fast.

The real gateway (in this process, the Teams channel on the real Agents SDK) gets N
1:1 activities at once, each from its own user, POSTed to ``/api/messages`` with
signed Bot Framework tokens; the fake Teams connector runs in this process too, the
fake OpenAI-compatible model as a separate process with a fixed latency. Reports ack
time p50/p99/max (request sent -> 202), time to the last reply, how many typing
indicators were sent, and checks every conversation got exactly one message whose text
is the expected answer.

    python -m tests.bench.bench_teams [--n 200] [--latency-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.bench_slack import _start_model
from tests.fakes.fake_teams import FakeTeams, message
from tests.integration.teams_rig import gateway, overrides


def _replies(teams: FakeTeams) -> dict[str, list[str]]:
    """conversation -> the text of each message the bot sent there."""
    by_conversation: dict[str, list[str]] = {}
    for activity in teams.of("message"):
        by_conversation.setdefault(activity.conversation, []).append(activity.text)
    return by_conversation


async def run(n: int, latency_ms: int, base_url: str) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    logging.disable(logging.INFO)
    try:
        async with FakeTeams() as teams:
            config = overrides(teams, None)
            config["provider"] = {
                "kind": "openai", "base_url": base_url, "model": "fake-model",
                "api_key": "sk-fake", "max_retries": 0,
            }  # fmt: skip
            config["agent"]["max_concurrent_sessions"] = n
            async with gateway(home, teams, config) as gw:
                await gw.running()
                url = teams.service_url
                activities = [
                    message(f"conversation {i}", service_url=url, user=f"user{i}") for i in range(n)
                ]
                token = teams.token()  # as Teams reuses its token for an hour
                started = time.monotonic()
                acks = await asyncio.gather(*(gw.post(a, token=token) for a in activities))
                acked_all = time.monotonic() - started
                expected = {f"a:1-user{i}-personal": f"echo: conversation {i}" for i in range(n)}

                def answered() -> bool:
                    got = _replies(teams)
                    return all(got.get(c) == [e] for c, e in expected.items())

                async with asyncio.timeout(180):
                    while not answered():
                        await asyncio.sleep(0.02)
                total = time.monotonic() - started
                await asyncio.sleep(1.0)  # anything late (a second reply) shows up here
                got = _replies(teams)
    finally:
        logging.disable(logging.NOTSET)
        shutil.rmtree(home, ignore_errors=True)
    statuses = {status for status, _, _ in acks}
    times = sorted(seconds for _, seconds, _ in acks)
    once = sum(got.get(c) == [e] for c, e in expected.items())
    result = {
        "conversations": n,
        "model_latency_ms": latency_ms,
        "ack_statuses": sorted(statuses),
        "ack_p50_ms": round(statistics.median(times) * 1000, 1),
        "ack_p99_ms": round(times[max(0, int(len(times) * 0.99) - 1)] * 1000, 1),
        "ack_max_ms": round(times[-1] * 1000, 1),
        "all_acked_s": round(acked_all, 3),
        "answered_once": once,
        "replies_sent": sum(len(texts) for texts in got.values()),
        "typing_sent": len(teams.of("typing")),
        "connector_rejected": teams.rejected,
        "total_wall_s": round(total, 3),
    }
    assert statuses == {202}, result
    assert once == n and result["replies_sent"] == n, result
    assert teams.rejected == 0, result
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
