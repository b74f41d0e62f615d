"""``familiar chat``: the REPL, its live reply view, Ctrl-C as /stop, scheduled replies."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.text import Text

from gateway.commands.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    home_option,
    resolve_home,
    run_control,
    session_option,
    stdout_console,
)
from gateway.commands.talk import converse, no_reply_text
from gateway.control.client import ControlClient, ControlError, DaemonUnavailable

if TYPE_CHECKING:
    from markdown_it.token import Token

__all__ = ["ReplyMarkdown", "chat", "reply_view"]


class ReplyMarkdown(Markdown):
    """A model's reply as Markdown, its line breaks kept.

    CommonMark joins the lines of a paragraph with a space (a "soft" break); a reply is
    written for a chat, where a newline is a newline, so each soft break is made a hard
    one (``line one\nline two`` shows on two lines).
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        _hard_breaks(self.parsed)


def _hard_breaks(tokens: Iterable[Token]) -> None:
    for token in tokens:
        if token.type == "softbreak":
            token.type = "hardbreak"
        if token.children:
            _hard_breaks(token.children)


def reply_view(text: str, format: str) -> RenderableType:
    """How chat shows a reply: the model's as Markdown, a command's (``/help``) as it is."""
    return ReplyMarkdown(text) if format == "markdown" else Text(text)


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
            parts.append(ReplyMarkdown("".join(self._deltas)))
        if self._note or not self._deltas:
            parts.append(f"[dim]… {escape(self._note)}[/dim]")
        self._live.update(Group(*parts))


# How long a stopped turn may take to settle after /stop before the chat gives up on it.
_STOPPED_TURN_WAIT = 30.0


async def _chat_turn(client: ControlClient, key: str, text: str, console: Console) -> None:
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()
    # Installed before anything is shown, so a Ctrl-C the user can react to is ours.
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    try:
        with Live("[dim]…[/dim]", console=console, transient=True, refresh_per_second=8) as live:
            view = _LiveReply(live)
            talk = asyncio.ensure_future(
                converse(
                    client,
                    key,
                    text,
                    stream=True,
                    wait=None,
                    on_delta=view.delta,
                    on_progress=view.progress,
                )
            )
            try:
                if not await _settled(talk, interrupted, timeout=None):
                    # Ctrl-C: send /stop, but keep this message's stream open so its
                    # "Stopped." reply ends this turn here rather than arriving later
                    # as an unsolicited reply. A second Ctrl-C stops waiting.
                    interrupted.clear()
                    await _chat_stop(client, key, console)
                    await _settled(talk, interrupted, timeout=_STOPPED_TURN_WAIT)
            finally:
                talk.cancel()  # no-op once done; else leaving the stream, not the message
                with contextlib.suppress(asyncio.CancelledError):
                    await talk
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if talk.cancelled():
        return
    outcome = talk.result()
    reply = outcome.reply
    if reply is None:
        console.print(escape(no_reply_text(outcome, key, None)), style="yellow")
    elif reply["kind"] == "reply":
        console.print(reply_view(reply["text"], reply["format"]))
    else:
        console.print(escape(reply["text"]), style="red")


async def _settled(
    talk: asyncio.Future[Any], interrupted: asyncio.Event, timeout: float | None
) -> bool:
    """Wait for ``talk`` until Ctrl-C or ``timeout``; True when it finished."""
    stop = asyncio.ensure_future(interrupted.wait())
    try:
        await asyncio.wait({talk, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    return talk.done()


async def _chat_stop(client: ControlClient, key: str, console: Console) -> None:
    console.print("[dim]stopping…[/dim]")
    try:
        outcome = await asyncio.wait_for(
            converse(client, key, "/stop", stream=False, wait=15.0), 45.0
        )
    except (TimeoutError, ControlError) as exc:
        console.print(f"[yellow]could not confirm the stop: {escape(str(exc) or 'timeout')}[/]")
        return
    if outcome.reply is not None:
        console.print(escape(outcome.reply["text"]), style="dim")


async def _chat(home: Path, key: str) -> int:
    console = stdout_console()
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
        await _show_unread(client, key, console)
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


async def _piped(home: Path, key: str) -> int:
    """Lines from a pipe: send each, print each reply once (errors on stderr)."""
    code = 0
    async with ControlClient(home) as client:
        await client.status()  # fail fast (exit 2) when no gateway is running
        number = 0
        while raw := await asyncio.to_thread(sys.stdin.buffer.readline):
            number += 1
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                bad = raw[exc.start : exc.start + 1].hex()
                print(f"line {number} is not valid UTF-8 (byte 0x{bad})", file=sys.stderr)
                return EXIT_USAGE
            if text in ("/quit", "/exit"):
                break
            if not text:
                continue
            outcome = await converse(client, key, text, stream=False, wait=None)
            reply = outcome.reply
            if reply is not None and reply["kind"] == "reply":
                print(reply["text"], flush=True)
                continue
            message = no_reply_text(outcome, key, None) if reply is None else reply["text"]
            print(message, file=sys.stderr, flush=True)
            code = EXIT_FAILED
    return code


async def _show_unread(client: ControlClient, key: str, console: Console) -> None:
    """Print the replies that arrived while nobody watched, then mark them read."""
    try:
        detail = await client.session(key)
    except ControlError as exc:
        if exc.status == 404:
            return  # a new session: nothing arrived yet
        raise
    unread = [u for u in detail.get("unread") or [] if isinstance(u, dict)]
    if not unread:
        return
    console.print(f"[dim]while you were away ({len(unread)}):[/dim]")
    for item in unread:
        console.print(ReplyMarkdown(str(item.get("text", ""))))
    await client.mark_read(key, upto=max(int(u["id"]) for u in unread))


async def _show_unsolicited(client: ControlClient, key: str, console: Console) -> None:
    """Print replies of this session that arrive on their own (schedules, check-ins)."""
    try:
        async for item in client.watch(key):
            if item.kind == "reply":
                view, style = reply_view(item.text, item.format), None
            else:
                view, style = Text(item.text), "red"

            def show(view: RenderableType = view, style: str | None = style) -> None:
                console.print("[dim]⏰ scheduled[/dim]")
                console.print(view, style=style)

            # Suspends the prompt while printing, then redraws it.
            await run_in_terminal(show)
    except DaemonUnavailable:
        await run_in_terminal(lambda: console.print("[yellow]the gateway went away[/yellow]"))


@click.command("chat")
@session_option
@home_option
def chat(session: str, home: Path | None) -> None:
    """Enter sends the message; Esc then Enter (or Alt+Enter) inserts a newline for
    multi-line input. Ctrl-C while a reply streams stops it (it sends "/stop").
    Ctrl-D or "/quit" leaves. Input history is kept in <home>/run/chat_history.

    When stdin is not a terminal, each line read is one message and each reply is
    printed once as plain text (no prompt, no Markdown); the exit status is 1 if any
    message got an error or no reply, 64 for a line that is not UTF-8.
    """
    home_dir = resolve_home(home)
    talk = _chat(home_dir, session) if sys.stdin.isatty() else _piped(home_dir, session)
    try:
        raise click.exceptions.Exit(run_control(home_dir, talk))
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130) from None
