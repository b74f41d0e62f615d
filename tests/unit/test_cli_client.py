"""The ``familiar`` CLI and ControlClient against a stand-in daemon on the control socket."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web
from typer.testing import CliRunner

from gateway.cli import CliDeps, app
from gateway.control_client import ControlClient, ControlError, DaemonUnavailable, socket_path
from gateway.service import UNIT_NAME, CommandResult, ServiceManager

T = TypeVar("T")
HINT = "no familiar gateway is running on"


# --- the stand-in daemon -----------------------------------------------------------


@dataclass
class StandIn:
    """Speaks the control API: echoes text, "!fail" -> error reply, "!hang" -> timeout."""

    home: Path
    sessions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    replies: dict[str, dict[str, str]] = field(default_factory=dict)
    posts: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> web.Application:
        application = web.Application()
        application.router.add_get("/v1/status", self._status)
        application.router.add_post("/v1/messages", self._post)
        application.router.add_get("/v1/messages/{id}", self._message)
        application.router.add_get("/v1/sessions", self._sessions)
        application.router.add_get("/v1/sessions/{key}", self._session)
        return application

    def _event(self, key: str, kind: str, message_id: str, **data: Any) -> None:
        self.events.append(
            {
                "id": len(self.events) + 1,
                "type": kind,
                "session": key,
                "message_id": message_id,
                "at": time.time(),
                "data": data,
            }
        )

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "pid": 4242,
                "version": "0.1.0",
                "uptime_s": 3725.0,
                "home": str(self.home),
                "workspace": str(self.home / "workspace"),
                "store": "sqlite",
                "provider": {"kind": "openai", "model": "fake", "base_url": "http://x/v1"},
                "channels": [{"name": "cli", "state": "running"}],
                "sessions": len(self.sessions),
                "queue": {"pending": 0, "claimed": 0},
                "busy_sessions": 0,
                "http": None,
            }
        )

    async def _post(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.posts.append(body)
        key, text = body["session"], body["text"]
        if not key.startswith("cli:"):
            return web.json_response({"error": "bad session key"}, status=400)
        message_id = uuid.uuid4().hex
        history = self.sessions.setdefault(key, [])
        history.append({"epoch": 0, "role": "user", "content": text})
        self._event(key, "user.message", message_id, text=text)
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)

        async def line(item: dict[str, Any]) -> None:
            await resp.write(json.dumps(item).encode() + b"\n")

        await line({"type": "accepted", "message_id": message_id, "session": key})
        if text.startswith("!hang"):
            await line({"type": "timeout", "message_id": message_id, "session": key})
            return resp
        kind, answer = (
            ("error", "provider failed") if text.startswith("!fail") else ("reply", f"echo: {text}")
        )
        if body.get("stream", True):
            await line({"type": "progress", "text": "thinking"})
            for piece in (answer[:3], answer[3:]):
                await line({"type": "delta", "text": piece})
        history.append({"epoch": 0, "role": "assistant", "content": answer})
        self._event(key, "assistant.message", message_id, text=answer)
        self._event(key, "session.idle", message_id)
        self.replies[message_id] = {"kind": kind, "text": answer}
        await line(
            {
                "type": "reply",
                "message_id": message_id,
                "session": key,
                "kind": kind,
                "text": answer,
            }
        )
        return resp

    async def _message(self, request: web.Request) -> web.Response:
        message_id = request.match_info["id"]
        if message_id not in self.replies:
            return web.json_response({"error": "no such message"}, status=404)
        return web.json_response(
            {
                "message_id": message_id,
                "session": "?",
                "status": "done",
                "reply": self.replies[message_id],
            }
        )

    def _info(self, key: str) -> dict[str, Any]:
        return {
            "key": key,
            "channel": "cli",
            "created_at": 1.0,
            "updated_at": 2.0,
            "epoch": 0,
            "messages": len(self.sessions[key]),
            "pending": 0,
        }

    async def _sessions(self, request: web.Request) -> web.Response:
        return web.json_response({"sessions": [self._info(k) for k in self.sessions]})

    async def _session(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        if key not in self.sessions:
            return web.json_response({"error": f"no session {key}"}, status=404)
        body: dict[str, Any] = {"session": self._info(key), "history": self.sessions[key]}
        if request.query.get("events") == "1":
            body["events"] = [e for e in self.events if e["session"] == key]
        return web.json_response(body)


class LoopThread:
    """An event loop in a thread: the CLI under test runs its own asyncio.run."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()


