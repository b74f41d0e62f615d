"""The ``familiar`` CLI and ControlClient against the real control server of a real core."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from aiohttp import web
from click.testing import CliRunner
from rich.console import Console

from core.messages import Delivery, InboundMessage
from gateway.cli import app
from gateway.commands.chat import _show_unread
from gateway.control.client import (
    ControlClient,
    ControlError,
    DaemonUnavailable,
    RequestTooLarge,
    socket_path,
)
from gateway.control.protocol import Accepted, DeltaLine, ReplyLine
from tests.integration.control_stack import ControlStack, Relay, control_stack
from tests.waiting import eventually

T = TypeVar("T")
HINT = "no familiar gateway is running on"


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
    path = Path(tempfile.mkdtemp(prefix="fam-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture
def daemon(home: Path, loop_thread: LoopThread) -> Iterator[ControlStack]:
    """The real control server of a fresh core (scripted LLM, see `Script`) on ``home``."""
    stack = contextlib.AsyncExitStack()
    yield loop_thread.run(stack.enter_async_context(control_stack(home)))
    loop_thread.run(stack.aclose())


@pytest.fixture
def relay(daemon: ControlStack, loop_thread: LoopThread) -> Iterator[Relay]:
    """A recording relay in front of the daemon, on its own home (``relay.home``)."""
    other = Path(tempfile.mkdtemp(prefix="fam-r-", dir="/tmp"))
    stand = Relay(socket_path(daemon.home), socket_path(other))
    loop_thread.run(stand.start())
    yield stand
    loop_thread.run(stand.close())
    shutil.rmtree(other, ignore_errors=True)


def relay_home(relay: Relay) -> Path:
    return relay.path.parent.parent


def posted(relay: Relay) -> list[dict[str, Any]]:
    return [json.loads(body) for body in relay.posts]


def cli(*args: str, obj: object = None) -> Any:
    return CliRunner().invoke(app, list(args), obj=obj, catch_exceptions=False)


def plain(text: str) -> str:
    """``text`` with rich's error box and line wrapping taken out."""
    return " ".join(text.replace("│", " ").split())


def show(home: Path, key: str) -> dict[str, Any]:
    result = cli("sessions", "show", key, "--events", "--json", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    detail: dict[str, Any] = json.loads(result.stdout)
    return detail


# --- send --------------------------------------------------------------------------


def test_send_prints_reply_and_exits_0(relay: Relay) -> None:
    result = cli("send", "--home", str(relay_home(relay)), "hi")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "echo: hi\n"
    (body,) = posted(relay)
    assert body["session"] == "cli:default"
    assert body["stream"] is False  # stdout is not a TTY
    assert isinstance(body["client_id"], str) and body["client_id"]


def test_send_error_reply_exits_1(daemon: ControlStack, home: Path) -> None:
    result = cli("send", "--home", str(home), "!fail please")
    assert result.exit_code == 1
    assert "provider failed" in result.stderr
    assert result.stdout == ""


def test_send_timeout_exits_1(relay: Relay) -> None:
    result = cli("send", "--home", str(relay_home(relay)), "--timeout", "0.5", "!hang")
    assert result.exit_code == 1
    assert "no reply within 0.5 s" in result.stderr
    assert posted(relay)[0]["timeout"] == 0.5


def test_send_without_daemon_exits_2_with_hint(home: Path) -> None:
    result = cli("send", "--home", str(home), "hi")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f'{HINT} {home} — start it with "familiar gateway" (or "make run")'
    )


def test_send_json_shape(daemon: ControlStack, home: Path) -> None:
    result = cli("send", "--home", str(home), "--session", "work", "--json", "hello")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"session", "message_id", "status", "reply", "events"}
    assert out["session"] == "cli:work"
    assert (out["status"], out["reply"]) == ("done", "echo: hello")  # the text, as webhooks
    types = [e["type"] for e in out["events"]]
    assert types[0] == "user.message"
    assert types[-1] == "session.idle"
    assert types.count("assistant.turn_start") == 1
    assert all(e["message_id"] == out["message_id"] for e in out["events"])


def test_send_json_events_only_of_that_message(daemon: ControlStack, home: Path) -> None:
    assert cli("send", "--home", str(home), "first").exit_code == 0
    out = json.loads(cli("send", "--home", str(home), "--json", "second").stdout)
    assert out["events"][0]["data"]["text"] == "second"
    assert {e["message_id"] for e in out["events"]} == {out["message_id"]}
    assert len(show(home, "cli:default")["events"]) > len(out["events"])


