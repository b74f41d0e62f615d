"""``familiar send``: one message through the running gateway, and its reply."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from gateway.commands.common import (
    EXIT_FAILED,
    HomeOption,
    JsonOption,
    SessionOption,
    print_json,
    resolve_home,
    run_control,
)
from gateway.control_client import ControlClient, ControlError

__all__ = ["Outcome", "converse", "send"]

DEFAULT_SEND_TIMEOUT = 300.0


@dataclass
class Outcome:
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
    """
    outcome = Outcome()
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
        outcome = await converse(client, key, text, stream=stream, wait=wait, on_delta=_write_delta)
        if as_json:
            events = await _message_events(client, key, outcome.message_id)
            print_json(
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
    home_dir = resolve_home(home)
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise typer.BadParameter("the message is empty", param_hint="TEXT")
    raise typer.Exit(
        run_control(home_dir, _send(home_dir, session, text, wait=timeout, as_json=as_json))
    )
