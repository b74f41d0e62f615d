"""``familiar send``: one message through the running gateway, and its reply."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from gateway.commands.common import (
    EXIT_FAILED,
    home_option,
    json_option,
    print_json,
    resolve_home,
    run_control,
    session_option,
    text_argument,
    text_from_stdin,
)
from gateway.control.client import ControlClient, ControlError, DaemonUnavailable
from gateway.control.protocol import (
    Accepted,
    DeltaLine,
    ProgressLine,
    ReplyLine,
    StreamLine,
    TimeoutLine,
)

__all__ = ["Outcome", "converse", "no_reply_text", "send"]

DEFAULT_SEND_TIMEOUT = 300.0


@dataclass
class Outcome:
    """What one POST /v1/messages produced."""

    message_id: str | None = None
    final: ReplyLine | TimeoutLine | None = None
    deltas: list[str] = field(default_factory=list)
    lost: str | None = None
    """Why the connection ended after the message was accepted, with no reply."""

    @property
    def streamed(self) -> str:
        return "".join(self.deltas)

    @property
    def reply(self) -> dict[str, str] | None:
        if not isinstance(self.final, ReplyLine):
            return None
        return {"kind": self.final.kind, "text": self.final.text, "format": self.final.format}

    @property
    def queued(self) -> bool:
        """Accepted, and neither answered nor waited for: the gateway stopped, or the
        connection to it was lost (the message is answered once it runs again)."""
        stopping = isinstance(self.final, TimeoutLine) and self.final.reason == "stopping"
        return self.reply is None and (stopping or self.lost is not None)

    @property
    def status(self) -> str:
        """``done``, ``failed`` (an error reply), ``timeout`` (no reply in time) or
        ``queued`` (see `queued`)."""
        reply = self.reply
        if reply is None:
            return "queued" if self.queued else "timeout"
        return "done" if reply["kind"] == "reply" else "failed"

    @property
    def exit_code(self) -> int:
        reply = self.reply
        return 0 if reply is not None and reply["kind"] == "reply" else EXIT_FAILED


async def converse(
    client: ControlClient,
    key: str,
    text: str,
    *,
    stream: bool,
    wait: float | None,
    on_delta: Callable[[str], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> Outcome:
    """Send ``text`` to session ``key`` and collect what comes back.

    Args:
        client: an open control client.
        key: the session key, e.g. ``cli:default``.
        text: the message.
        stream: ask for deltas and progress notes.
        wait: seconds the gateway waits for the reply; None waits as long as it takes.
        on_delta: called with each piece of the streaming reply.
        on_progress: called with each progress note.

    Raises:
        DaemonUnavailable: no gateway took the message (once it has, a lost connection
            is `Outcome.lost`).
    """
    outcome = Outcome()
    items = client.send(key, text, stream=stream, timeout=wait)
    try:
        await _collect(items, outcome, on_delta, on_progress)
    except DaemonUnavailable as exc:
        if outcome.message_id is None:
            raise
        outcome.lost = str(exc)
    return outcome


async def _collect(
    items: AsyncGenerator[StreamLine, None],
    outcome: Outcome,
    on_delta: Callable[[str], None] | None,
    on_progress: Callable[[str], None] | None,
) -> None:
    async with contextlib.aclosing(items):
        async for item in items:
            if isinstance(item, Accepted):
                outcome.message_id = item.message_id
            elif isinstance(item, DeltaLine):
                outcome.deltas.append(item.text)
                if on_delta is not None:
                    on_delta(item.text)
            elif isinstance(item, ProgressLine):
                if on_progress is not None:
                    on_progress(item.text)
            else:
                outcome.final = item


def no_reply_text(outcome: Outcome, key: str, wait: float | None) -> str:
    """What to say when the wait for a reply ended without one."""
    see = f"see: familiar sessions show {key} --events"
    if outcome.lost is not None:
        return (
            f"the connection to the gateway was lost; message {outcome.message_id} stays "
            f"queued and will be answered once the gateway runs again ({see})"
        )
    if outcome.queued:
        return (
            f"the gateway is stopping; message {outcome.message_id} stays queued and will "
            f"be answered after it restarts ({see})"
        )
    return f"no reply within {wait or 0:g} s; message {outcome.message_id} stays queued ({see})"


async def _message_events(client: ControlClient, key: str, outcome: Outcome) -> list[Any]:
    if outcome.message_id is None or outcome.queued:
        return []  # (a gateway that stops or went away answers no more requests)
    try:
        detail = await client.session(key, events=True, message_id=outcome.message_id)
    except DaemonUnavailable:
        return []  # it stopped taking requests since (a reply during its shutdown)
    except ControlError as exc:
        if exc.status == 404:
            return []
        raise
    events = detail.get("events") or []
    return [e for e in events if isinstance(e, dict)]


def _write_delta(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()


async def _send(home: Path, key: str, text: str, *, wait: float | None, as_json: bool) -> int:
    stream = not as_json and sys.stdout.isatty()
    async with ControlClient(home) as client:
        outcome = await converse(client, key, text, stream=stream, wait=wait, on_delta=_write_delta)
        if as_json:
            events = await _message_events(client, key, outcome)
            if outcome.reply is None:
                print(no_reply_text(outcome, key, wait), file=sys.stderr)
            print_json(
                {
                    "session": key,
                    "message_id": outcome.message_id,
                    "status": outcome.status,
                    "reply": outcome.reply["text"] if outcome.reply else None,
                    "events": events,
                }
            )
            return outcome.exit_code
    reply = outcome.reply
    if reply is None:
        sys.stdout.write("\n" if outcome.deltas else "")
        print(no_reply_text(outcome, key, wait), file=sys.stderr)
    elif reply["kind"] != "reply":
        sys.stdout.write("\n" if outcome.deltas else "")
        print(reply["text"], file=sys.stderr)
    elif outcome.deltas and outcome.streamed.strip() == reply["text"].strip():
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n\n" if outcome.deltas else "")
        print(reply["text"])
    return outcome.exit_code


def _positive(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    if value <= 0:
        raise click.BadParameter("must be a positive number of seconds")
    return value


@click.command("send")
@click.argument(
    "text", callback=text_argument, help="The message (UTF-8, up to 1 MiB); '-' reads stdin."
)
@session_option
@click.option(
    "--timeout",
    type=float,
    metavar="S",
    default=DEFAULT_SEND_TIMEOUT,
    show_default=True,
    callback=_positive,
    help="Seconds to wait for the reply.",
)
@json_option()
@home_option
def send(text: str, session: str, timeout: float, as_json: bool, home: Path | None) -> None:
    """Exit status: 0 on a reply; 1 on an agent/provider error, a timeout, or when the
    gateway stops (or the connection to it is lost) after taking the message (it stays
    queued and is answered after a restart); 2 when no gateway took the message; 64 for
    a usage error (text that is not UTF-8 or is over 1 MiB included). With ``--json``,
    every message taken prints an object with its ``message_id`` and ``status``
    (``done``, ``failed``, ``timeout``, ``queued``).
    """
    home_dir = resolve_home(home)
    if text == "-":
        text = text_from_stdin()
    if not text.strip():
        raise click.BadParameter("the message is empty", param_hint="TEXT")
    raise click.exceptions.Exit(
        run_control(home_dir, _send(home_dir, session, text, wait=timeout, as_json=as_json))
    )
