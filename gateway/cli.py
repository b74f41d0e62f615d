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

import click

from core.errors import FamiliarError
from gateway.commands.common import EXIT_FAILED, EXIT_USAGE, CliDeps

__all__ = ["COMMANDS", "CliDeps", "LazyCommand", "app", "main"]

EXIT_CODES = (
    "Exit status: 0 success (a reply), 1 failure (an agent/provider error, no reply yet, "
    "a failed check), 2 no gateway is running, 64 usage error (bad option or argument, "
    "text that is not UTF-8 or over the 1 MiB limit), 78 bad configuration (gateway)."
)


@dataclass(frozen=True)
class LazyCommand:
    """A command known by name until it is invoked.

    Attributes:
        target: ``module:attribute`` of a `click.Command` (a `click.Group` for a command
            with subcommands).
        summary: the one-line help: ``familiar --help`` lists it, and the command's own
            help starts with it (a command's docstring, if any, is the rest; a group's
            help is the summary alone).
    """

    target: str
    summary: str

    def load(self, name: str) -> click.Command:
        """Import the command and name it."""
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        group = isinstance(command, click.Group)
        details = None if group or command.callback is None else inspect.getdoc(command.callback)
        command.name = name
        command.help = f"{self.summary}\n\n{details}" if details else self.summary
        return command


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
    "ui": LazyCommand(
        "gateway.commands.ui:ui",
        "Print a one-time login URL of the web panel (and open it on a desktop).",
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
    "group": LazyCommand(
        "gateway.commands.group:group_app",
        "Group mode: the members of the group and its timeline (roster, timeline).",
    ),
    "skills": LazyCommand(
        "gateway.commands.skills:skills_app",
        "Agent Skills: what loaded, from where, and why a skill did not.",
    ),
}
"""Every ``familiar`` command, in the order ``--help`` lists them."""


class FamiliarGroup(click.Group):
    """The top-level group: commands imported when invoked, and usage errors exit 64
    (sysexits EX_USAGE; click's own 2 would read as "no gateway").

    This is click's lazy-loading pattern (`get_command` imports on demand), except that
    ``--help`` lists the commands from `COMMANDS` without importing any of them.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(COMMANDS[cmd_name].load(cmd_name))
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, click.Command(name, help=lazy.summary).get_short_help_str(limit))
            for name, lazy in COMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            _exit_64(exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # raised by a subcommand or one of its options
            _exit_64(exc)
            raise


def _exit_64(error: click.UsageError) -> None:
    # click reads the exit status from the error (a class attribute, 2 for usage errors);
    # this one error's own attribute shadows it.
    error.exit_code = EXIT_USAGE  # type: ignore[misc]


app = FamiliarGroup(
    name="familiar",
    help="familiar: a self-hosted, always-on AI assistant gateway.",
    epilog=EXIT_CODES,
)
"""The ``familiar`` command (a `click.Group`)."""


def main() -> None:
    """Entry point of the ``familiar`` console script."""
    try:
        app.main()
    except FamiliarError as exc:  # anything a command did not map itself
        print(f"familiar: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILED)


if __name__ == "__main__":
    main()
