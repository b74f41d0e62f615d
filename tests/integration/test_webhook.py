"""The webhook channel against a real in-process gateway, a fake LLM and a callback server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sqlite3
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from channels.webhook import signed_headers
from gateway.cli import app
from gateway.daemon import EX_CONFIG, serve
from tests.fakes.callback_server import CallbackServer
from tests.fakes.fake_openai import FakeOpenAI
from tests.integration.webhook_harness import (
    WEBHOOK_EP,
    running_webhook,
    write_webhook_config,
)
from tests.stored import reply_status
from tests.waiting import eventually

SECRET = "whsec-test-5d1e"
TOKEN = "tok-test-93ab"
SIGNED = {"secret": SECRET}
BEARER = {"token": TOKEN}


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(latency=0.02) as server:
        yield server


@pytest.fixture
async def callbacks() -> AsyncIterator[CallbackServer]:
    async with CallbackServer(secret=SECRET) as server:
        yield server


def _provider(fake: FakeOpenAI) -> str:
    return (
        f'[provider]\nkind = "openai"\nbase_url = "{fake.base_url}"\n'
        'model = "fake-model"\napi_key = "sk-x"\nmax_retries = 0\n'
    )


def configure(
    home: Path, fake: FakeOpenAI, callbacks: CallbackServer | None = None, allow: str = "hook/"
) -> None:
    allow = f'callback_allow = ["{callbacks.url(allow)}"]\n' if callbacks else ""
    hooks = (
        f'[channels.webhook.hooks.ci]\nsecret = "{SECRET}"\n{allow}'
        "max_body = 4096\nmax_text = 500\nwait_timeout = 1.0\n\n"
        f'[channels.webhook.hooks.bot]\ntoken = "{TOKEN}"\nrate = 0.2\nburst = 3\n\n'
        f'[channels.webhook.hooks.both]\nsecret = "{SECRET}"\ntoken = "{TOKEN}"\n'
    )
    channel = "callback_attempts = 3\ncallback_backoff = 0.1\n"
    write_webhook_config(home, provider=_provider(fake), hooks=hooks, channel=channel)


def inbound_rows(home: Path) -> list[dict[str, object]]:
    """Every stored inbound message's payload (read straight from the SQLite file)."""
    with sqlite3.connect(home / "familiar.db") as db:
        return [json.loads(p) for (p,) in db.execute("select payload from inbound order by seq")]


