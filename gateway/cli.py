"""The ``familiar`` command line: set up, run, inspect and talk to the gateway.

Commands are registered by name and import path in `COMMANDS` and imported only when
invoked: ``familiar --help`` lists them from there, and ``familiar send`` does not pay for
the store, the providers or aiohttp (tests/unit/test_cli_imports.py checks it).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass
from typing import Any

import typer

# typer 0.29 vendors click as typer._click; its UsageError is the one raised here.
from typer._click.core import Command, Context
from typer._click.exceptions import UsageError
from typer.core import TyperCommand, TyperGroup

from core.errors import FamiliarError
from gateway.commands import coercion
from gateway.commands.common import EXIT_FAILED, EXIT_USAGE, PLAIN_HELP, CliDeps

__all__ = ["COMMANDS", "CliDeps", "LazyCommand", "app", "main"]

coercion.install()  # before any command parses its arguments: no pydantic for plain values

EXIT_CODES = (
    "Exit status: 0 success (a reply), 1 failure (an agent/provider error, no reply yet, "
    "a failed check), 2 no gateway is running, 64 usage error (bad option or argument, "
    "text that is not UTF-8 or over the 1 MiB limit), 78 bad configuration (gateway)."
)


@dataclass(frozen=True)
class LazyCommand:
    """A command known by name until it is invoked.

    Attributes:
        target: ``module:attribute`` of a command function or a `typer.Typer` of subcommands.
        summary: the one-line help: ``familiar --help`` lists it, and the command's own
            help starts with it (a function's docstring, if any, is the rest).
    """

    target: str
    summary: str

    def load(self, name: str) -> Command:
        """Import the command and build its click command."""
        module, _, attribute = self.target.partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        if isinstance(obj, typer.Typer):
            group = typer.main.get_group(obj)
            group.name, group.help = name, self.summary
            return group
        details = inspect.getdoc(obj)
        holder = typer.Typer(**PLAIN_HELP, add_completion=False)
        holder.command(name, help=f"{self.summary}\n\n{details}" if details else self.summary)(obj)
        return typer.main.get_command(holder)


COMMANDS = {
    "send": LazyCommand(
        "gateway.commands.talk:send", "Send TEXT through the running gateway and print the reply."
    ),
    "chat": LazyCommand(
        "gateway.commands.chat:chat",
        "Talk to the gateway interactively; replies stream, then render as Markdown.",
    ),
    "status": LazyCommand(
        "gateway.commands.inspect:status",
        "Show the running gateway: uptime, channels, sessions, queue and provider.",
    ),
    "doctor": LazyCommand(
        "gateway.commands.doctor:doctor",
        "Check the setup: config, home, workspace, provider, channels and the gateway.",
    ),
    "backup": LazyCommand(
        "gateway.commands.backup:backup",
        "Copy the database to PATH (mode 0600), consistently, even while the gateway runs.",
    ),
    "init": LazyCommand(
        "gateway.commands.run:init",
        "Write a commented config.toml and scaffold the workspace (never overwrites).",
    ),
    "gateway": LazyCommand(
        "gateway.commands.run:gateway", "Run the gateway in the foreground (what systemd runs)."
    ),
    "config": LazyCommand("gateway.commands.config_show:config_app", "Inspect the configuration."),
    "sessions": LazyCommand(
        "gateway.commands.inspect:sessions_app", "Inspect conversations and their events."
    ),
    "service": LazyCommand(
        "gateway.commands.service:service_app", "Run the gateway as a systemd service."
    ),
    "schedule": LazyCommand(
        "gateway.commands.schedule:schedule_app",
        "Schedule prompts on the running gateway (list, add, cancel).",
    ),
    "memory": LazyCommand(
        "gateway.commands.memory:memory_app",
        "What the agent remembers (list, search, forget; any scope).",
    ),
    "mcp": LazyCommand(
        "gateway.commands.mcp:mcp_app",
        "MCP: list the servers whose tools the agent uses; serve familiar to other agents.",
    ),
    "trust": LazyCommand(
        "gateway.commands.trust:trust_app",
        "Workspace hook and MCP files: which the gateway honours (list, allow, revoke).",
    ),
    "tasks": LazyCommand(
        "gateway.commands.tasks:tasks_app", "Subagents started by the agent (list, show, cancel)."
    ),
    "todos": LazyCommand(
        "gateway.commands.todos:todos_app", "Fleet todos of the conversations (list)."
    ),
    "agents": LazyCommand(
        "gateway.commands.agents:agents_app",
        "Agent types: built-in ones and agent files, their tools and models (list).",
    ),
    "skills": LazyCommand(
        "gateway.commands.skills:skills_app",
        "Agent Skills: what loaded, from where, and why a skill did not.",
    ),
}
"""Every ``familiar`` command, in the order ``--help`` lists them."""


class _Listed(TyperCommand):
    """What ``--help`` lists for a command that is not imported: its name and summary."""


class _FamiliarGroup(TyperGroup):
    """The top-level group: lazy commands, and usage errors exit 64 (sysexits EX_USAGE).

    click's own 2 would read as "no gateway".
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, lazy in COMMANDS.items():
            self.commands.setdefault(name, _Listed(name, help=lazy.summary))

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and isinstance(command, _Listed):
            command = self.commands[name] = COMMANDS[name].load(name)
        return name, command, rest

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Context | None = None,
        **extra: Any,
    ) -> Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as exc:
            exc.exit_code = EXIT_USAGE
            raise

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:  # raised by a subcommand or one of its options
            exc.exit_code = EXIT_USAGE
            raise


app = typer.Typer(
    **PLAIN_HELP,
    cls=_FamiliarGroup,
    no_args_is_help=True,
    add_completion=False,
    help="familiar: a self-hosted, always-on AI assistant gateway.",
    epilog=EXIT_CODES,
)


@app.callback()
def _familiar() -> None:
    # A group needs a callback or a registered command; the commands come from COMMANDS.
    pass


def main() -> None:
    """Entry point of the ``familiar`` console script."""
    try:
        app()
    except FamiliarError as exc:  # anything a command did not map itself
        print(f"familiar: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILED)


if __name__ == "__main__":
    main()
