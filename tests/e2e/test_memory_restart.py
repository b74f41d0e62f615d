"""Memory through the real daemon process: remember, stop the daemon, start it, recall.

The fake model (a separate process) calls ``remember`` and later ``recall`` as told by
``!tool NAME ARGS`` messages; the test reads back the tool results that model received
(``GET /_fake/requests``). Runs on SQLite and on PostgreSQL (``store_url``).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.e2e.test_daemon_process import Daemon, _wait_status, daemon, fake_openai

pytestmark = pytest.mark.slow

FACT = "The spare key to the cellar is taped under the blue flowerpot"
SESSION = "cli:keeper"


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _write_config(home: Path, base_url: str, store_url: str) -> None:
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\nmodel = "fake-model"\n'
        f'api_key = "sk-test"\n\n[http]\nport = 0\n\n[store]\nurl = "{store_url}"\n'
    )


async def _tool_results(base_url: str) -> list[str]:
    url = base_url.removesuffix("/v1") + "/_fake/requests"
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        assert response.status == 200
        found: list[str] = (await response.json())["tool_results"]
    return found


async def _ask(d: Daemon, text: str) -> dict[str, Any]:
    """Send ``text`` to the session and wait until its reply is delivered."""
    message_id = await d.submit(SESSION, text)
    try:
        async with asyncio.timeout(90):
            return await _wait_status(d, message_id, "done")
    except TimeoutError:
        raise AssertionError(f"no reply to {text!r}:\n{d.logs()}") from None


async def _remember(d: Daemon, base_url: str) -> int:
    args = json.dumps({"text": FACT, "tags": ["house"]})
    got = await _ask(d, f"!tool remember {args}")
    assert got["reply"]["kind"] == "reply", got
    results = await _tool_results(base_url)
    assert results, d.logs()
    found = re.fullmatch(r"Remembered as #(\d+) \(cli:keeper\)\.", results[-1])
    assert found is not None, results
    return int(found.group(1))


async def _recall(d: Daemon, base_url: str) -> list[dict[str, Any]]:
    before = len(await _tool_results(base_url))
    got = await _ask(d, '!tool recall {"query": "where is the cellar key"}')
    assert got["reply"]["kind"] == "reply", got
    results = await _tool_results(base_url)
    assert len(results) == before + 1, results
    assert not results[-1].startswith("error:"), results[-1]
    recalled: list[dict[str, Any]] = json.loads(results[-1])
    return recalled


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
async def test_remember_then_recall_across_a_daemon_restart(
    home: Path, store_url: str, stop: str
) -> None:
    async with fake_openai() as base_url:
        _write_config(home, base_url, store_url)
        async with daemon(home) as d:
            await d.wait_ready()
            entry_id = await _remember(d, base_url)
            if stop == "sigterm":
                d.signal(signal.SIGTERM)
                assert await d.wait() == 0, d.logs()
            else:  # the reply was delivered: what remember wrote is committed
                await d.kill()
                assert d.proc is not None and d.proc.returncode == -signal.SIGKILL
        async with daemon(home) as d:
            await d.wait_ready()
            recalled = await _recall(d, base_url)
            d.signal(signal.SIGTERM)
            assert await d.wait() == 0, d.logs()
    assert recalled, "recall found nothing after the restart"
    best = recalled[0]
    assert (best["id"], best["scope"], best["text"]) == (entry_id, SESSION, FACT), recalled
    assert best["tags"] == ["house"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", best["date"]), best