async def test_signed_request_is_accepted_then_polled(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        body = {"text": "hello", "session": "build-7", "metadata": {"run": 7, "ok": True}}
        got = await gw.post("ci", body, **SIGNED)
        assert got.status == 202, got
        assert set(got.body) == {"message_id", "session"}
        assert got.body["session"] == "build-7"

        done = await gw.until_done("ci", got.body["message_id"], **SIGNED)
        assert done == {
            "message_id": got.body["message_id"],
            "session": "build-7",
            "status": "done",
            "reply": "echo: hello",
        }
        session = await gw.session("webhook:ci:build-7")
        assert session is not None and session["session"]["channel"] == "webhook"
    [row] = inbound_rows(home)
    assert row["metadata"] == {"run": 7, "ok": True}


async def test_poll_reports_pending_and_running(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        first = await gw.post("ci", {"text": "!sleep 1 first"}, **SIGNED)
        second = await gw.post("ci", {"text": "queued"}, **SIGNED)
        seen: set[str] = set()
        async with asyncio.timeout(10):
            while "running" not in seen:
                seen.add((await gw.poll("ci", first.body["message_id"], **SIGNED)).body["status"])
                await asyncio.sleep(0.02)
        waiting = await gw.poll("ci", second.body["message_id"], **SIGNED)
        assert (waiting.body["status"], waiting.body["reply"]) == ("pending", None)
        assert (await gw.until_done("ci", second.body["message_id"], **SIGNED))["reply"] == (
            "echo: queued"
        )


async def test_wait_returns_the_reply_text(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        got = await gw.post("ci", {"text": "what now?", "wait": True}, **SIGNED)
        assert got.status == 200, got
        assert got.body["reply"] == "echo: what now?"
        assert got.body["session"] == "default"
        assert got.body["status"] == "done"


async def test_wait_timeout_is_504_and_the_message_still_runs(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        got = await gw.post("ci", {"text": "!sleep 1.5 slow", "wait": True}, **SIGNED)
        assert got.status == 504, got
        assert set(got.body) == {"error", "message_id"}
        done = await gw.until_done("ci", got.body["message_id"], **SIGNED)
        assert done["reply"] == "echo: !sleep 1.5 slow"


async def test_bearer_token(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        got = await gw.post("bot", {"text": "hi", "wait": True}, **BEARER)
        assert (got.status, got.body["reply"]) == (200, "echo: hi")
        polled = await gw.poll("bot", got.body["message_id"], **BEARER)
        assert polled.body["status"] == "done"
        # A hook with both accepts either.
        assert (await gw.post("both", {"text": "a"}, **BEARER)).status == 202
        assert (await gw.post("both", {"text": "b"}, **SIGNED)).status == 202
        assert (await gw.post("both", {"text": "c"}, token="wrong")).status == 401


async def test_callback_is_signed_and_retried_after_a_500(
    home: Path, fake: FakeOpenAI, callbacks: CallbackServer
) -> None:
    configure(home, fake, callbacks)
    callbacks.answers = [500, 200]
    async with running_webhook(home) as gw:
        body = {"text": "call me", "session": "cb", "callback_url": callbacks.url("hook/x")}
        got = await gw.post("ci", body, **SIGNED)
        assert got.status == 202
        first, second = await callbacks.wait_calls(2)
        expected = {
            "message_id": got.body["message_id"],
            "session": "cb",
            "reply": "echo: call me",
            "status": "done",
        }
        assert first == second == expected
        assert callbacks.valid == [True, True]
        assert callbacks.headers[1]["X-Familiar-Message-Id"] == got.body["message_id"]
        # Recorded as delivered: never due again, so never sent again.
        mid = got.body["message_id"]
        await eventually(lambda: reply_status(home, mid) == "delivered", timeout=10)
        assert callbacks.calls == 2
        status = await gw.status()
        [webhook] = [c for c in status["channels"] if c["name"] == "webhook"]
        assert webhook["failed_deliveries"] == 0


async def test_a_callback_that_never_succeeds_is_recorded_as_failed(
    home: Path, fake: FakeOpenAI, callbacks: CallbackServer
) -> None:
    configure(home, fake, callbacks)
    callbacks.answers = [503]
    async with running_webhook(home) as gw:
        body = {"text": "nobody home", "session": "lost", "callback_url": callbacks.url()}
        got = await gw.post("ci", body, **SIGNED)
        await callbacks.wait_calls(3)
        async with asyncio.timeout(10):
            while True:
                status = await gw.status()
                [webhook] = [c for c in status["channels"] if c["name"] == "webhook"]
                if webhook["failed_deliveries"]:
                    break
                await asyncio.sleep(0.05)
        assert webhook["last_failed_delivery"]["session"] == "webhook:ci:lost"
        assert "503" in webhook["last_failed_delivery"]["error"]
        # `familiar status` (the table, not only --json) shows it too.
        table = await asyncio.to_thread(
            CliRunner().invoke, app, ["status", "--home", str(home)], catch_exceptions=False
        )
        shown = " ".join(table.stdout.replace("│", " ").split())
        assert "1 failed delivery (last: webhook:ci:lost: " in shown
        assert "callback answered HTTP 503" in shown
        session = await gw.session("webhook:ci:lost")
        assert session is not None
        [failed] = [e for e in session["events"] if e["type"] == "delivery.failed"]
        assert failed["message_id"] == got.body["message_id"]
        assert failed["data"]["attempts"] == 3 and failed["data"]["channel"] == "webhook"
        # Recorded as given up: never due again, so no more attempts.
        assert reply_status(home, got.body["message_id"]) == "failed"
        assert callbacks.calls == 3
        # The reply itself is still there for polling.
        assert (await gw.poll("ci", got.body["message_id"], **SIGNED)).body["status"] == "done"


async def test_a_callback_survives_a_restart(
    home: Path, fake: FakeOpenAI, callbacks: CallbackServer
) -> None:
    configure(home, fake, callbacks)
    callbacks.answers = [500]
    async with running_webhook(home) as gw:
        body = {"text": "durable", "callback_url": callbacks.url()}
        got = await gw.post("ci", body, **SIGNED)
        await callbacks.wait_calls(1)
    callbacks.answers = [200]
    calls = callbacks.calls
    async with running_webhook(home):
        [*_, last] = await callbacks.wait_calls(calls + 1)
        assert last["message_id"] == got.body["message_id"]


async def test_idempotency_key_across_a_restart(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    body = {"text": "once only", "session": "idem", "idempotency_key": "deploy-42"}
    async with running_webhook(home) as gw:
        first = await gw.post("ci", body, **SIGNED)
        assert first.status == 202
        again = await gw.post("ci", {**body, "session": "elsewhere"}, **SIGNED)
        assert again.status == 202 and again.body == first.body
        await gw.until_done("ci", first.body["message_id"], **SIGNED)
    async with running_webhook(home) as gw:
        after = await gw.post("ci", {**body, "wait": True}, **SIGNED)
        assert after.status == 200, after
        assert after.body["message_id"] == first.body["message_id"]
        assert after.body["reply"] == "echo: once only"
        # Another hook's key space is its own (signed anew: the same signature on
        # another hook would be a replay).
        other = await gw.post("both", body, secret=SECRET, timestamp=time.time() + 2)
        assert other.body["message_id"] != first.body["message_id"]
    assert [r["text"] for r in inbound_rows(home)] == ["once only", "once only"]
    assert sum(1 for e in fake.log if e["user_text"] == "once only") == 2  # ci once, both once


async def test_rate_limit_with_retry_after(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        answers = [await gw.post("bot", {"text": f"n{i}"}, **BEARER) for i in range(4)]
        assert [a.status for a in answers] == [202, 202, 202, 429]
        assert answers[3].body == {"error": "rate limited"}
        assert 1 <= int(answers[3].headers["Retry-After"]) <= 5
        # Unauthenticated requests do not spend the hook's budget; polls are not limited.
        assert (await gw.post("bot", {"text": "x"}, token="nope")).status == 401
        assert (await gw.poll("bot", answers[0].body["message_id"], **BEARER)).status == 200
    assert len(inbound_rows(home)) == 3


async def test_every_error_is_json_with_its_status(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    old = time.time() - 301
    async with running_webhook(home) as gw:
        accepted = await gw.post("ci", {"text": "real"}, **SIGNED)
        mid = accepted.body["message_id"]
        cases = [
            (await gw.post("ci", b"{not json", **SIGNED), 400, "invalid JSON"),
            (await gw.post("ci", b"[1, 2]", **SIGNED), 400, "body"),
            (await gw.post("ci", {"session": "x"}, **SIGNED), 400, "text"),
            (await gw.post("ci", {"text": ""}, **SIGNED), 400, "text"),
            (await gw.post("ci", {"text": "  "}, **SIGNED), 400, "text"),
            (await gw.post("ci", {"text": "a", "wait": "yes"}, **SIGNED), 400, "wait"),
            (await gw.post("ci", {"text": "a", "session": "a b"}, **SIGNED), 400, "session"),
            (await gw.post("ci", {"text": "a", "metadata": [1]}, **SIGNED), 400, "metadata"),
            (await gw.post("ci", {"text": "a", "extra": 1}, **SIGNED), 400, "extra"),
            (await gw.post("ci", {"text": "x" * 501}, **SIGNED), 400, "text"),
            (await gw.post("ci", b'{"text": "\xff\xfe"}', **SIGNED), 400, "not valid UTF-8"),
            (await gw.post("ci", b'{"text": "\\ud800"}', **SIGNED), 400, "lone UTF-16 surrogate"),
            (
                await gw.post("ci", {"text": "a", "callback_url": "http://evil/"}, **SIGNED),
                400,
                "callback_url",
            ),
            (await gw.post("ci", {"text": "a"}), 401, "missing signature"),
            (await gw.post("ci", {"text": "a"}, secret="wrong"), 401, "bad signature"),
            (await gw.post("ci", {"text": "a"}, secret=SECRET, timestamp=old), 401, "window"),
            (await gw.post("bot", {"text": "a"}), 401, "missing token"),
            (await gw.post("bot", {"text": "a"}, token="wrong"), 401, "bad token"),
            (await gw.post("nope", {"text": "a"}, **SIGNED), 404, "unknown hook"),
            (await gw.poll("ci", "0" * 32, **SIGNED), 404, "unknown message"),
            (await gw.poll("bot", mid, **BEARER), 404, "unknown message"),  # another hook's
            (await gw.poll("ci", mid), 401, "missing signature"),
            (await gw.request("GET", "/webhook/ci", **SIGNED), 405, "use POST"),
            (await gw.request("PUT", "/webhook/ci", {"text": "a"}, **SIGNED), 405, "use POST"),
            (await gw.request("POST", f"/webhook/ci/messages/{mid}", **SIGNED), 405, "use GET"),
            (await gw.request("GET", "/webhook/ci/other/path"), 404, "not found"),
            (await gw.request("GET", "/webhook"), 404, "not found"),
            (await gw.request("POST", "/webhook//%0a"), 404, "not found"),
            (await gw.post("ci", {"text": "x" * 5000}, **SIGNED), 413, "larger"),
            (await gw.post("ci", b"x" * 5000), 413, "larger"),  # size before signature
        ]
        for answer, status, words in cases:
            assert answer.status == status, (answer, status, words)
            assert set(answer.body) == {"error"}, answer
            assert words in answer.body["error"], (answer, words)
        assert cases[22][0].headers["Allow"] == "POST"
        # A replay of a request signed long ago: refused even though the signature matches.
        replayed = await gw.post("ci", {"text": "real"}, secret=SECRET, timestamp=old)
        assert replayed.status == 401
    assert [r["text"] for r in inbound_rows(home)] == ["real"]  # refused: nothing queued


async def test_signature_covers_the_raw_bytes(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        raw = b'{"text":   "spaced",  "session": "raw"}'
        assert (await gw.post("ci", raw, **SIGNED)).status == 202
        headers = signed_headers(SECRET, raw)
        tampered = raw.replace(b"spaced", b"spaced!")
        answer = await gw.request("POST", "/webhook/ci", tampered, headers=headers)
        assert answer.status == 401


async def test_openapi_document(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        doc = await gw.request("GET", "/webhook/openapi.json")
        assert doc.status == 200
        assert doc.body["openapi"] == "3.1.0"
        schemas = doc.body["components"]["schemas"]
        assert {"WebhookRequest", "Accepted", "ReplyBody", "MessageStatusBody"} <= set(schemas)
        assert schemas["WebhookRequest"]["required"] == ["text"]
        assert set(doc.body["paths"]) == {"/webhook/{name}", "/webhook/{name}/messages/{id}"}


@pytest.mark.parametrize(
    ("hook", "words"),
    [
        ("[channels.webhook.hooks.open]\nmax_body = 10\n", "channels.webhook.hooks.open"),
        (
            '[channels.webhook.hooks.cb]\ntoken = "t"\ncallback_allow = ["http://x/"]\n',
            "channels.webhook.hooks.cb",
        ),
        ('[channels.webhook.hooks."a b"]\ntoken = "t"\n', "channels.webhook.hooks"),
        (
            '[channels.webhook.hooks.big]\ntoken = "t"\nmax_body = 2097152\n',
            "channels.webhook.hooks.big.max_body",
        ),
    ],
)
async def test_bad_hooks_are_config_errors(
    home: Path, fake: FakeOpenAI, capfd: pytest.CaptureFixture[str], hook: str, words: str
) -> None:
    write_webhook_config(home, provider=_provider(fake), hooks=hook)
    code = await serve(home, stop=asyncio.Event(), env={}, entry_points=[WEBHOOK_EP])
    assert code == EX_CONFIG
    assert words in capfd.readouterr().err


async def test_metrics_count_refusals(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    async with running_webhook(home) as gw:
        await gw.post("ci", {"text": "a"})
        async with gw.http.get(gw.base + "/metrics") as response:
            text = await response.text()
        assert 'familiar_webhook_requests_total{status="401"} 1.0' in text
        # /metrics needs no authentication: it does not name the configured hooks.
        assert "hook=" not in text and not re.search(r'"(ci|bot|both)"', text)


def _documented_shell_blocks() -> list[str]:
    """The ``sh`` code blocks of the webhook channel's page (docs/channels/webhooks.md)."""
    page = (Path(__file__).parents[2] / "docs" / "channels" / "webhooks.md").read_text()
    blocks = re.findall(r"^( *)```sh\n(.*?)^\1```", page, flags=re.MULTILINE | re.DOTALL)
    return [textwrap.dedent(body) for _, body in blocks]


async def _bash(script: str, **env: str) -> dict[str, object]:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-euo",
        "pipefail",
        "-c",
        script,
        env={"PATH": os.environ["PATH"], **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    answer: dict[str, object] = json.loads(out)
    return answer


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("openssl")), reason="curl, openssl")
async def test_the_documented_curl_and_openssl_examples_work(home: Path, fake: FakeOpenAI) -> None:
    send, with_token, poll = _documented_shell_blocks()
    secret, token = "a-long-random-string", "another-long-random-string"
    hooks = f'[channels.webhook.hooks.ci]\nsecret = "{secret}"\ntoken = "{token}"\n'
    write_webhook_config(home, provider=_provider(fake), hooks=hooks)
    async with running_webhook(home) as gw:

        def here(script: str) -> str:
            return script.replace("http://127.0.0.1:8787", gw.base)

        sent = await _bash(here(send))
        assert sent.get("session") == "nightly", sent
        waited = await _bash(here(with_token), TOKEN=token)
        assert (waited["reply"], waited["status"]) == ("echo: hi", "done")
        await gw.until_done("ci", str(sent["message_id"]), secret=secret)
        polled = await _bash(here(poll).replace("9f0c...", str(sent["message_id"])), SECRET=secret)
    assert polled == {
        "message_id": sent["message_id"],
        "session": "nightly",
        "status": "done",
        "reply": "echo: Summarise the nightly build",
    }