@pytest.fixture
def home() -> Iterator[Path]:
    # Short path: a Unix socket path must stay under ~107 bytes.
    path = Path(tempfile.mkdtemp(prefix="fam-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture
def daemon(home: Path, loop_thread: LoopThread) -> Iterator[StandIn]:
    stand_in = StandIn(home=home)
    runner = web.AppRunner(stand_in.app())

    async def start() -> None:
        await runner.setup()
        socket_path(home).parent.mkdir(parents=True, exist_ok=True)
        await web.UnixSite(runner, str(socket_path(home))).start()

    loop_thread.run(start())
    yield stand_in
    loop_thread.run(runner.cleanup())


def cli(*args: str, obj: object = None) -> Any:
    return CliRunner().invoke(app, list(args), obj=obj, catch_exceptions=False)


# --- send --------------------------------------------------------------------------


def test_send_prints_reply_and_exits_0(daemon: StandIn, home: Path) -> None:
    result = cli("send", "--home", str(home), "hi")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "echo: hi\n"
    assert daemon.posts[0]["session"] == "cli:default"
    assert daemon.posts[0]["stream"] is False  # stdout is not a TTY


def test_send_error_reply_exits_1(daemon: StandIn, home: Path) -> None:
    result = cli("send", "--home", str(home), "!fail please")
    assert result.exit_code == 1
    assert "provider failed" in result.stderr
    assert result.stdout == ""


def test_send_timeout_exits_1(daemon: StandIn, home: Path) -> None:
    result = cli("send", "--home", str(home), "--timeout", "2", "!hang")
    assert result.exit_code == 1
    assert "no reply within 2 s" in result.stderr
    assert daemon.posts[0]["timeout"] == 2.0


def test_send_without_daemon_exits_2_with_hint(home: Path) -> None:
    result = cli("send", "--home", str(home), "hi")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f'{HINT} {home} — start it with "familiar gateway" (or "make run")'
    )


def test_send_json_shape(daemon: StandIn, home: Path) -> None:
    result = cli("send", "--home", str(home), "--session", "work", "--json", "hello")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"session", "message_id", "reply", "events"}
    assert out["session"] == "cli:work"
    assert out["reply"] == {"kind": "reply", "text": "echo: hello"}
    assert [e["type"] for e in out["events"]] == [
        "user.message",
        "assistant.message",
        "session.idle",
    ]
    assert all(e["message_id"] == out["message_id"] for e in out["events"])


def test_send_json_events_only_of_that_message(daemon: StandIn, home: Path) -> None:
    assert cli("send", "--home", str(home), "first").exit_code == 0
    out = json.loads(cli("send", "--home", str(home), "--json", "second").stdout)
    assert out["events"][0]["data"]["text"] == "second"
    assert len(out["events"]) == 3


def test_send_json_error_reply_exits_1(daemon: StandIn, home: Path) -> None:
    result = cli("send", "--home", str(home), "--json", "!fail")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["reply"]["kind"] == "error"


@pytest.mark.parametrize("name", ["", "a b", "x/y", "n" * 65, "émoji", ".hidden", "cli:x"])
def test_send_rejects_bad_session_names(home: Path, name: str) -> None:
    result = cli("send", "--home", str(home), "--session", name, "hi")
    assert result.exit_code == 2
    assert "session name" in result.stderr