def test_send_json_error_reply_exits_1(daemon: ControlStack, home: Path) -> None:
    result = cli("send", "--home", str(home), "--json", "!fail")
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["status"] == "failed" and isinstance(out["reply"], str)


@pytest.mark.parametrize("name", ["", "a b", "x/y", "n" * 129, "émoji", ".hidden", "cli:x"])
def test_send_rejects_bad_session_names(home: Path, name: str) -> None:
    result = cli("send", "--home", str(home), "--session", name, "hi")
    assert result.exit_code == 64
    assert "session name" in result.stderr


def test_send_accepts_edge_session_names(relay: Relay) -> None:
    name = "A-z_0.9@+=" + "n" * 118
    result = cli("send", "--home", str(relay_home(relay)), "--session", name, "hi")
    assert result.exit_code == 0, result.stderr
    assert posted(relay)[0]["session"] == f"cli:{name}"


# --- status, sessions --------------------------------------------------------------


def test_status_json_and_table(daemon: ControlStack, home: Path) -> None:
    result = cli("status", "--home", str(home), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["pid"] == os.getpid()
    table = cli("status", "--home", str(home))
    assert table.exit_code == 0
    assert "1h 2m 5s" in table.stdout
    assert "cli" in table.stdout and "running" in table.stdout


def test_status_without_daemon_exits_2(home: Path) -> None:
    result = cli("status", "--home", str(home))
    assert result.exit_code == 2
    assert HINT in result.stderr


def test_sessions_list_and_show(daemon: ControlStack, home: Path) -> None:
    cli("send", "--home", str(home), "hi")
    listed = json.loads(cli("sessions", "list", "--home", str(home), "--json").stdout)
    assert [s["key"] for s in listed["sessions"]] == ["cli:default"]
    assert "cli:default" in cli("sessions", "list", "--home", str(home)).stdout

    shown = show(home, "cli:default")
    assert [h["role"] for h in shown["history"]] == ["user", "assistant"]
    assert shown["events"][0]["type"] == "user.message"
    assert shown["events"][-1]["type"] == "session.idle"
    assert show(home, "default") == shown  # a bare NAME means cli:NAME

    text = cli("sessions", "show", "cli:default", "--events", "--home", str(home)).stdout
    assert "echo: hi" in text and "session.idle" in text


def test_replies_nobody_saw_are_listed_and_shown_once_by_chat(
    daemon: ControlStack, home: Path, loop_thread: LoopThread
) -> None:
    message = InboundMessage(
        session_key="cli:away",
        text="weekly review",
        delivery=Delivery(channel="cli", chat_id="away"),
        origin="schedule",
    )

    async def fire_and_wait() -> None:
        await daemon.core.bus.publish_inbound(message)
        await eventually(
            lambda: _has_unread(daemon, "cli:away"), what="the scheduled reply kept unread"
        )

    loop_thread.run(fire_and_wait())
    shown = show(home, "away")
    assert [(h["role"], h["unread"]) for h in shown["history"]] == [
        ("user", False),
        ("assistant", True),
    ]
    assert [u["message_id"] for u in shown["unread"]] == [message.id]
    text = cli("sessions", "show", "away", "--home", str(home)).stdout
    assert "● unread" in text and "1 unread reply" in text

    async def open_chat() -> str:
        out = io.StringIO()
        async with ControlClient(home) as client:
            await _show_unread(client, "cli:away", Console(file=out, width=100))
            await _show_unread(client, "cli:away", Console(file=out, width=100))
        return out.getvalue()

    printed = loop_thread.run(open_chat())
    assert printed.count("while you were away (1)") == 1  # shown once, then read
    assert "echo: weekly review" in printed
    assert show(home, "away")["unread"] == []


async def _has_unread(daemon: ControlStack, key: str) -> bool:
    return bool(await daemon.core.sessions.unread(key))


def test_sessions_show_unknown_exits_1(daemon: ControlStack, home: Path) -> None:
    result = cli("sessions", "show", "cli:nope", "--home", str(home))
    assert result.exit_code == 1
    assert "no session 'cli:nope'" in result.stderr


def test_sessions_show_rejects_bad_keys(home: Path) -> None:
    result = cli("sessions", "show", "a b", "--home", str(home))
    assert result.exit_code == 64
    assert "session name" in result.stderr


# --- the client itself -------------------------------------------------------------


async def test_client_streams_deltas_and_progress(daemon: ControlStack, home: Path) -> None:
    async with ControlClient(home) as client:
        items = [item async for item in client.send("cli:s", "!tool yo", stream=True, timeout=5)]
        types = [i.type for i in items]
        assert types[0] == "accepted" and types[-1] == "reply", types
        assert "progress" in types and "delta" in types, types
        final = items[-1]
        assert isinstance(final, ReplyLine) and final.text == "listed"
        assert "".join(i.text for i in items if isinstance(i, DeltaLine)) == "listed"
        assert isinstance(items[0], Accepted)
        message = await client.message(items[0].message_id)
        assert message["reply"] == {"kind": "reply", "text": "listed"}
        with pytest.raises(ControlError) as info:
            await client.session("cli:unknown")
        assert info.value.status == 404
        with pytest.raises(ControlError, match="cli:NAME"):
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


def test_doctor_all_green(daemon: ControlStack, home: Path) -> None:
    _write_config(home, '[provider]\nkind = "scripted"\n')
    (home / "workspace").mkdir(exist_ok=True)
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 0, result.stdout
    assert "✗" not in result.stdout
    assert f"pid {os.getpid()}" in result.stdout
    assert "exec sandbox: " in result.stdout


def test_doctor_warns_loudly_without_exec_sandbox(daemon: ControlStack, home: Path) -> None:
    _write_config(home, '[provider]\nkind = "scripted"\n\n[tools.exec]\nsandbox = "none"\n')
    (home / "workspace").mkdir(exist_ok=True)
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 0, result.stdout
    assert "! exec sandbox: WARNING: none: exec commands from every channel run unconfined" in (
        result.stdout
    )
    assert 'tools.exec.sandbox = "none"' in result.stdout


def test_doctor_says_remote_exec_is_refused_when_bwrap_is_missing(
    daemon: ControlStack, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_config(home, '[provider]\nkind = "scripted"\n')
    (home / "workspace").mkdir(exist_ok=True)
    (home / "bin").mkdir()
    monkeypatch.setenv("PATH", str(home / "bin"))
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 0, result.stdout
    assert "! exec sandbox: WARNING: bubblewrap does not work" in result.stdout
    assert "Slack, Teams, webhook callers and their subagents are refused" in result.stdout
    assert "bwrap (package bubblewrap) is not on PATH" in result.stdout


def test_doctor_fails_when_required_bwrap_is_missing(
    daemon: ControlStack, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_config(home, '[provider]\nkind = "scripted"\n\n[tools.exec]\nsandbox = "bwrap"\n')
    (home / "workspace").mkdir(exist_ok=True)
    (home / "bin").mkdir()
    monkeypatch.setenv("PATH", str(home / "bin"))
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 1
    assert '✗ exec sandbox: tools.exec.sandbox = "bwrap" but bubblewrap does not work' in (
        result.stdout
    )


def test_doctor_checks_enabled_channels(daemon: ControlStack, home: Path) -> None:
    _write_config(
        home,
        '[provider]\nkind = "scripted"\n\n[channels.nosuch]\nenabled = true\n'
        "\n[channels.idle]\nenabled = false\n",
    )
    (home / "workspace").mkdir(exist_ok=True)
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 1
    assert "✗ channel nosuch credentials" in result.stdout
    assert "no package provides it" in result.stdout
    assert "idle" not in result.stdout


def test_doctor_reports_malformed_hook_files(daemon: ControlStack, home: Path) -> None:
    _write_config(home, '[provider]\nkind = "scripted"\n')
    hooks = home / "workspace" / ".github" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "broken.json").write_text('{"hooks": {"preToolUse": [{"bash": ""}]}}')
    (hooks / "fine.json").write_text('{"version": 1, "hooks": {"agentStop": [{"bash": "true"}]}}')
    (home / "hooks").mkdir()
    (home / "hooks" / "mine.json").write_text("{nope")
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 1
    out = result.stdout.replace("\n", " ")
    assert f"✗ hook file {hooks / 'broken.json'}: hooks.preToolUse[0].bash is not" in out
    assert f"✗ hook file {home / 'hooks' / 'mine.json'}: not JSON" in out
    (hooks / "broken.json").unlink()
    (home / "hooks" / "mine.json").unlink()
    assert cli("trust", "allow", str(hooks / "fine.json"), "--home", str(home)).exit_code == 0
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 0, result.stdout
    assert "✓ hook files: 1 hooks from 1 files" in result.stdout


def test_doctor_invalid_config(home: Path) -> None:
    _write_config(home, "this is not toml = = =\n")
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 1
    assert "✗ config valid" in result.stdout


# --- exit codes, bad text, limits --------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [],  # no command: help, but still a usage error
        ["nosuch"],
        ["send"],  # TEXT missing
        ["send", "--timeout", "0", "hi"],
        ["status", "--bogus"],
        ["schedule", "add", "--every", "5m", "--cron", "* * * * *", "both"],
    ],
)
def test_usage_errors_exit_64(home: Path, args: list[str]) -> None:
    result = cli(*args)
    assert result.exit_code == 64, result.output


