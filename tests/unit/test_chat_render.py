"""``familiar chat`` shows a command's output as it is and a model's reply as Markdown
with its line breaks (issue 25), told apart by the reply line's ``format``."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from rich.console import Console

from gateway.commands.chat import _chat_turn
from gateway.control.client import ControlClient
from gateway.control.protocol import ReplyLine, encode_line, parse_line
from tests.integration.control_stack import ControlStack
from tests.unit.test_cli_client import cli
from tests.unit.test_cli_client import daemon as daemon
from tests.unit.test_cli_client import home as home
from tests.unit.test_cli_client import loop_thread as loop_thread


def chat_turns(home: Path, *texts: str) -> list[str]:
    """What chat prints for each message (its own event loop, as `familiar chat` runs)."""

    async def run() -> list[str]:
        shown = []
        async with ControlClient(home) as client:
            for text in texts:
                out = io.StringIO()
                await _chat_turn(client, "cli:render", text, Console(file=out, width=100))
                shown.append(out.getvalue())
        return shown

    return asyncio.run(run())


def _lines(shown: str) -> list[str]:
    return [line.rstrip() for line in shown.splitlines() if line.strip()]


def test_command_output_is_plain_and_replies_keep_their_line_breaks(
    daemon: ControlStack, home: Path
) -> None:
    helped, broken, marked = chat_turns(
        home, "/help", "line one\nline two", "**strong** and `code`"
    )
    assert "/unschedule <id>" in helped and "/approve <id>" in helped
    assert "Commands:\n" in helped  # its lines as they are
    assert _lines(broken) == ["echo: line one", "line two"]  # not "echo: line one line two"
    assert "strong and code" in marked and "**" not in marked  # still Markdown


def test_a_failing_command_is_shown_plain_too(daemon: ControlStack, home: Path) -> None:
    (shown,) = chat_turns(home, "/nosuch <x>")
    assert "unknown command /nosuch — try /help" in shown


def test_the_reply_line_says_how_to_show_the_text(daemon: ControlStack, home: Path) -> None:
    sent = cli("send", "--json", "--home", str(home), "/help")
    assert sent.exit_code == 0, sent.stderr
    assert "<id>" in json.loads(sent.stdout)["reply"]  # `send` prints it as it is
    line = ReplyLine(message_id="m", session="cli:a", kind="reply", text="/x <y>", format="text")
    assert parse_line(encode_line(line)) == line
    older = {"type": "reply", "message_id": "m", "session": "cli:a", "kind": "reply", "text": "t"}
    parsed = parse_line(json.dumps(older).encode())
    assert isinstance(parsed, ReplyLine) and parsed.format == "markdown"
    assert parse_line(json.dumps({**older, "format": "html"}).encode()) is None
