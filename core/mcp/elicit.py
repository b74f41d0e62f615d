"""Elicitation: an MCP server's question to the person, asked in the conversation.

A server's ``elicitation/create`` (during a plain call, or through a task's
``tasks/result``) becomes a question shown on the channel of the root session of the
call (a subagent's or a scheduled turn's too: only a person can answer), with the
requested fields and their choices, or the URL to open. The person answers with
``/answer <id> ...`` or ``/decline <id>`` (handled by whichever process claims that
message: the question is a row, and the asking process waits for it to change); an
unanswered question is cancelled after ``mcp.elicitation_timeout``. An answer is checked
against the requested schema before it goes back; a bad one changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select, update

from core.bus.sql import SqlBus
from core.errors import CommandError
from core.messages import InboundMessage, OutboundMessage
from core.store.engine import Store

from .answers import parse_answer, render_fields
from .host import CallOwner
from .rows import McpElicitationRow

__all__ = ["Answer", "ElicitationService", "Question"]

log = logging.getLogger(__name__)

_rows = McpElicitationRow.__table__  # type: ignore[attr-defined]
_DONE = {"accept": "answered", "decline": "declined", "cancel": "cancelled"}
POLL = 0.25
"""Seconds between looks at an unanswered question from the asking process (an answer
handled in the same process wakes it at once)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """What a server asks: a form (``requested_schema``) or a URL to open."""

    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """The person's reply: ``accept`` (with ``content`` for a form), ``decline``,
    ``cancel`` (expired), or ``refused`` (nobody could be asked; ``reason``)."""

    action: str
    content: dict[str, Any] | None = None
    reason: str | None = None


