"""The webhook against a real in-process gateway: a replayed signature is refused (409)
while it could still be accepted, also after a restart; callback URLs are normalised
before the prefix check; a body that is not JSON by its Content-Type gets 415."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.webhook import signed_headers
from tests.fakes.callback_server import CallbackServer
from tests.fakes.fake_openai import FakeOpenAI
from tests.integration.test_webhook import SECRET, SIGNED, TOKEN, configure, inbound_rows
from tests.integration.webhook_harness import Answer, WebhookGateway, running_webhook


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def callbacks() -> AsyncIterator[CallbackServer]:
    async with CallbackServer(secret=SECRET) as server:
        yield server


async def _send(gw: WebhookGateway, body: bytes, headers: dict[str, str]) -> Answer:
    """POST exactly these bytes with exactly these signature headers."""
    return await gw.request("POST", "/webhook/ci", body, headers=headers)


async def test_a_replayed_signature_is_refused_and_a_fresh_one_accepted(
    home: Path, fake: FakeOpenAI
) -> None:
    configure(home, fake)
    body = b'{"text": "deploy the release", "session": "rel"}'
    headers = signed_headers(SECRET, body)
    async with running_webhook(home) as gw:
        first = await _send(gw, body, headers)
        replayed = await _send(gw, body, headers)
        # The signature does not cover the path: sent to another hook with the same
        # secret it is a replay as well, also beside that hook's token.
        other_hook = await gw.request("POST", "/webhook/both", body, headers=headers)
        with_token = await gw.request("POST", "/webhook/both", body, headers=headers, token=TOKEN)
        fresh = await _send(gw, body, signed_headers(SECRET, body, now=time.time() + 1))
        await gw.until_done("ci", fresh.body["message_id"], **SIGNED)
        await gw.until_done("ci", first.body["message_id"], **SIGNED)
    assert first.status == 202 and fresh.status == 202, (first, fresh)
    assert fresh.body["message_id"] != first.body["message_id"]
    assert replayed.status == 409, replayed
    assert set(replayed.body) == {"error"} and "replay" in replayed.body["error"]
    assert other_hook.status == with_token.status == 409, (other_hook, with_token)
    assert [r["text"] for r in inbound_rows(home)] == ["deploy the release"] * 2
    assert sum(e["user_text"] == "deploy the release" for e in fake.log) == 2


async def test_a_replay_with_wait_or_an_idempotency_key_is_refused_too(
    home: Path, fake: FakeOpenAI
) -> None:
    configure(home, fake)
    body = b'{"text": "once", "idempotency_key": "k-1", "wait": true}'
    headers = signed_headers(SECRET, body)
    async with running_webhook(home) as gw:
        first = await _send(gw, body, headers)
        replayed = await _send(gw, body, headers)
        # A retry signed anew gets the first message back, by its idempotency key.
        retried = await _send(gw, body, signed_headers(SECRET, body, now=time.time() + 1))
    assert first.status == 200 and first.body["reply"] == "echo: once"
    assert replayed.status == 409 and "reply" not in replayed.body
    assert retried.status == 200 and retried.body["message_id"] == first.body["message_id"]
    assert len(inbound_rows(home)) == 1


async def test_a_signature_stays_refused_after_a_restart(home: Path, fake: FakeOpenAI) -> None:
    configure(home, fake)
    body = b'{"text": "survive"}'
    headers = signed_headers(SECRET, body)
    async with running_webhook(home) as gw:
        assert (await _send(gw, body, headers)).status == 202
    async with running_webhook(home) as gw:
        replayed = await _send(gw, body, headers)
    assert replayed.status == 409, replayed
    assert len(inbound_rows(home)) == 1


async def test_a_polls_signature_may_repeat(home: Path, fake: FakeOpenAI) -> None:
    """A GET changes nothing: a poller signing twice within a second is not a replay."""
    configure(home, fake)
    async with running_webhook(home) as gw:
        sent = await gw.post("ci", {"text": "poll me"}, **SIGNED)
        headers = signed_headers(SECRET, b"")
        path = f"/webhook/ci/messages/{sent.body['message_id']}"
        first = await gw.request("GET", path, headers=headers)
        second = await gw.request("GET", path, headers=headers)
    assert first.status == second.status == 200


@pytest.mark.parametrize(
    "path",
    [
        "cb/../../x",
        "cb/%2e%2e/x",
        "cb/%2E%2E/%2E%2E/x",
        "cb/.%2e/x",
        "cb/..%2f..%2fx",
    ],
)
async def test_a_callback_url_outside_the_prefix_after_normalising_is_refused(
    home: Path, fake: FakeOpenAI, callbacks: CallbackServer, path: str
) -> None:
    configure(home, fake, callbacks, allow="cb/")
    async with running_webhook(home) as gw:
        url = callbacks.url(path)
        answer = await gw.post("ci", {"text": "x", "callback_url": url}, **SIGNED)
    assert answer.status == 400, answer
    assert set(answer.body) == {"error"} and "callback_url" in answer.body["error"]
    assert inbound_rows(home) == [] and callbacks.calls == 0


async def test_an_allowed_callback_is_posted_to_its_normal_form(
    home: Path, fake: FakeOpenAI, callbacks: CallbackServer
) -> None:
    configure(home, fake, callbacks, allow="cb/")
    url = callbacks.url("cb/./jobs/../build%2D7").replace("http://", "HTTP://")
    async with running_webhook(home) as gw:
        got = await gw.post("ci", {"text": "call back", "callback_url": url}, **SIGNED)
        (call,) = await callbacks.wait_calls(1)
    assert got.status == 202, got
    assert call["message_id"] == got.body["message_id"]
    assert callbacks.paths == ["/cb/build-7"]
    [row] = inbound_rows(home)
    assert row["delivery"]["route"]["callback_url"] == callbacks.url("cb/build-7")


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "application/jsonp", "text/json"],
)
async def test_a_body_that_is_not_json_by_its_content_type_gets_415(
    home: Path, fake: FakeOpenAI, content_type: str | None
) -> None:
    configure(home, fake)
    body = b'{"text": "typed"}'
    headers = signed_headers(SECRET, body)
    if content_type is not None:
        headers["Content-Type"] = content_type
    async with running_webhook(home) as gw:
        async with gw.http.post(gw.base + "/webhook/ci", data=body, headers=headers) as r:
            status, answer = r.status, await r.json()
            kind = r.content_type
        # The same request with the right type (and a charset) is accepted.
        headers["Content-Type"] = "application/json; charset=utf-8"
        accepted = await _send(gw, body, headers)
    assert (status, kind) == (415, "application/json")
    assert set(answer) == {"error"} and "application/json" in answer["error"]
    assert accepted.status == 202
    assert [r["text"] for r in inbound_rows(home)] == ["typed"]


async def test_a_bearer_request_is_not_subject_to_replay(home: Path, fake: FakeOpenAI) -> None:
    """A token carries no per-request signature: identical token requests both run (an
    idempotency_key is how a token caller makes a retry safe)."""
    configure(home, fake)
    async with running_webhook(home) as gw:
        one = await gw.post("bot", {"text": "tick"}, token=TOKEN)
        two = await gw.post("bot", {"text": "tick"}, token=TOKEN)
    assert one.status == two.status == 202
    assert one.body["message_id"] != two.body["message_id"]
