"""The Chat page's replies while they are made: one send per message, followed live.

A message typed on the Chat page is sent through the control API (``POST
/v1/ui/messages``, a task of the panel's own) and what comes back (deltas, progress
notes, the reply) is kept in a `LiveTurn`. The page's Server-Sent Events stream of that
turn waits on it: a browser that connects late, or twice, sees the same turn. A turn
is forgotten a while after it ended; its session's history has it then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.errors import FamiliarError
from gateway.control.client import ControlClient
from gateway.control.protocol import Accepted, DeltaLine, ProgressLine, ReplyLine, TimeoutLine
from gateway.ui.transcript import Step, steps_of

__all__ = ["LiveTurn", "LiveTurns"]

log = logging.getLogger(__name__)

_KEPT = 200
"""How many ended turns are remembered (for a stream that connects after the end)."""
_RUNNING = frozenset({"running"})
"""Task states of a subagent still at work (``TaskStatus``)."""
_STEP_CHARS = 4000
_ACCEPT_WAIT = 30.0
"""Seconds to wait for the gateway to take the message before the page gives up."""


@dataclass(eq=False)
class LiveTurn:
    """One message of the Chat page and its reply as it comes."""

    session: str
    text: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    """The panel's own id of the turn (also the message's ``client_id``)."""
    message_id: str | None = None
    deltas: list[str] = field(default_factory=list)
    progress: str = ""
    steps: list[Step] = field(default_factory=list)
    reply: ReplyLine | None = None
    problem: str | None = None
    """Why no reply came (a timeout, a lost connection, a refusal)."""
    ended: bool = False
    started: float = field(default_factory=time.time)
    version: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def streamed(self) -> str:
        return "".join(self.deltas)

    def bump(self) -> None:
        """Something changed: wake whoever waits in `changed`."""
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, seen: int) -> None:
        """Return once the turn is newer than version ``seen`` (at once if it is)."""
        if self.version == seen:
            await self._changed.wait()


class LiveTurns:
    """The Chat page's turns in flight (and the last ones that ended)."""

    def __init__(self, client: Callable[[], ControlClient]) -> None:
        self._client = client
        self._turns: OrderedDict[str, LiveTurn] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, turn_id: str) -> LiveTurn | None:
        return self._turns.get(turn_id)

    def of_session(self, session: str) -> list[LiveTurn]:
        """The turns of ``session`` in flight, and the ones that ended lately."""
        return [t for t in self._turns.values() if t.session == session]

    async def start(self, session: str, text: str, operator: str) -> LiveTurn:
        """Send ``text`` to ``session`` as ``operator`` and follow the answer in a task.

        Returns once the gateway took the message (or refused it: then the turn has
        ended with its ``problem``).
        """
        turn = LiveTurn(session=session, text=text)
        self._turns[turn.id] = turn
        self._forget_old()
        task = asyncio.create_task(self._follow(turn, operator), name=f"ui-chat-{turn.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_ACCEPT_WAIT):
                while turn.message_id is None and not turn.ended:
                    await turn.changed(turn.version)
        return turn

    def _forget_old(self) -> None:
        ended = [k for k, t in self._turns.items() if t.ended]
        for key in ended[: max(0, len(ended) - _KEPT)]:
            del self._turns[key]

    async def _follow(self, turn: LiveTurn, operator: str) -> None:
        try:
            async with self._client() as client:
                lines = client.send(turn.session, turn.text, operator=operator, client_id=turn.id)
                async with contextlib.aclosing(lines):
                    async for line in lines:
                        await self._take(client, turn, line)
                if turn.message_id is not None:
                    await self._refresh_steps(client, turn)
        except FamiliarError as exc:
            turn.problem = str(exc)
            log.warning("ui chat send failed session=%s error=%s", turn.session, exc)
        finally:
            turn.ended = True
            turn.bump()

    async def _take(self, client: ControlClient, turn: LiveTurn, line: Any) -> None:
        if isinstance(line, Accepted):
            turn.message_id = line.message_id
        elif isinstance(line, DeltaLine):
            turn.deltas.append(line.text)
        elif isinstance(line, ProgressLine):
            turn.progress = line.text
            await self._refresh_steps(client, turn)
        elif isinstance(line, ReplyLine):
            turn.reply = line
        elif isinstance(line, TimeoutLine):
            turn.problem = (
                "the gateway is stopping; the message stays queued and is answered after it "
                "restarts"
                if line.reason == "stopping"
                else "no reply in time; the message stays queued"
            )
        turn.bump()

    @staticmethod
    async def _refresh_steps(client: ControlClient, turn: LiveTurn) -> None:
        """The turn's tool calls and subagents so far, from its session's event log (and
        each subagent's task, whose end is not an event of this message)."""
        assert turn.message_id is not None
        with contextlib.suppress(FamiliarError):  # steps are extra: the reply still comes
            found = await client.session(
                turn.session, events=True, message_id=turn.message_id, history=False
            )
            steps = steps_of(found.get("events", []))
            for step in steps:
                if step.agent_id is not None and step.state == "running":
                    task = await client.task(step.agent_id)
                    status = str(task.get("status", "running"))
                    if status not in _RUNNING:
                        step.state = "done" if status == "completed" else status
                        step.result = str(task.get("result") or "")[:_STEP_CHARS]
            turn.steps = steps
