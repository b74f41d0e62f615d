"""The ``familiar`` command line: set up, run, inspect and talk to the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import aiohttp
import typer
from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from pydantic import BaseModel, SecretStr
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from core.errors import ConfigError, FamiliarError
from core.providers.config import ProviderConfig
from gateway.commands.schedule import schedule_app
from gateway.config import CONFIG_FILE, FamiliarConfig, default_home, load_config
from gateway.control_client import ControlClient, ControlError, DaemonUnavailable
from gateway.init import init_home
from gateway.plugins import CHANNELS_GROUP, load_channels
from gateway.provider_detect import detect_provider
from gateway.service import ServiceError, ServiceManager, UnitKind

__all__ = ["CliDeps", "app", "main"]

T = TypeVar("T")

EXIT_FAILED = 1
EXIT_NO_DAEMON = 2
DEFAULT_SEND_TIMEOUT = 300.0
MASK = "**********"

_SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SECRET_KEY = re.compile(r"(secret|token|password|api_key|apikey)", re.IGNORECASE)

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="familiar: a self-hosted, always-on AI assistant gateway.",
)
config_app = typer.Typer(no_args_is_help=True, help="Inspect the configuration.")
sessions_app = typer.Typer(no_args_is_help=True, help="Inspect conversations and their events.")
service_app = typer.Typer(no_args_is_help=True, help="Run the gateway as a systemd service.")
app.add_typer(config_app, name="config")
app.add_typer(sessions_app, name="sessions")
app.add_typer(service_app, name="service")
app.add_typer(schedule_app, name="schedule")


@dataclass(kw_only=True)
class CliDeps:
    """Collaborators a caller may hand in as the click context object (tests do).

    Attributes:
        service_manager: drives systemctl for ``familiar service``; default: a real one.
    """

    service_manager: ServiceManager | None = None


def _session_key(name: str) -> str:
    if not _SESSION_NAME.fullmatch(name):
        raise typer.BadParameter(
            f"{name!r} is not a session name: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return f"cli:{name}"


HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        metavar="DIR",
        help="FAMILIAR_HOME (default: $FAMILIAR_HOME or ~/.familiar).",
        show_default=False,
    ),
]
SessionOption = Annotated[
    str,
    typer.Option(
        "--session",
        metavar="NAME",
        callback=_session_key,
        help="Session name; the conversation is the session key cli:NAME.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
UserOption = Annotated[
    bool | None,
    typer.Option(
        "--user/--system",
        help="A user unit (systemctl --user) or a system unit. Default: --system as root.",
        show_default=False,
    ),
]


def _home(home: Path | None) -> Path:
    return (home or default_home()).expanduser().absolute()


def _stdout() -> Console:
    return Console(highlight=False)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    _stderr().print(escape(message), style="red", soft_wrap=True)
    return typer.Exit(code)


def _no_daemon_hint(home: Path) -> str:
    return (
        f"no familiar gateway is running on {home} — "
        'start it with "familiar gateway" (or "make run")'
    )


def _run(home: Path, coro: Coroutine[Any, Any, T]) -> T:
    """Run one async command; map "no daemon" to exit 2 and daemon errors to exit 1."""
    try:
        return asyncio.run(coro)
    except DaemonUnavailable:
        # One line on stderr, no console styling: scripts grep for it.
        print(_no_daemon_hint(home), file=sys.stderr)
        raise typer.Exit(EXIT_NO_DAEMON) from None
    except ControlError as exc:
        raise _fail(str(exc)) from None


def _print_json(value: object) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _when(stamp: object, *, clock_only: bool = False) -> str:
    if not isinstance(stamp, int | float):
        return "-"
    return time.strftime("%H:%M:%S" if clock_only else "%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _duration(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return "?"
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours or days else []
    parts += [f"{minutes}m", f"{secs}s"] if not days else [f"{minutes}m"]
    return " ".join(parts)


# --- conversations -----------------------------------------------------------------


@dataclass
class _Outcome:
    """What one POST /v1/messages produced."""

    message_id: str | None = None
    final: dict[str, Any] | None = None
    deltas: list[str] = field(default_factory=list)

    @property
    def streamed(self) -> str:
        return "".join(self.deltas)

    @property
    def reply(self) -> dict[str, str] | None:
        if self.final is None or self.final.get("type") != "reply":
            return None
        return {
            "kind": str(self.final.get("kind", "reply")),
            "text": str(self.final.get("text", "")),
        }

    @property
    def exit_code(self) -> int:
        reply = self.reply
        return 0 if reply is not None and reply["kind"] == "reply" else EXIT_FAILED


async def _converse(
    client: ControlClient,
    key: str,
    text: str,
    *,
    stream: bool,
    wait: float | None,
    on_delta: Callable[[str], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> _Outcome:
    outcome = _Outcome()
    items = client.send(key, text, stream=stream, timeout=wait)
    async with contextlib.aclosing(items):
        async for item in items:
            kind, piece = item.get("type"), str(item.get("text", ""))
            if kind == "accepted":
                outcome.message_id = str(item.get("message_id"))
            elif kind == "delta":
                outcome.deltas.append(piece)
                if on_delta is not None:
                    on_delta(piece)
            elif kind == "progress" and on_progress is not None:
                on_progress(piece)
            elif kind in ("reply", "timeout"):
                outcome.final = item
    return outcome


async def _message_events(client: ControlClient, key: str, message_id: str | None) -> list[Any]:
    if message_id is None:
        return []
    try:
        detail = await client.session(key, events=True)
    except ControlError as exc:
        if exc.status == 404:
            return []
        raise
    events = detail.get("events") or []
    return [e for e in events if isinstance(e, dict) and e.get("message_id") == message_id]


def _write_delta(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()


async def _send(home: Path, key: str, text: str, *, wait: float | None, as_json: bool) -> int:
    stream = not as_json and sys.stdout.isatty()
    async with ControlClient(home) as client:
        outcome = await _converse(
            client, key, text, stream=stream, wait=wait, on_delta=_write_delta
        )
        if as_json:
            events = await _message_events(client, key, outcome.message_id)
            _print_json(
                {
                    "session": key,
                    "message_id": outcome.message_id,
                    "reply": outcome.reply,
                    "events": events,
                }
            )
            return outcome.exit_code
    reply = outcome.reply
    if reply is None:
        sys.stdout.write("\n" if outcome.deltas else "")
        print(
            f"no reply within {wait or 0:g} s; message {outcome.message_id} stays queued "
            f"(see: familiar sessions show {key} --events)",
            file=sys.stderr,
        )
    elif reply["kind"] != "reply":
        sys.stdout.write("\n" if outcome.deltas else "")
        print(reply["text"], file=sys.stderr)
    elif outcome.deltas and outcome.streamed.strip() == reply["text"].strip():
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n\n" if outcome.deltas else "")
        print(reply["text"])
    return outcome.exit_code


def _positive(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise typer.BadParameter("must be a positive number of seconds")
    return value


@app.command()
def send(
    text: Annotated[str, typer.Argument(help="The message; '-' reads it from stdin.")],
    session: SessionOption = "default",
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", metavar="S", callback=_positive, help="Seconds to wait for the reply."
        ),
    ] = DEFAULT_SEND_TIMEOUT,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Send TEXT through the running gateway and print the reply.

    Exit status: 0 on a reply, 1 on an agent/provider error or a timeout, 2 when no
    gateway is running.
    """
    home_dir = _home(home)
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise typer.BadParameter("the message is empty", param_hint="TEXT")
    raise typer.Exit(_run(home_dir, _send(home_dir, session, text, wait=timeout, as_json=as_json)))


