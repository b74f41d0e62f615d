"""The real ``familiar`` CLI against a spawned daemon and a fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.control.client import ControlClient, DaemonUnavailable, socket_path
from tests.daemon_env import daemon_env
from tests.waiting import eventually_sync

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "familiar"
START_TIMEOUT = 60.0
RUN_TIMEOUT = 90.0


def _familiar_argv() -> list[str]:
    """The installed console script when there is one, else ``python -m gateway.cli``."""
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "gateway.cli"]


def familiar(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one CLI command to completion."""
    return subprocess.run(
        [*_familiar_argv(), *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=daemon_env(single=True),
        cwd=ROOT,
        check=False,
    )


def _stop(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=daemon_env(single=True),
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT)
        assert ready, "the fake OpenAI server did not start"
        line = proc.stdout.readline().split()
        assert line[:1] == ["PORT"], line
        yield f"http://127.0.0.1:{line[1]}/v1"
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()


async def _answers(home: Path) -> bool:
    try:
        async with ControlClient(home, connect_timeout=2.0) as client:
            await asyncio.wait_for(client.status(), 5.0)
    except (DaemonUnavailable, TimeoutError):
        return False
    return True


def _short_home() -> Path:
    # A Unix socket path must stay under ~107 bytes.
    return Path(tempfile.mkdtemp(prefix="fam-e2e-"))


@pytest.fixture(scope="module")
def home(fake_openai: str) -> Iterator[Path]:
    """A home with a running daemon that uses the fake OpenAI server."""
    path = _short_home()
    (path / "config.toml").write_text(
        "[provider]\n"
        'kind = "openai"\n'
        f'base_url = "{fake_openai}"\n'
        'model = "fake"\n'
        'api_key = "sk-test"\n'
        # Loopback under load can stall: retry those; a 4xx is never retried anyway.
        "max_retries = 2\n"
        "retry_backoff = 0.1\n"
        "timeout_connect = 30.0\n"
        "\n[http]\nport = 0\n",
        encoding="utf-8",
    )
    log = (path / "daemon.log").open("wb")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "gateway", "--home", str(path)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=daemon_env(single=True),
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not asyncio.run(_answers(path)):
            log_text = (path / "daemon.log").read_text(errors="replace")
            assert daemon.poll() is None, f"the daemon exited early:\n{log_text}"
            assert time.monotonic() < deadline, f"the daemon did not answer:\n{log_text}"
            time.sleep(0.2)
        yield path
    finally:
        _stop(daemon)
        log.close()
        shutil.rmtree(path, ignore_errors=True)


def _daemon_log(home: Path) -> str:
    return (home / "daemon.log").read_text(errors="replace")[-6000:]


def _explain(result: subprocess.CompletedProcess[str], home: Path) -> str:
    out = f"rc={result.returncode}\nstdout={result.stdout}\nstderr={result.stderr}"
    return f"{out}\ndaemon log:\n{_daemon_log(home)}"


@contextlib.contextmanager
def _daemon_log_on_failure(home: Path) -> Iterator[None]:
    try:
        yield
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ndaemon log:\n{_daemon_log(home)}") from exc


def test_send_prints_the_reply(home: Path) -> None:
    result = familiar(home, "send", "hi")
    assert result.returncode == 0, _explain(result, home)
    assert result.stdout == "echo: hi\n"


def test_send_json_and_session_events(home: Path) -> None:
    result = familiar(home, "send", "--session", "e2e", "--json", "json please")
    assert result.returncode == 0, _explain(result, home)
    out = json.loads(result.stdout)
    assert set(out) == {"session", "message_id", "status", "reply", "events"}
    assert out["session"] == "cli:e2e"
    assert (out["status"], out["reply"]) == ("done", "echo: json please")
    types = [e["type"] for e in out["events"]]
    assert types[0] == "user.message"
    assert types[-1] == "session.idle"
    assert types.count("assistant.turn_start") == 1

    shown = familiar(home, "sessions", "show", "cli:e2e", "--events", "--json")
    assert shown.returncode == 0, _explain(shown, home)
    detail = json.loads(shown.stdout)
    assert detail["session"]["key"] == "cli:e2e"
    types = [e["type"] for e in detail["events"]]
    assert types[0] == "user.message"
    assert types[-1] == "session.idle"
    assert {"role": "assistant", "content": "echo: json please"}.items() <= (
        detail["history"][-1].items()
    )

    listed = json.loads(familiar(home, "sessions", "list", "--json").stdout)
    assert "cli:e2e" in [s["key"] for s in listed["sessions"]]


def test_provider_error_exits_1(home: Path) -> None:
    result = familiar(home, "send", "--session", "failing", "!fail 400")
    assert result.returncode == 1, _explain(result, home)
    assert result.stderr.strip()


def test_status_json(home: Path) -> None:
    result = familiar(home, "status", "--json")
    assert result.returncode == 0, _explain(result, home)
    status = json.loads(result.stdout)
    assert status["provider"]["kind"] == "openai"
    assert status["provider"]["model"] == "fake"
    assert "cli" in [c["name"] for c in status["channels"]]
    assert status["store"] == "sqlite"


def test_config_show_masks_the_key(home: Path) -> None:
    result = familiar(home, "config", "show")
    assert result.returncode == 0, _explain(result, home)
    assert "sk-test" not in result.stdout
    assert 'api_key = "**********"' in result.stdout


def test_send_without_daemon_exits_2() -> None:
    empty = _short_home()
    try:
        result = familiar(empty, "send", "hi")
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    assert result.returncode == 2
    assert result.stderr.startswith(f"no familiar gateway is running on {empty}")
    assert '"familiar gateway"' in result.stderr


class Pty:
    """A child process on a pseudo-terminal, read with generous timeouts."""

    def __init__(self, argv: list[str]) -> None:
        master, slave = os.openpty()
        env = {**daemon_env(single=True), "TERM": "xterm", "COLUMNS": "100", "LINES": "40"}
        env["PROMPT_TOOLKIT_NO_CPR"] = "1"  # nobody answers cursor-position requests
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, close_fds=True
        )
        os.close(slave)
        self.master = master
        self.output = b""

    def read_until(self, token: bytes, *, start: int = 0, timeout: float = RUN_TIMEOUT) -> int:
        """Read until ``token`` appears after offset ``start``; return where it ends."""
        deadline = time.monotonic() + timeout
        while (found := self.output.find(token, start)) < 0:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{token!r} never appeared in {self.output[-2000:]!r}"
            ready, _, _ = select.select([self.master], [], [], min(remaining, 0.5))
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                assert chunk, f"the child exited before {token!r}: {self.output[-2000:]!r}"
                self.output += chunk
        return found + len(token)

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        _stop(self.proc)
        os.close(self.master)


