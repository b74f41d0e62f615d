"""What every ``familiar`` command shares: options, consoles, exit codes, error mapping."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from core.session_keys import cli_key, session_key_for
from gateway.control.protocol import MAX_BODY_BYTES, text_problem
from gateway.home import default_home, no_daemon_hint
from gateway.sizes import size_text

# Only what every command needs is imported above: rich, asyncio, the control client and
# the service manager are imported where they are used, so `familiar send` and `--help`
# start fast (tests/unit/test_cli_imports.py checks it).
if TYPE_CHECKING:
    from rich.console import Console

    from gateway.config import FamiliarConfig
    from gateway.control.client import ControlClient
    from gateway.service import ServiceManager

__all__ = [
    "EXIT_FAILED",
    "EXIT_NO_DAEMON",
    "EXIT_USAGE",
    "PIPE_WIDTH",
    "CliDeps",
    "CommandGroup",
    "command_group",
    "duration",
    "fail",
    "home_option",
    "json_option",
    "no_daemon_hint",
    "print_json",
    "query",
    "resolve_home",
    "run_control",
    "session_key_option",
    "session_option",
    "stdout_console",
    "text_argument",
    "text_from_stdin",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class CommandGroup(click.Group):
    """A command with subcommands, listed in the order they are defined."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


def command_group() -> CommandGroup:
    """A command with subcommands (``familiar schedule ...``), which prints its help when
    run without one; its name and help come from `gateway.cli.COMMANDS`."""
    return CommandGroup(no_args_is_help=True)


EXIT_FAILED = 1
EXIT_NO_DAEMON = 2
EXIT_USAGE = 64
"""sysexits.h EX_USAGE: a bad option or argument (click's own 2 would read as "no daemon")."""


@dataclass(kw_only=True)
class CliDeps:
    """Collaborators a caller may hand in as the click context object (tests do).

    Attributes:
        service_manager: drives systemctl for ``familiar service``; default: a real one.
    """

    service_manager: ServiceManager | None = None


def _session_key(_ctx: click.Context, _param: click.Parameter, name: str) -> str:
    try:
        return cli_key(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def session_key_option(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """Parameter callback: a session KEY, where a bare NAME means ``cli:NAME``."""
    try:
        return session_key_for(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


home_option = click.option(
    "--home",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="FAMILIAR_HOME (default: $FAMILIAR_HOME or ~/.familiar).",
)
"""``--home DIR``, which every command takes (its parameter: ``home: Path | None``)."""
session_option = click.option(
    "--session",
    metavar="NAME",
    default="default",
    show_default=True,
    callback=_session_key,
    help="Session name; the conversation is the session key cli:NAME.",
)
"""``--session NAME`` of ``send`` and ``chat`` (its parameter: ``session: str``, a key)."""


def json_option(help: str = "Print JSON instead of text.") -> Callable[[F], F]:
    """``--json`` (its parameter: ``as_json: bool``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def text_argument(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """Parameter callback: text to send must be UTF-8 and within the control socket's
    limit.

    ``-`` is left as it is (the command reads stdin with `text_from_stdin`).
    """
    if (problem := text_problem(value)) is not None:
        raise click.BadParameter(problem)
    size = len(value.encode())
    if size > MAX_BODY_BYTES:
        raise click.BadParameter(_too_long(f"{size:,} bytes"))
    return value


def text_from_stdin() -> str:
    """All of stdin as UTF-8 text, refused (usage error) when it is not text or too long."""
    data = sys.stdin.buffer.read(MAX_BODY_BYTES + 1)
    if len(data) > MAX_BODY_BYTES:
        raise click.BadParameter(
            _too_long(f"more than {MAX_BODY_BYTES:,} bytes on stdin"), param_hint="TEXT"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise click.BadParameter(
            f"stdin is not valid UTF-8 (byte 0x{bad} at offset {exc.start})", param_hint="TEXT"
        ) from None


def _too_long(what: str) -> str:
    return (
        f"the text is over the gateway's limit of {size_text(MAX_BODY_BYTES)} ({what}); "
        "send a shorter text, or put it in a workspace file and ask about that file"
    )


def resolve_home(home: Path | None) -> Path:
    """The absolute FAMILIAR_HOME: ``--home``, else $FAMILIAR_HOME or ~/.familiar."""
    return (home or default_home()).expanduser().absolute()


PIPE_WIDTH = 1_000_000
"""The width of a console whose output is not a terminal: as wide as the data, so a
table in a pipe or a file is never cut (``2026-11-27T02:1…``) or folded."""


def stdout_console(*, stderr: bool = False) -> Console:
    """The console every command prints through (stdout, or stderr).

    Markup stays on for the commands' own styling, but emoji codes are off: a session
    key such as ``teams:a:1AbCd`` or ``webhook:ok:default`` prints as it is. Data is
    printed as `gateway.commands.output.data` cells or `rich.markup.escape`-d, so
    ``[bold]`` in it stays literal too. Nothing is coloured by guesswork (no
    highlighting). When the output is not a terminal, lines are as wide as their data
    (`PIPE_WIDTH`) unless ``COLUMNS`` says otherwise.
    """
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, emoji=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = PIPE_WIDTH
    return console


def fail(message: str, code: int = EXIT_FAILED) -> click.exceptions.Exit:
    """Print ``message`` in red on stderr; return the exit for the caller to raise."""
    from rich.markup import escape

    stdout_console(stderr=True).print(escape(message), style="red", soft_wrap=True)
    return click.exceptions.Exit(code)


def config_or_fail(home: Path) -> FamiliarConfig:
    """The configuration of ``home``; an invalid one ends the command with its error."""
    from core.errors import ConfigError
    from gateway.config import load_config  # heavy: only the commands that read it pay

    try:
        return load_config(home)
    except ConfigError as exc:
        raise fail(str(exc)) from None


def run_control(home: Path, coro: Coroutine[Any, Any, T]) -> T:
    """Run one async command; map "no daemon" to exit 2 and daemon errors to exit 1."""
    import asyncio

    from gateway.control.client import ControlError, DaemonUnavailable, RequestTooLarge

    try:
        return asyncio.run(coro)
    except DaemonUnavailable:
        # One line on stderr, no console styling: scripts grep for it.
        print(no_daemon_hint(home), file=sys.stderr)
        raise click.exceptions.Exit(EXIT_NO_DAEMON) from None
    except RequestTooLarge as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    except ControlError as exc:
        raise fail(str(exc)) from None


def query(home: Path, call: Callable[[ControlClient], Awaitable[T]]) -> T:
    """Open a control client on ``home``, ``call`` it once, close it (as `run_control`)."""

    from gateway.control.client import ControlClient

    async def ask() -> T:
        async with ControlClient(home) as client:
            return await call(client)

    return run_control(home, ask())


def print_json(value: object) -> None:
    """Print ``value`` as indented JSON (non-JSON values as their ``str``)."""
    import json

    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def duration(seconds: object) -> str:
    """``seconds`` as ``1d 2h 3m``, ``2h 3m 4s`` or ``3m 4s``; ``?`` when not a number."""
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