def test_send_accepts_edge_session_names(daemon: StandIn, home: Path) -> None:
    name = "A-z_0.9" + "n" * 57
    assert cli("send", "--home", str(home), "--session", name, "hi").exit_code == 0
    assert daemon.posts[0]["session"] == f"cli:{name}"


# --- status, sessions --------------------------------------------------------------


def test_status_json_and_table(daemon: StandIn, home: Path) -> None:
    result = cli("status", "--home", str(home), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["pid"] == 4242
    table = cli("status", "--home", str(home))
    assert table.exit_code == 0
    assert "1h 2m 5s" in table.stdout
    assert "cli" in table.stdout and "running" in table.stdout


def test_status_without_daemon_exits_2(home: Path) -> None:
    result = cli("status", "--home", str(home))
    assert result.exit_code == 2
    assert HINT in result.stderr


def test_sessions_list_and_show(daemon: StandIn, home: Path) -> None:
    cli("send", "--home", str(home), "hi")
    listed = json.loads(cli("sessions", "list", "--home", str(home), "--json").stdout)
    assert [s["key"] for s in listed["sessions"]] == ["cli:default"]
    assert "cli:default" in cli("sessions", "list", "--home", str(home)).stdout

    result = cli("sessions", "show", "cli:default", "--events", "--json", "--home", str(home))
    assert result.exit_code == 0
    shown = json.loads(result.stdout)
    assert [h["role"] for h in shown["history"]] == ["user", "assistant"]
    assert shown["events"][0]["type"] == "user.message"
    assert shown["events"][-1]["type"] == "session.idle"

    text = cli("sessions", "show", "cli:default", "--events", "--home", str(home)).stdout
    assert "echo: hi" in text and "session.idle" in text


def test_sessions_show_unknown_exits_1(daemon: StandIn, home: Path) -> None:
    result = cli("sessions", "show", "cli:nope", "--home", str(home))
    assert result.exit_code == 1
    assert "no session 'cli:nope'" in result.stderr


# --- the client itself -------------------------------------------------------------


async def test_client_streams_deltas_and_progress(daemon: StandIn, home: Path) -> None:
    async with ControlClient(home) as client:
        items = [item async for item in client.send("cli:s", "yo", stream=True, timeout=5)]
        assert [i["type"] for i in items] == ["accepted", "progress", "delta", "delta", "reply"]
        assert "".join(i["text"] for i in items if i["type"] == "delta") == "echo: yo"
        message = await client.message(items[0]["message_id"])
        assert message["reply"] == {"kind": "reply", "text": "echo: yo"}
        with pytest.raises(ControlError) as info:
            await client.session("cli:unknown")
        assert info.value.status == 404
        with pytest.raises(ControlError, match="bad session key"):
            async for _ in client.send("nope", "x"):
                pass


async def test_client_without_daemon(home: Path) -> None:
    async with ControlClient(home) as client:
        with pytest.raises(DaemonUnavailable):
            await client.status()
        with pytest.raises(DaemonUnavailable):
            async for _ in client.send("cli:x", "hi"):
                pass


# --- config show, doctor -----------------------------------------------------------


def _write_config(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_config_show_masks_secrets(home: Path) -> None:
    _write_config(
        home,
        '[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'model = "fake"\napi_key = "sk-very-secret-123"\n',
    )
    text = cli("config", "show", "--home", str(home))
    assert text.exit_code == 0, text.stderr
    assert "sk-very-secret-123" not in text.stdout
    assert 'api_key = "**********"' in text.stdout
    assert "[provider]" in text.stdout and 'model = "fake"' in text.stdout

    as_json = cli("config", "show", "--json", "--home", str(home))
    assert "sk-very-secret-123" not in as_json.stdout
    assert json.loads(as_json.stdout)["provider"]["api_key"] == "**********"


def test_config_show_reports_invalid_config(home: Path) -> None:
    _write_config(home, '[provider]\nkind = "nope"\n')
    result = cli("config", "show", "--home", str(home))
    assert result.exit_code == 1
    assert "provider.kind" in result.stderr


@pytest.fixture
def refusing_provider(loop_thread: LoopThread) -> Iterator[str]:
    """An OpenAI-compatible endpoint that refuses every key (401)."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "bad key"}}, status=401)

    application = web.Application()
    application.router.add_get("/v1/models", models)
    runner = web.AppRunner(application)

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    port = loop_thread.run(start())
    yield f"http://127.0.0.1:{port}/v1"
    loop_thread.run(runner.cleanup())


def test_doctor_reports_failures(home: Path, refusing_provider: str) -> None:
    _write_config(
        home,
        f'[provider]\nkind = "openai"\nbase_url = "{refusing_provider}"\n'
        'model = "fake"\napi_key = "sk-refused"\n',
    )
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 1
    out = result.stdout
    assert "✓ config valid" in out
    assert "✓ home writable" in out
    assert "✗ workspace present" in out
    assert "reachable but the key was refused" in out
    assert "✗ daemon socket answers" in out
    assert "sk-refused" not in out


def test_doctor_all_green(daemon: StandIn, home: Path) -> None:
    _write_config(home, '[provider]\nkind = "scripted"\n')
    (home / "workspace").mkdir()
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 0, result.stdout
    assert "✗" not in result.stdout
    assert "pid 4242" in result.stdout


def test_doctor_checks_enabled_channels(daemon: StandIn, home: Path) -> None:
    _write_config(
        home,
        '[provider]\nkind = "scripted"\n\n[channels.nosuch]\nenabled = true\n'
        "\n[channels.idle]\nenabled = false\n",
    )
    (home / "workspace").mkdir()
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 1
    assert "✗ channel nosuch credentials" in result.stdout
    assert "no package provides it" in result.stdout
    assert "idle" not in result.stdout


def test_doctor_invalid_config(home: Path) -> None:
    _write_config(home, "this is not toml = = =\n")
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 1
    assert "✗ config valid" in result.stdout


# --- service -----------------------------------------------------------------------


@dataclass
class FakeSystemctl:
    results: dict[str, CommandResult] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)

    async def __call__(self, argv: Sequence[str]) -> CommandResult:
        self.calls.append(list(argv))
        verb = next(a for a in argv[1:] if not a.startswith("--"))
        return self.results.get(verb, CommandResult(0, "", ""))


def test_service_install_status_uninstall(home: Path, tmp_path: Path) -> None:
    fake = FakeSystemctl({"is-active": CommandResult(0, "active\n", "")})
    deps = CliDeps(
        service_manager=ServiceManager(run=fake, user_unit_dir=tmp_path / "units", python="/py")
    )
    result = cli("service", "install", "--user", "--now", "--home", str(home), obj=deps)
    assert result.exit_code == 0, result.stderr
    unit = tmp_path / "units" / UNIT_NAME
    assert f"wrote {unit}" in result.stdout
    assert f"--home {home}" in unit.read_text()
    assert ["systemctl", "--user", "enable", "--now", UNIT_NAME] in fake.calls

    status = cli("service", "status", "--user", obj=deps)
    assert status.exit_code == 0
    assert "installed, active" in status.stdout

    removed = cli("service", "uninstall", "--user", obj=deps)
    assert removed.exit_code == 0
    assert not unit.exists()


def test_service_failure_exits_1(tmp_path: Path, home: Path) -> None:
    fake = FakeSystemctl({"daemon-reload": CommandResult(1, "", "Failed to connect to bus\n")})
    deps = CliDeps(service_manager=ServiceManager(run=fake, user_unit_dir=tmp_path, python="/py"))
    result = cli("service", "install", "--user", "--home", str(home), obj=deps)
    assert result.exit_code == 1
    assert "Failed to connect to bus" in result.stderr