class ElicitationService:
    """Asks servers' questions in the conversation and takes the answers.

    Args:
        store: the open store.
        bus: where questions are shown.
        timeout: seconds a question waits (``mcp.elicitation_timeout``).
        clock: unix "now".
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        timeout: float,
        clock: Callable[[], float] = time.time,
        poll: float = POLL,
    ) -> None:
        self._store = store
        self._bus = bus
        self.timeout = timeout
        self._clock = clock
        self._poll = poll
        self._waiting: dict[str, asyncio.Event] = {}

    async def ask(
        self, server: str, owner: CallOwner | None, task_id: str | None, asked: Question
    ) -> Answer:
        """Show the question and wait for the answer (or decline, or cancel on expiry)."""
        if owner is None:
            return Answer("refused", reason=f"{server!r} asked outside any conversation")
        delivery = owner.delivery
        if delivery is None:
            delivery = await self._bus.last_user_delivery(owner.root_key)
        if delivery is None:
            return Answer("refused", reason=f"nobody can answer in {owner.root_key}")
        url_mode = asked.url is not None
        schema = asked.requested_schema
        now = self._clock()
        question = secrets.token_hex(3)
        values = {
            "id": question,
            "server": server,
            "session_key": owner.root_key,
            "delivery": delivery.model_dump_json(),
            "mode": "url" if url_mode else "form",
            "message": asked.message,
            "requested_schema": json.dumps(schema) if schema is not None else None,
            "url": asked.url,
            "task_id": task_id,
            "status": "pending",
            "created_at": now,
            "expires_at": now + self.timeout,
        }
        await self._store.transact(lambda conn: conn.execute(_rows.insert().values(values)))
        event = self._waiting[question] = asyncio.Event()
        try:
            await self._bus.publish_outbound(
                OutboundMessage(
                    id=f"elicit:{question}",
                    inbound_id=f"elicit:{question}",
                    session_key=owner.root_key,
                    delivery=delivery,
                    text=self._render(values, schema),
                )
            )
            log.info(
                "mcp question asked id=%s server=%s session=%s task=%s",
                question,
                server,
                owner.root_key,
                task_id,
            )
            return await self._wait(question, event, now + self.timeout)
        finally:
            self._waiting.pop(question, None)

    async def _wait(self, question: str, event: asyncio.Event, expires: float) -> Answer:
        while True:
            row = await self._row(question)
            if row is not None and row.status != "pending":
                content = json.loads(row.content) if row.content else None
                return Answer(row.status, content)
            left = expires - self._clock()
            if left <= 0:
                await self._decide(question, "cancel", None, when_before=None)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self._poll, left)):
                    await event.wait()

    def _render(self, values: dict[str, Any], schema: dict[str, Any] | None) -> str:
        question = values["id"]
        head = f"MCP server {values['server']!r} asks (question {question}):\n{values['message']}"
        expires = f"It is cancelled if unanswered in {_duration(self.timeout)}."
        if values["mode"] == "url":
            return (
                f"{head}\nOpen: {values['url']}\n"
                f"When done: /answer {question} (or /decline {question}). {expires}"
            )
        fields = render_fields(schema or {})
        return (
            f"{head}\n{fields}\n"
            f"Answer: /answer {question} <value> (several fields: name=value ...), "
            f"or /decline {question}. {expires}"
        )

    # -- answering ------------------------------------------------------------------------

    async def answer(self, message: InboundMessage, args: str) -> str:
        """``/answer <id> [value | name=value ...]``: check and send the answer."""
        question, _, rest = args.strip().partition(" ")
        row = await self._pending(message, question, "answer")
        if row.mode == "url":
            content = None
        else:
            schema = json.loads(row.requested_schema or "{}")
            try:
                content = parse_answer(schema, rest.strip())
            except ValueError as exc:
                raise CommandError(f"question {question}: {exc}") from None
        if not await self._decide(question, "accept", content, when_before=self._clock()):
            raise CommandError(f"question {question} was answered or expired meanwhile")
        return f"Answered question {question} of MCP server {row.server!r}."

    async def decline(self, message: InboundMessage, args: str) -> str:
        """``/decline <id>``: tell the server the person will not answer."""
        question = args.strip()
        row = await self._pending(message, question, "decline")
        if not await self._decide(question, "decline", None, when_before=self._clock()):
            raise CommandError(f"question {question} was answered or expired meanwhile")
        return f"Declined question {question} of MCP server {row.server!r}."

    async def _pending(self, message: InboundMessage, question: str, verb: str) -> Any:
        if not question:
            raise CommandError(f"usage: /{verb} <id> ... (the id the question shows)")
        row = await self._row(question)
        if row is None or row.session_key != message.session_key:
            raise CommandError(f"no question {question} in this conversation")
        if row.status != "pending" or row.expires_at <= self._clock():
            status = _DONE.get(row.status, "expired")
            raise CommandError(f"question {question} was {status} already")
        return row

    async def _row(self, question: str) -> Any:
        async with self._store.read() as conn:
            return (await conn.execute(select(_rows).where(_rows.c.id == question))).first()

    async def _decide(
        self, question: str, status: str, content: Any, *, when_before: float | None
    ) -> bool:
        values = {
            "status": status,
            "content": json.dumps(content) if content is not None else None,
            "answered_at": self._clock(),
        }

        def job(conn: Connection) -> bool:
            query = update(_rows).where(_rows.c.id == question, _rows.c.status == "pending")
            if when_before is not None:
                query = query.where(_rows.c.expires_at > when_before)
            return bool(conn.execute(query.values(values)).rowcount)

        decided = await self._store.transact(job)
        if decided:
            log.info("mcp question %s id=%s", _DONE.get(status, status), question)
            if (event := self._waiting.get(question)) is not None:
                event.set()
        return decided

    async def pending(self, session_key: str) -> list[tuple[str, str, str]]:
        """The open questions of a session: id, server, message."""
        query = select(_rows.c.id, _rows.c.server, _rows.c.message).where(
            _rows.c.session_key == session_key, _rows.c.status == "pending"
        )
        async with self._store.read() as conn:
            return [(r.id, r.server, r.message) for r in (await conn.execute(query)).all()]


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"
