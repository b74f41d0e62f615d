"""``familiar send``: one message through the running gateway, and its reply."""

from __future__ import annotations

import sys
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
from gateway.control.conversation import Outcome, converse, no_reply_text

__all__ = ["Outcome", "converse", "no_reply_text", "send"]

DEFAULT_SEND_TIMEOUT = 300.0


def _exit_code(outcome: Outcome) -> int:
    return 0 if outcome.status == "done" else EXIT_FAILED


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
            return _exit_code(outcome)
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
    return _exit_code(outcome)


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
