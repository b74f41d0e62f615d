"""The body checks every gateway app shares: bad text gets 400, big bodies 413."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from gateway.http_errors import body_checks, body_problem, media_type, size_text


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "application/json",
        "Application/JSON; charset=utf-8",
        "text/plain;x=1",
        ' a/b\t;q="x;y"',
        "garbage",
        "a/b/c",
        "application/merge-patch+json",
    ],
)
def test_media_type_says_what_aiohttp_says(header: str | None) -> None:
    request = make_mocked_request(
        "POST", "/", headers={} if header is None else {"Content-Type": header}
    )
    assert media_type(request) == request.content_type


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "plain"}',
        '{"text": "é ✓ 😀"}'.encode(),
        b'{"text": "\\ud83d\\ude00 a valid pair"}',
        b'{"text": "\\\\ud800 is an escaped backslash, not an escape"}',
        b'{"text": "\\u00e9\\n\\"quoted\\""}',
        b"",
    ],
)
def test_good_bodies_pass(body: bytes) -> None:
    assert body_problem(body) is None


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"text": "\xff"}', "not valid UTF-8 (byte 0xff at offset 10)"),
        (b'{"text": "\xed\xa0\x80"}', "not valid UTF-8 (byte 0xed at offset 10)"),
        (b'{"text": "\\ud800"}', "lone UTF-16 surrogate escape \\ud800 at offset 10"),
        (b'{"text": "\\uDC00 low"}', "lone UTF-16 surrogate escape \\uDC00 at offset 10"),
        (b'{"text": "\\ud83d\\u0041"}', "\\ud83d at offset 10"),
        (b'{"text": "\\ud83d x \\ude00"}', "\\ud83d at offset 10"),
        (b'{"a": "\\\\", "b": "\\ud800"}', "\\ud800 at offset 18"),
    ],
)
def test_bad_bodies_are_named(body: bytes, problem: str) -> None:
    found = body_problem(body)
    assert found is not None and problem in found


def test_surrogates_only_matter_in_json() -> None:
    assert body_problem(b"\\ud800", "text/plain") is None
    assert body_problem(b'{"t": "\\ud800"}', "application/vnd.api+json") is not None


def test_size_text() -> None:
    assert size_text(1024 * 1024) == "1 MiB"
    assert size_text(64 * 1024) == "64 KiB"
    assert size_text(1000) == "1000 bytes"


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    seen: list[bytes] = []

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append(body)
        return web.json_response({"length": len(body)})

    app = web.Application(
        client_max_size=1024, middlewares=[body_checks(too_large_hint="send less")]
    )
    app.router.add_post("/in", echo)
    app.router.add_get("/in", echo)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_middleware_refuses_bad_text_before_the_handler(
    client: TestClient[web.Request, web.Application],
) -> None:
    json_type = {"Content-Type": "application/json"}
    for data, headers in [
        (b'{"t": "\xff"}', json_type),
        (b'{"t": "\\udfff"}', json_type),
        (b"t=\xff", {"Content-Type": "application/x-www-form-urlencoded"}),
        (b"\xff", {"Content-Type": "text/plain; charset=utf-8"}),
    ]:
        async with client.post("/in", data=data, headers=headers) as resp:
            assert resp.status == 400, data
            assert "error" in await resp.json()
    async with client.post("/in", data=b"\xff\x00", headers={"Content-Type": "image/png"}) as r:
        assert r.status == 200  # binary bodies are the route's business
    # aiohttp escapes non-ASCII: "\u00e9 \ud83d\ude00", a valid surrogate pair.
    async with client.post("/in", json={"t": "é 😀"}) as resp:
        assert resp.status == 200


async def test_middleware_names_the_limit(
    client: TestClient[web.Request, web.Application],
) -> None:
    async with client.post("/in", data=b"x" * 2000) as resp:
        assert resp.status == 413
        assert await resp.json() == {
            "error": "the request body is over 1 KiB (2,000 bytes); send less"
        }

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"y" * 512

    async with client.post("/in", data=chunks()) as resp:  # no Content-Length
        assert resp.status == 413
        assert (await resp.json())["error"] == "the request body is over 1 KiB; send less"