# --- chat --------------------------------------------------------------------------


def _chat_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return bindings


class _LiveReply:
    """The reply as it streams: Markdown so far plus the latest progress note."""

    def __init__(self, live: Live) -> None:
        self._live = live
        self._deltas: list[str] = []
        self._note = ""

    def delta(self, piece: str) -> None:
        self._deltas.append(piece)
        self._note = ""
        self._show()

    def progress(self, text: str) -> None:
        self._note = text
        self._show()

    def _show(self) -> None:
        parts: list[RenderableType] = []
        if self._deltas:
            parts.append(Markdown("".join(self._deltas)))
        if self._note or not self._deltas:
            parts.append(f"[dim]… {escape(self._note)}[/dim]")
        self._live.update(Group(*parts))


async def _chat_turn(client: ControlClient, key: str, text: str, console: Console) -> None:
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()
    # Installed before anything is shown, so a Ctrl-C the user can react to is ours.
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    try:
        with Live("[dim]…[/dim]", console=console, transient=True, refresh_per_second=8) as live:
            view = _LiveReply(live)
            talk = asyncio.ensure_future(
                _converse(
                    client,
                    key,
                    text,
                    stream=True,
                    wait=None,
                    on_delta=view.delta,
                    on_progress=view.progress,
                )
            )
            stop = asyncio.ensure_future(interrupted.wait())
            try:
                await asyncio.wait({talk, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                talk.cancel()  # no-op once done; else leaving the stream, not the message
                with contextlib.suppress(asyncio.CancelledError):
                    await talk
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if talk.cancelled():
        await _chat_stop(client, key, console)
        return
    reply = talk.result().reply
    if reply is None:
        console.print("[yellow](no reply)[/yellow]")
    elif reply["kind"] == "reply":
        console.print(Markdown(reply["text"]))
    else:
        console.print(escape(reply["text"]), style="red")


async def _chat_stop(client: ControlClient, key: str, console: Console) -> None:
    console.print("[dim]stopping…[/dim]")
    try:
        outcome = await asyncio.wait_for(
            _converse(client, key, "/stop", stream=False, wait=15.0), 45.0
        )
    except (TimeoutError, ControlError) as exc:
        console.print(f"[yellow]could not confirm the stop: {escape(str(exc) or 'timeout')}[/]")
        return
    if outcome.reply is not None:
        console.print(escape(outcome.reply["text"]), style="dim")


async def _chat(home: Path, key: str) -> int:
    console = _stdout()
    run_dir = home / "run"
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    async with ControlClient(home) as client:
        await client.status()  # fail fast (exit 2) when no gateway is running
        console.print(
            f"[bold]familiar[/bold] chat, session [cyan]{escape(key)}[/cyan]. "
            "Enter sends, Esc Enter inserts a newline, Ctrl-C stops a reply, "
            "Ctrl-D or /quit exits."
        )
        prompt: PromptSession[str] = PromptSession(
            history=FileHistory(str(run_dir / "chat_history")), key_bindings=_chat_bindings()
        )
        watcher = asyncio.ensure_future(_show_unsolicited(client, key, console))
        try:
            while True:
                try:
                    text = (await prompt.prompt_async("you> ")).strip()
                except KeyboardInterrupt:
                    continue
                except EOFError:
                    break
                if text in ("/quit", "/exit"):
                    break
                if text:
                    await _chat_turn(client, key, text, console)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    return 0


async def _show_unsolicited(client: ControlClient, key: str, console: Console) -> None:
    """Print replies of this session that arrive on their own (schedules, check-ins)."""
    try:
        async for item in client.watch(key):
            if item.get("type") != "reply":
                continue
            text = str(item.get("text", ""))
            style = None if item.get("kind") == "reply" else "red"

            def show(text: str = text, style: str | None = style) -> None:
                console.print("[dim]⏰ scheduled[/dim]")
                console.print(Markdown(text) if style is None else escape(text), style=style)

            # Suspends the prompt while printing, then redraws it.
            await run_in_terminal(show)
    except DaemonUnavailable:
        await run_in_terminal(lambda: console.print("[yellow]the gateway went away[/yellow]"))


@app.command()
def chat(session: SessionOption = "default", home: HomeOption = None) -> None:
    """Talk to the gateway interactively; replies stream, then render as Markdown.

    Enter sends the message; Esc then Enter (or Alt+Enter) inserts a newline for
    multi-line input. Ctrl-C while a reply streams stops it (it sends "/stop").
    Ctrl-D or "/quit" leaves. Input history is kept in <home>/run/chat_history.
    """
    home_dir = _home(home)
    try:
        raise typer.Exit(_run(home_dir, _chat(home_dir, session)))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


# --- status, sessions --------------------------------------------------------------


def _status_table(status: dict[str, Any]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    provider = status.get("provider")
    if isinstance(provider, dict):
        where = f" at {provider['base_url']}" if provider.get("base_url") else ""
        provider_text = f"{provider.get('kind')} {provider.get('model') or ''}{where}"
    else:
        provider_text = "none configured"
    queue = status.get("queue") or {}
    rows = [
        ("gateway", f"pid {status.get('pid')}, version {status.get('version')}"),
        ("uptime", _duration(status.get("uptime_s"))),
        ("home", str(status.get("home"))),
        ("workspace", str(status.get("workspace"))),
        ("store", str(status.get("store"))),
        ("http", str(status.get("http") or "off")),
        ("provider", provider_text),
        ("sessions", f"{status.get('sessions')} ({status.get('busy_sessions')} busy)"),
        ("queue", f"{queue.get('pending', 0)} pending, {queue.get('claimed', 0)} claimed"),
    ]
    for name, value in rows:
        table.add_row(name, escape(value))
    channels = status.get("channels") or []
    for channel in channels:
        state = str(channel.get("state"))
        style = "green" if state in ("running", "started", "ok", "connected") else "yellow"
        table.add_row(f"channel {escape(str(channel.get('name')))}", f"[{style}]{escape(state)}[/]")
    return table


@app.command()
def status(as_json: JsonOption = False, home: HomeOption = None) -> None:
    """Show the running gateway: uptime, channels, sessions, queue and provider."""
    home_dir = _home(home)

    async def fetch() -> dict[str, Any]:
        async with ControlClient(home_dir) as client:
            return await client.status()

    result = _run(home_dir, fetch())
    if as_json:
        _print_json(result)
    else:
        _stdout().print(_status_table(result))


@sessions_app.command("list")
def sessions_list(as_json: JsonOption = False, home: HomeOption = None) -> None:
    """List sessions with their message counts."""
    home_dir = _home(home)

    async def fetch() -> list[dict[str, Any]]:
        async with ControlClient(home_dir) as client:
            return await client.sessions()

    rows = _run(home_dir, fetch())
    if as_json:
        _print_json({"sessions": rows})
        return
    if not rows:
        _stdout().print("no sessions yet")
        return
    table = Table("key", "channel", "messages", "pending", "updated")
    for row in rows:
        table.add_row(
            escape(str(row.get("key"))),
            escape(str(row.get("channel"))),
            str(row.get("messages", "")),
            str(row.get("pending", "")),
            _when(row.get("updated_at")),
        )
    _stdout().print(table)


def _print_session(detail: dict[str, Any], *, events: bool) -> None:
    console = _stdout()
    info = detail.get("session") or {}
    console.print(
        f"[bold]{escape(str(info.get('key')))}[/bold]  channel {escape(str(info.get('channel')))}"
        f"  messages {info.get('messages')}  updated {_when(info.get('updated_at'))}"
    )
    for entry in detail.get("history") or []:
        role = str(entry.get("role"))
        style = {"user": "cyan", "assistant": "green"}.get(role, "dim")
        console.print(f"[{style}]{escape(role)}[/]: {escape(str(entry.get('content') or ''))}")
    if not events:
        return
    table = Table(box=None, header_style="bold")
    for column in ("time", "type", "message"):
        table.add_column(column, no_wrap=True)
    table.add_column("data", overflow="fold")
    for event in detail.get("events") or []:
        data = json.dumps(event.get("data") or {}, ensure_ascii=False, default=str)
        table.add_row(
            _when(event.get("at"), clock_only=True),
            escape(str(event.get("type"))),
            escape(str(event.get("message_id") or "")[:8]),
            escape(data if len(data) <= 120 else data[:119] + "…"),
        )
    console.print(table)


@sessions_app.command("show")
def sessions_show(
    key: Annotated[str, typer.Argument(help="The session key, e.g. cli:default.")],
    events: Annotated[bool, typer.Option("--events", help="Also print the event log.")] = False,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Show one session's history (and, with --events, its event log)."""
    home_dir = _home(home)

    async def fetch() -> dict[str, Any]:
        async with ControlClient(home_dir) as client:
            try:
                return await client.session(key, events=events)
            except ControlError as exc:
                if exc.status == 404:
                    raise _fail(f"no session {key!r}") from None
                raise

    detail = _run(home_dir, fetch())
    if as_json:
        _print_json(detail)
    else:
        _print_session(detail, events=events)


# --- config ------------------------------------------------------------------------


def _masked(value: Any, key: str = "") -> Any:
    """A JSON-able copy of a config value with every secret replaced by the mask."""
    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, BaseModel):
        return {name: _masked(getattr(value, name), name) for name in type(value).model_fields}
    if isinstance(value, dict):
        return {str(k): _masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_masked(v, key) for v in value]
    if isinstance(value, str) and value and _SECRET_KEY.search(key):
        return MASK  # a secret typed as a plain string still never gets printed
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    return json.dumps(str(value), ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml(table: dict[str, Any], prefix: str = "") -> list[str]:
    lines: list[str] = []
    subtables = {k: v for k, v in table.items() if isinstance(v, dict) and v}
    for key, value in table.items():
        if key in subtables:
            continue
        if value is None:
            lines.append(f"# {_toml_key(key)} is not set")
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in subtables.items():
        name = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
        lines += ["", f"[{name}]", *_toml(value, name)]
    return lines


@config_app.command("show")
def config_show(as_json: JsonOption = False, home: HomeOption = None) -> None:
    """Print the effective configuration (config.toml + FAMILIAR_* env), secrets masked.

    Reads the config locally: no running gateway is needed.
    """
    home_dir = _home(home)
    try:
        config = load_config(home_dir)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    masked = _masked(config)
    if as_json:
        _print_json(masked)
        return
    source = home_dir / CONFIG_FILE
    header = f"# effective configuration of {home_dir}"
    header += "" if source.is_file() else f" ({CONFIG_FILE} not found: defaults and env)"
    typer.echo("\n".join([header, *_toml(masked)]))


# --- doctor ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Check:
    name: str
    ok: bool
    reason: str


def _check_home(home: Path) -> _Check:
    if not home.is_dir():
        return _Check("home writable", False, f"{home} does not exist; run: familiar init")
    try:
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as exc:
        return _Check("home writable", False, f"cannot write in {home}: {exc.strerror}")
    return _Check("home writable", True, str(home))


def _check_workspace(home: Path, config: FamiliarConfig | None) -> _Check:
    workspace = (config.workspace if config else None) or home / "workspace"
    workspace = workspace.expanduser()
    if not workspace.is_absolute():
        workspace = home / workspace
    if not workspace.is_dir():
        return _Check("workspace present", False, f"{workspace} is missing; run: familiar init")
    return _Check("workspace present", True, str(workspace))


async def _check_provider(config: FamiliarConfig | None) -> _Check:
    name = "provider reachable"
    if config is None:
        return _Check(name, False, "skipped: the config is invalid")
    source = "config"
    provider = config.provider
    if provider.kind is None:
        choice = await detect_provider(provider, os.environ)
        if choice is None:
            return _Check(
                name,
                False,
                "none configured or detected: set provider.kind in config.toml, "
                "export OPENAI_API_KEY / ANTHROPIC_API_KEY, or run Ollama",
            )
        provider, source = choice.config, choice.source
    if provider.kind == "scripted":
        return _Check(name, True, "scripted provider (no network)")
    return await _probe_provider(name, provider, source)


async def _probe_provider(name: str, provider: ProviderConfig, source: str) -> _Check:
    """GET the models list: any HTTP answer means reachable; 401 means a refused key."""
    base = provider.effective_base_url or ""
    label = f"{provider.kind} at {base}" + ("" if source == "config" else f" (from {source})")
    url = f"{base}/v1/models" if provider.kind == "anthropic" else f"{base}/models"
    headers: dict[str, str] = {}
    if provider.api_key is not None:
        secret = provider.api_key.get_secret_value()
        if provider.kind == "anthropic":
            headers = {"x-api-key": secret, "anthropic-version": "2023-06-01"}
        else:
            headers = {"Authorization": f"Bearer {secret}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3.0)) as http,
            http.get(url, headers=headers) as resp,
        ):
            code = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        return _Check(name, False, f"{label} is unreachable: {exc or type(exc).__name__}")
    if code == 401:
        return _Check(name, False, f"{label}: reachable but the key was refused")
    if provider.effective_model is None:
        return _Check(name, False, f"{label} answers, but provider.model is unset")
    return _Check(name, True, f"{label} answers (HTTP {code}), model {provider.effective_model}")


async def _check_daemon(home: Path) -> _Check:
    name = "daemon socket answers"
    try:
        async with ControlClient(home, connect_timeout=3.0) as client:
            result = await asyncio.wait_for(client.status(), 5.0)
    except DaemonUnavailable:
        return _Check(name, False, _no_daemon_hint(home))
    except (ControlError, TimeoutError) as exc:
        return _Check(name, False, f"the gateway did not answer properly: {exc or 'timeout'}")
    return _Check(name, True, f"pid {result.get('pid')}, up {_duration(result.get('uptime_s'))}")


def _check_channels(config: FamiliarConfig | None) -> list[_Check]:
    """Each enabled plugin channel is installed and accepts its table (credentials too)."""
    if config is None:
        return []
    entry_points = list(importlib.metadata.entry_points(group=CHANNELS_GROUP))
    checks = []
    for name, table in config.channels.items():
        if name == "cli" or not isinstance(table, dict) or table.get("enabled") is not True:
            continue
        label = f"channel {name} credentials"
        try:
            # Builds the channel (it validates its config) without starting it.
            load_channels({name: table}, entry_points)
        except ConfigError as exc:
            checks.append(_Check(label, False, str(exc)))
        else:
            checks.append(_Check(label, True, f"[channels.{name}] accepted"))
    return checks


async def _doctor(home: Path) -> list[_Check]:
    config: FamiliarConfig | None = None
    try:
        config = load_config(home)
        source = home / CONFIG_FILE
        where = str(source) if source.is_file() else f"defaults ({source} not found)"
        checks = [_Check("config valid", True, where)]
    except ConfigError as exc:
        checks = [_Check("config valid", False, str(exc))]
    checks += [_check_home(home), _check_workspace(home, config)]
    checks += await asyncio.gather(_check_provider(config), _check_daemon(home))
    return checks + _check_channels(config)


@app.command()
def doctor(home: HomeOption = None) -> None:
    """Check the setup: config, home, workspace, provider, gateway and channel credentials.

    Exits non-zero when any check failed.
    """
    home_dir = _home(home)
    checks = asyncio.run(_doctor(home_dir))
    console = _stdout()
    for check in checks:
        mark = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
        console.print(f"{mark} {escape(check.name)}: {escape(check.reason)}", soft_wrap=True)
    if not all(c.ok for c in checks):
        raise typer.Exit(EXIT_FAILED)


# --- init, gateway -----------------------------------------------------------------


@app.command()
def init(home: HomeOption = None) -> None:
    """Write a commented config.toml and scaffold the workspace (never overwrites)."""
    try:
        lines = init_home(_home(home))
    except (ConfigError, OSError) as exc:
        raise _fail(str(exc)) from None
    for line in lines:
        typer.echo(line)


@app.command()
def gateway(home: HomeOption = None) -> None:
    """Run the gateway in the foreground (what systemd runs)."""
    # Imported here, not at the top: the daemon's imports (store, scheduler, metrics)
    # would add most of a second to every other command's start.
    from gateway.daemon import run_gateway

    raise typer.Exit(run_gateway(_home(home)))


# --- service -----------------------------------------------------------------------


def _unit_kind(user: bool | None) -> UnitKind:
    if user is None:
        return "system" if os.geteuid() == 0 else "user"
    return "user" if user else "system"


def _manager(ctx: typer.Context) -> ServiceManager:
    deps = ctx.find_object(CliDeps)
    if deps is not None and deps.service_manager is not None:
        return deps.service_manager
    return ServiceManager()


def _service(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except (ServiceError, ConfigError) as exc:
        raise _fail(str(exc)) from None


@service_app.command("install")
def service_install(
    ctx: typer.Context,
    user: UserOption = None,
    now: Annotated[bool, typer.Option("--now", help="Also start it.")] = False,
    home: HomeOption = None,
) -> None:
    """Install and enable the systemd unit that runs `familiar gateway`."""
    # Without --home the manager picks the kind's home (/var/lib/familiar for --system).
    where = home.expanduser().absolute() if home else None
    lines = _service(_manager(ctx).install(_unit_kind(user), now=now, home=where))
    for line in lines:
        typer.echo(line)


@service_app.command("uninstall")
def service_uninstall(ctx: typer.Context, user: UserOption = None, home: HomeOption = None) -> None:
    """Stop, disable and remove the unit (the home and its data stay)."""
    for line in _service(_manager(ctx).uninstall(_unit_kind(user))):
        typer.echo(line)


@service_app.command("status")
def service_status(ctx: typer.Context, user: UserOption = None, home: HomeOption = None) -> None:
    """Show whether the unit is installed and running, with its recent log."""
    result = _service(_manager(ctx).status(_unit_kind(user)))
    state = "installed" if result.installed else "not installed"
    typer.echo(f"{result.unit_path}: {state}, {result.active_state}")
    if result.details:
        typer.echo(result.details)
    if not result.active:
        raise typer.Exit(3)  # systemctl status convention: 3 = not running


def main() -> None:
    """Entry point of the ``familiar`` console script."""
    try:
        app()
    except FamiliarError as exc:  # anything a command did not map itself
        print(f"familiar: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILED)


if __name__ == "__main__":
    main()