def test_chat_through_a_pty(home: Path) -> None:
    term = Pty([*_familiar_argv(), "chat", "--session", "pty", "--home", str(home)])
    with _daemon_log_on_failure(home), contextlib.closing(term):
        at = term.read_until(b"you>")
        term.write(b"hello\r")
        at = term.read_until(b"echo: hello", start=at)
        term.read_until(b"you>", start=at)  # the prompt is back: Ctrl-D now reaches it
        term.write(b"\x04")
        assert term.proc.wait(timeout=RUN_TIMEOUT) == 0
    assert (home / "run" / "chat_history").read_text().count("hello") == 1
    shown = json.loads(familiar(home, "sessions", "show", "cli:pty", "--json").stdout)
    assert shown["history"][-1]["content"] == "echo: hello"


def test_socket_is_private(home: Path) -> None:
    assert socket_path(home).stat().st_mode & 0o777 == 0o600


def _wait_llm_call(fake_openai: str, text: str) -> None:
    """Wait until the fake OpenAI server received a request whose last user text is ``text``."""
    url = fake_openai.removesuffix("/v1") + "/_fake/requests"

    def arrived() -> bool:
        with urllib.request.urlopen(url, timeout=10) as response:
            return text in json.load(response)["user_texts"]

    eventually_sync(arrived, timeout=RUN_TIMEOUT, what=f"the LLM call for {text!r}")


def test_chat_ctrl_c_stops_the_reply(home: Path, fake_openai: str) -> None:
    term = Pty([*_familiar_argv(), "chat", "--session", "stopper", "--home", str(home)])
    with _daemon_log_on_failure(home), contextlib.closing(term):
        at = term.read_until(b"you>")
        term.write(b"!sleep 60\r")
        at = term.read_until("…".encode(), start=at)  # the reply is being waited for
        _wait_llm_call(fake_openai, "!sleep 60")  # Ctrl-C on a turn inside the LLM call
        term.proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground job
        at = term.read_until(b"Stopping the running turn.", start=at)
        # The stopped turn ends in this exchange, not later as an unsolicited reply.
        at = term.read_until(b"Stopped.", start=at)
        term.read_until(b"you>", start=at)
        term.write(b"\x04")
        assert term.proc.wait(timeout=RUN_TIMEOUT) == 0
    assert "scheduled" not in term.output.decode(errors="replace")
    deadline = time.monotonic() + RUN_TIMEOUT
    while True:  # the stopped turn settles after the /stop reply
        shown = familiar(home, "sessions", "show", "cli:stopper", "--events", "--json")
        types = [e["type"] for e in json.loads(shown.stdout)["events"]]
        if types.count("session.idle") == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "session.error" in types
    assert types.count("session.idle") == 2
    assert "assistant.turn_start" in types  # it was stopped inside the LLM call
