"""What a store fault means at the edges: HTTP answers, and the supervisor's exit."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from core.errors import StoreError, StoreFull, StoreLost
from gateway.child_exits import describe_exit, fatal_exit, migration_exit
from gateway.http_errors import store_errors
from gateway.process_table import EX_CONFIG, EX_STORE


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (StoreFull("no space left for the database /x/familiar.db"), 507),
        (StoreLost("the database /x/familiar.db is corrupted"), 503),
        (StoreError("the database postgresql://h/db is unavailable: refused"), 503),
    ],
)
async def test_a_request_that_fails_on_the_store_gets_its_json_answer(
    error: StoreError, status: int
) -> None:
    async def handler(_request: web.Request) -> web.Response:
        raise error

    app = web.Application(middlewares=[store_errors])
    app.router.add_post("/webhook/x", handler)
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/webhook/x", json={"text": "hi"})
        assert response.status == status
        assert await response.json() == {"error": str(error)}


async def test_other_errors_are_left_to_aiohttp() -> None:
    async def handler(_request: web.Request) -> web.Response:
        raise web.HTTPNotFound()

    app = web.Application(middlewares=[store_errors])
    app.router.add_get("/x", handler)
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/x")).status == 404


def test_a_role_that_lost_the_store_stops_the_supervisor_with_1_and_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = "stopping: /h/familiar.db was deleted while open"
    assert fatal_exit("agent-1", EX_STORE, True, 3, said) == 1
    assert capsys.readouterr().err == f"familiar: {said}\n"
    assert fatal_exit("agent-1", EX_STORE, False, 0, None) == 1
    assert "the store cannot be used" in capsys.readouterr().err


def test_other_exits_restart_the_role_and_bad_config_stops_with_78(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fatal_exit("channels", 1, True, 0, None) is None
    assert fatal_exit("channels", -9, True, 0, None) is None
    assert fatal_exit("channels", EX_CONFIG, False, 0, None) == EX_CONFIG
    assert fatal_exit("channels", EX_CONFIG, True, 0, None) is None  # it ran: a crash
    assert capsys.readouterr().err == ""


def test_a_migration_that_cannot_use_the_store_stops_the_supervisor() -> None:
    assert migration_exit(10, 0) is None
    assert migration_exit(10, 1) is None  # the channels role migrates and says why not
    assert migration_exit(10, EX_STORE) == 1
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(3) == "exited with status 3"
