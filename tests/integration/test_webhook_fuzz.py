"""Fuzzing the webhook routes of a running gateway with malformed and random requests.

Every answer must be a JSON 4xx error or a valid 2xx, the gateway must stay up, and
only accepted requests may be stored. The gateway runs in its own thread and loop
(hypothesis drives a synchronous test); requests go out through ``http.client`` so
that methods, headers and bytes are exactly what the strategy drew.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.webhook import signed_headers
from gateway.daemon import serve
from tests.integration.webhook_harness import WEBHOOK_EP, write_webhook_config

SECRET = "fuzz-secret"
TOKEN = "fuzz-token"
EXAMPLES = 2000


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("familiar", timeout=10)
        self._path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


@dataclass
class _Gateway:
    """A gateway serving in a background thread; ``accepted`` holds stored message ids."""

    home: Path
    port: int = 0
    accepted: set[str] = field(default_factory=set)
    answered: int = 0
    _stop: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    code: int | None = None

    def start(self) -> None:
        started = threading.Event()

        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            started.set()
            self.code = await serve(self.home, stop=self._stop, env={}, entry_points=[WEBHOOK_EP])

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        self._thread.start()
        started.wait(10)
        deadline = time.monotonic() + 30
        while not self.port:
            assert time.monotonic() < deadline and self._thread.is_alive(), self.code
            try:
                status = self.control("GET", "/v1/status")
                if status.get("http"):
                    self.port = int(status["http"].rsplit(":", 1)[1])
            except OSError:
                time.sleep(0.05)

    def control(self, method: str, path: str) -> dict[str, Any]:
        conn = _UnixConnection(self.home / "run" / "gateway.sock")
        try:
            conn.request(method, path)
            result: dict[str, Any] = json.loads(conn.getresponse().read())
            return result
        finally:
            conn.close()

    def stop(self) -> None:
        assert self._loop is not None and self._stop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture(scope="module")
def gateway() -> Iterator[_Gateway]:
    home = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    hooks = (
        f'[channels.webhook.hooks.fz]\nsecret = "{SECRET}"\nmax_body = 2048\nmax_text = 300\n'
        'rate = 1000\nburst = 1000\ncallback_allow = ["http://127.0.0.1:9/cb/"]\n\n'
        f'[channels.webhook.hooks.tok]\ntoken = "{TOKEN}"\nrate = 2\nburst = 5\n'
    )
    write_webhook_config(
        home,
        provider='[provider]\nkind = "scripted"\n',
        hooks=hooks,
        channel="callback_attempts = 1\ncallback_backoff = 0.01\ncallback_timeout = 0.2\n",
    )
    gw = _Gateway(home)
    try:
        gw.start()
        yield gw
    finally:
        gw.stop()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        shutil.rmtree(home, ignore_errors=True)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
_fields = st.fixed_dictionaries(
    {},
    optional={
        "text": st.one_of(st.text(max_size=40), _json_values),
        "session": st.one_of(st.sampled_from(["default", "a.b", "x y", ""]), st.text(max_size=10)),
        "sender": st.one_of(st.text(max_size=10), _json_values),
        "wait": st.one_of(st.booleans(), _json_values),
        "callback_url": st.one_of(
            st.sampled_from(["http://127.0.0.1:9/cb/x", "http://evil/", ""]), _json_values
        ),
        "idempotency_key": st.one_of(st.text(max_size=12), st.just("same-key")),
        "metadata": _json_values,
        "junk": _json_values,
    },
)
_bodies = st.one_of(
    st.binary(max_size=200),
    _fields.map(lambda d: json.dumps(d).encode()),
    _json_values.map(lambda v: json.dumps(v).encode()),
    st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(2040, 2100).map(lambda n: b'{"text": "' + b"y" * n + b'"}'),
)
_paths = st.one_of(
    st.sampled_from(
        [
            "/webhook/fz",
            "/webhook/tok",
            "/webhook/nope",
            "/webhook/openapi.json",
            "/webhook",
            "/webhook/",
            "/webhook/fz/messages/0123",
            "/webhook/fz/messages/" + "f" * 80,
            "/webhook/tok/messages/x",
        ]
    ),
    st.text("abcXYZ019-_.~%/", max_size=30).map(lambda t: "/webhook/" + t),
)
_auth = st.sampled_from(["none", "signed", "skewed", "garbage", "bearer", "bad-bearer", "both"])


def _headers(auth: str, body: bytes, content_type: str) -> dict[str, str]:
    headers = {"Content-Type": content_type}
    if auth in ("signed", "both"):
        headers.update(signed_headers(SECRET, body))
    if auth == "skewed":
        headers.update(signed_headers(SECRET, body, now=time.time() - 3600))
    if auth == "garbage":
        headers.update({"X-Familiar-Timestamp": "12ab", "X-Familiar-Signature": "sha256=zz"})
    if auth in ("bearer", "both"):
        headers["Authorization"] = f"Bearer {TOKEN}"
    if auth == "bad-bearer":
        headers["Authorization"] = "Bearer nope"
    return headers


def _check(method: str, path: str, status: int, body: Any) -> str | None:
    """The message id a valid 2xx stored, if any; fails on anything else."""
    assert isinstance(body, dict), body
    if 400 <= status < 500:
        assert set(body) == {"error"} and isinstance(body["error"], str), body
        return None
    assert status in (200, 202), (status, body)
    if path == "/webhook/openapi.json":
        assert body["openapi"] == "3.1.0"
        return None
    assert isinstance(body["message_id"], str) and isinstance(body["session"], str), body
    if method == "GET":
        assert body["status"] in ("pending", "running", "done", "failed"), body
        return None
    assert set(body) == (
        {"message_id", "session"} if status == 202 else {"message_id", "session", "reply", "status"}
    ), body
    return str(body["message_id"])


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "DELETE", "PATCH"]),
    path=_paths,
    body=_bodies,
    auth=_auth,
    content_type=st.sampled_from(["application/json", "text/plain", "", "application/json; x=ü"]),
)
def test_random_requests_get_json_answers(
    gateway: _Gateway, method: str, path: str, body: bytes, auth: str, content_type: str
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    try:
        sent_body = body if method != "GET" else b""
        headers = _headers(auth, sent_body, content_type)
        conn.request(method, path, body=sent_body, headers=headers)
        response = conn.getresponse()
        raw = response.read()
    finally:
        conn.close()
    assert response.getheader("Content-Type", "").startswith("application/json"), (
        response.status,
        raw[:200],
    )
    message_id = _check(method, path, response.status, json.loads(raw))
    if message_id is not None:
        gateway.accepted.add(message_id)
    if response.status == 429:
        assert int(response.getheader("Retry-After") or 0) >= 1
    gateway.answered += 1


def test_after_fuzzing_only_accepted_requests_are_stored(gateway: _Gateway) -> None:
    assert gateway.answered >= EXAMPLES
    assert gateway.control("GET", "/v1/status")["pid"]  # still up
    with sqlite3.connect(gateway.home / "familiar.db") as db:
        stored = {mid for (mid,) in db.execute("select id from inbound")}
    assert stored == gateway.accepted