def test_help_names_every_exit_code() -> None:
    result = cli("--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for part in ["0 success", "1 failure", "2 no gateway is running", "64 usage error"]:
        assert part in text


def test_not_utf8_argument_is_refused_before_sending(relay: Relay) -> None:
    # How a byte that is not UTF-8 reaches Python through argv (surrogateescape).
    result = cli("send", "--home", str(relay_home(relay)), "caf\udce9")
    assert result.exit_code == 64
    assert "not valid UTF-8 (byte 0xe9 at character 3)" in plain(result.stderr)
    lone = cli("send", "--home", str(relay_home(relay)), "a \ud800")
    assert lone.exit_code == 64
    assert "lone surrogate U+D800" in plain(lone.stderr)
    schedule = cli("schedule", "add", "--every", "5m", "--home", str(relay_home(relay)), "\udcff")
    assert schedule.exit_code == 64
    assert relay.posts == []


def test_not_utf8_stdin_is_refused_before_sending(relay: Relay) -> None:
    result = CliRunner().invoke(
        app, ["send", "--home", str(relay_home(relay)), "-"], input=b"ok \xff\xfe"
    )
    assert result.exit_code == 64
    assert "stdin is not valid UTF-8 (byte 0xff at offset 3)" in plain(result.stderr)
    assert relay.posts == []


def test_utf8_stdin_is_sent(relay: Relay) -> None:
    result = CliRunner().invoke(
        app, ["send", "--home", str(relay_home(relay)), "-"], input="héllo ✓\n".encode()
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "echo: héllo ✓\n"
    assert posted(relay)[0]["text"] == "héllo ✓\n"


def test_text_over_the_limit_is_refused_before_sending(relay: Relay) -> None:
    big = "é" * (600 * 1024)  # 1.2 MB as UTF-8
    result = cli("send", "--home", str(relay_home(relay)), big)
    assert result.exit_code == 64
    assert "over the gateway's limit of 1 MiB" in plain(result.stderr)
    piped = CliRunner().invoke(
        app, ["send", "--home", str(relay_home(relay)), "-"], input=b"x" * (1024 * 1024 + 1)
    )
    assert piped.exit_code == 64
    assert "1 MiB" in plain(piped.stderr)
    # Just under the limit as text, but over it once wrapped in JSON: the client says so.
    near = cli("send", "--home", str(relay_home(relay)), "x\n" * 350_000)  # \n is 2 in JSON
    assert near.exit_code == 64
    assert "over the control socket's limit of 1 MiB" in plain(near.stderr)
    assert relay.posts == []


def test_text_just_under_the_limit_is_answered(daemon: ControlStack, home: Path) -> None:
    text = "y" * (1024 * 1024 - 200)
    result = cli("send", "--home", str(home), text)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"echo: {text}\n"


async def test_control_routes_refuse_bad_text_and_big_bodies(
    daemon: ControlStack, home: Path
) -> None:
    json_type = {"Content-Type": "application/json"}
    # force_close: the refused uploads leave no kept-alive connection for the daemon's
    # teardown to cut (a socket collected later fails another test as unraisable).
    connector = aiohttp.UnixConnector(path=str(socket_path(home)), force_close=True)
    async with aiohttp.ClientSession("http://familiar", connector=connector) as http:
        for path in ("/v1/messages", "/v1/schedules", "/v1/sessions/cli:default/read"):
            for body, problem in [
                (b'{"text": "\\ud800", "prompt": "\\ud800"}', "lone UTF-16 surrogate"),
                (b'{"text": "\xff", "prompt": "\xff"}', "not valid UTF-8 (byte 0xff"),
            ]:
                async with http.post(path, data=body, headers=json_type) as resp:
                    assert resp.status == 400, (path, body)
                    assert problem in (await resp.json())["error"]
            big = io.BytesIO(b" " * (1024 * 1024 + 1))
            async with http.post(path, data=big, headers=json_type) as r:
                assert r.status == 413
                assert (await r.json())["error"].startswith(
                    "the request body is over 1 MiB (1,048,577 bytes); send a shorter text"
                )
    async with ControlClient(home) as client:
        with pytest.raises(RequestTooLarge, match=r"over the control socket's limit of 1 MiB"):
            await client.add_schedule(
                kind="every", spec="5m", prompt="p" * (1024 * 1024), session="cli:x", timezone=None
            )


def test_send_when_the_gateway_stops_exits_1(
    daemon: ControlStack, home: Path, loop_thread: LoopThread
) -> None:
    async def stop_once_running() -> None:
        await eventually(lambda: daemon.core.runtime.busy_sessions > 0, what="the turn")
        await daemon.cli.stop()  # what the daemon does on SIGTERM, after the grace

    stopping = asyncio.run_coroutine_threadsafe(stop_once_running(), loop_thread.loop)
    result = cli("send", "--home", str(home), "--session", "halt", "!hang")
    stopping.result(timeout=30)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("the gateway is stopping; message ")
    assert line.endswith(
        " stays queued and will be answered after it restarts "
        "(see: familiar sessions show cli:halt --events)"
    )
    assert result.stdout == ""


# --- chat with piped input -----------------------------------------------------------


def test_chat_with_piped_input_prints_each_reply_once(relay: Relay) -> None:
    result = CliRunner().invoke(
        app,
        ["chat", "--home", str(relay_home(relay)), "--session", "pipe"],
        input="first\n\nsecond line\n",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "echo: first\necho: second line\n"
    assert [b["text"] for b in posted(relay)] == ["first", "second line"]
    assert {b["session"] for b in posted(relay)} == {"cli:pipe"}


def test_chat_with_piped_input_stops_at_quit_and_reports_errors(
    daemon: ControlStack, home: Path
) -> None:
    result = CliRunner().invoke(
        app, ["chat", "--home", str(home)], input="!fail now\nthen\n/quit\nnever\n"
    )
    assert result.exit_code == 1
    assert result.stdout == "echo: then\n"
    assert "provider failed" in result.stderr
    assert "never" not in str(show(home, "cli:default")["history"])


def test_chat_with_piped_bad_bytes_exits_64(relay: Relay) -> None:
    result = CliRunner().invoke(
        app, ["chat", "--home", str(relay_home(relay))], input=b"fine\nbad \xff\nlater\n"
    )
    assert result.exit_code == 64
    assert result.stdout == "echo: fine\n"
    assert "line 2 is not valid UTF-8 (byte 0xff)" in result.stderr
    assert [b["text"] for b in posted(relay)] == ["fine"]


def test_chat_with_piped_input_without_daemon_exits_2(home: Path) -> None:
    result = CliRunner().invoke(app, ["chat", "--home", str(home)], input="hi\n")
    assert result.exit_code == 2
    assert HINT in result.stderr


# --- config show, doctor: URLs and exposure ------------------------------------------


def test_config_show_masks_credentials_inside_urls(home: Path) -> None:
    _write_config(
        home,
        '[provider]\nkind = "openai"\nmodel = "m"\n'
        'base_url = "https://ann:pw-in-url-1@llm.example/v1?api-key=q-key-2&v=3"\n'
        '\n[store]\nurl = "postgresql+asyncpg://fam:pg-pass-3@db.example:5432/fam"\n',
    )
    for args in (["config", "show"], ["config", "show", "--json"]):
        result = cli(*args, "--home", str(home))
        assert result.exit_code == 0, result.stderr
        for secret in ("pw-in-url-1", "q-key-2", "pg-pass-3"):
            assert secret not in result.stdout
        assert "https://ann:**********@llm.example/v1?api-key=**********&v=3" in result.stdout
        assert "postgresql+asyncpg://fam:**********@db.example:5432/fam" in result.stdout


def test_doctor_warns_about_an_exposed_http_host(daemon: ControlStack, home: Path) -> None:
    _write_config(home, '[provider]\nkind = "scripted"\n\n[http]\nhost = "0.0.0.0"\n')
    (home / "workspace").mkdir(exist_ok=True)
    result = cli("doctor", "--home", str(home))
    assert result.exit_code == 0, result.stdout  # a warning, not a failure
    (line,) = [x for x in result.stdout.splitlines() if "http on loopback" in x]
    assert line.startswith("! http on loopback: http.host is 0.0.0.0 (every interface)")
    assert "/metrics" in line
    _write_config(home, '[provider]\nkind = "scripted"\n\n[http]\nhost = "::1"\n')
    assert "http on loopback" not in cli("doctor", "--home", str(home)).stdout
