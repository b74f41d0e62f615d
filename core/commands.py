"""Slash commands, handled before the model sees a message."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.errors import CommandError
from core.messages import InboundMessage

__all__ = ["CommandHandler", "CommandRouter", "Macro", "MacroHandler", "parse_command"]

CommandHandler = Callable[[InboundMessage, str], Awaitable[str]]
_COMMAND = re.compile(r"^/([a-zA-Z][a-zA-Z0-9_-]*)(?:\s+(.*))?$", re.DOTALL)


def parse_command(text: str) -> tuple[str, str] | None:
    """``("every", "5m check")`` for ``/every 5m check``; None if not a slash command.

    ``/etc/hosts looks odd`` is not a command (the word must end at whitespace).
    """
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    return match.group(1).lower(), (match.group(2) or "").strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class Macro:
    """What an orchestration command runs: the main agent on a prompt it wrote.

    Attributes:
        command: the command's name (``research``).
        argument: what followed it.
        prompt: the text the model answers instead of the command (kept in history).
        tools: the only tools the main agent may use meanwhile (None: its usual ones).
        autopilot: the message continues until ``task_complete``.
        report: where the run writes its report, if it writes one.
    """

    command: str
    argument: str
    prompt: str
    tools: tuple[str, ...] | None = None
    autopilot: bool = False
    report: str | None = None


MacroHandler = Callable[[InboundMessage, str], Awaitable[Macro]]
"""Writes a `Macro` for the command's argument; raises CommandError for a bad one."""


@dataclass(frozen=True, slots=True)
class _Command:
    handler: CommandHandler
    usage: str
    summary: str


class CommandRouter:
    """Maps command names to handlers; parts of the runtime register their own."""

    def __init__(self) -> None:
        self._commands: dict[str, _Command] = {}
        self._macros: dict[str, MacroHandler] = {}
        self.register("help", self._help, usage="/help", summary="list the commands")

    def register(self, name: str, handler: CommandHandler, *, usage: str, summary: str) -> None:
        self._commands[name] = _Command(handler, usage, summary)

    def register_macro(self, name: str, handler: MacroHandler, *, usage: str, summary: str) -> None:
        """Register an orchestration command: instead of answering itself, it has the
        agent answer the prompt its handler writes (`expand`)."""
        self._macros[name] = handler

        async def refused(message: InboundMessage, args: str) -> str:
            await handler(message, args)  # raises CommandError for bad arguments
            raise CommandError(f"/{name} runs the agent: it cannot answer by itself")

        self.register(name, refused, usage=usage, summary=summary)

    async def expand(self, message: InboundMessage) -> Macro | None:
        """The `Macro` of an orchestration command in ``message``; None for anything else.

        Raises:
            CommandError: the command's argument is not valid.
        """
        parsed = parse_command(message.text)
        handler = self._macros.get(parsed[0]) if parsed is not None else None
        if parsed is None or handler is None:
            return None
        return await handler(message, parsed[1])

    def wrap(self, name: str, wrapper: Callable[[CommandHandler], CommandHandler]) -> None:
        """Replace the handler of ``name`` by ``wrapper(handler)`` (no-op if unknown)."""
        command = self._commands.get(name)
        if command is not None:
            self._commands[name] = _Command(
                wrapper(command.handler), command.usage, command.summary
            )

    def handles(self, text: str) -> bool:
        parsed = parse_command(text)
        return parsed is not None

    async def dispatch(self, message: InboundMessage) -> str:
        """Run the command in ``message``; raises CommandError with a user-facing text."""
        parsed = parse_command(message.text)
        if parsed is None:
            raise CommandError("not a command")
        name, args = parsed
        command = self._commands.get(name)
        if command is None:
            raise CommandError(f"unknown command /{name} — try /help")
        return await command.handler(message, args)

    async def _help(self, _message: InboundMessage, _args: str) -> str:
        lines = ["Commands:"]
        for name in sorted(self._commands):
            c = self._commands[name]
            lines.append(f"  {c.usage} — {c.summary}")
        return "\n".join(lines)
