"""ApprovalService: exec commands that wait for the user, and what happens when answered.

An approval never blocks a turn: the asking turn records it, tells the model, and ends.
``/approve`` runs the command and ``/deny`` refuses it (each a message of its own), and
the outcome comes back to the model as a new ``system`` message in the session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

from core.background import BackgroundTask
from core.bus.sql import SqlBus
from core.errors import CommandError, PolicyDenied, ToolFailed
from core.messages import InboundMessage
from core.store.engine import Store
from core.tools.base import ToolContext

from .display import command_block, command_reference, command_short
from .records import ApprovalInfo, outcome_message_id
from .repository import ApprovalRepository, Decided, NewApproval

__all__ = ["ApprovalService", "CommandRunner"]

log = logging.getLogger(__name__)

SWEEP_INTERVAL = 60.0
"""Seconds between looks for approvals whose time ran out."""
_HUMANLESS_PREFIXES = ("subagent:",)
"""Sessions nobody types into: an approval asked there could never be answered."""


class CommandRunner(Protocol):
    """Runs an approved command the way ``exec`` does (``ExecRunner``)."""

    async def run(self, command: str, ctx: ToolContext, timeout: float | None = None) -> str:
        """``"exit code N\\n<output>"``; raises ToolFailed (timeout, cannot start)."""
        ...


class ApprovalService:
    """Records approvals, answers ``/approve`` and ``/deny``, and expires the unanswered.

    Args:
        store: the open store.
        bus: where outcomes are published for the model.
        runner: runs approved commands.
        workspace: where commands run.
        timeout: seconds an approval stays open (``tools.exec.approval_timeout``).
        clock: unix "now" (injected by tests).
        sweep_interval: seconds between expiry sweeps once started.
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: SqlBus,
        runner: CommandRunner,
        workspace: Path,
        timeout: float,
        clock: Callable[[], float] = time.time,
        sweep_interval: float = SWEEP_INTERVAL,
    ) -> None:
        self._rows = ApprovalRepository(store=store)
        self._asked: set[str] = set()
        """Messages whose turn asked for an approval here and has not replied yet."""
        self._bus = bus
        self._runner = runner
        self._workspace = workspace
        self._timeout = timeout
        self._clock = clock
        self._interval = sweep_interval
        self._sweeper = BackgroundTask("familiar-approval-sweeper")

    async def get(self, approval_id: str) -> ApprovalInfo | None:
        return await self._rows.get(approval_id)

    # -- asking (the exec tool's ApprovalGate) --------------------------------------------

    async def request(self, ctx: ToolContext, command: str, *, timeout: float, reason: str) -> str:
        """Record that ``command`` waits for approval; the tool result says how to answer."""
        message = ctx.message
        if message is None or _unanswerable(ctx.session_key, message):
            raise PolicyDenied(
                f"command refused: it {reason}, which needs the user's approval, and nobody "
                "can answer in this session (tools.exec.approval)"
            )
        now = self._clock()
        new = NewApproval(
            session_key=ctx.session_key,
            message_id=message.id,
            delivery=message.delivery,
            command=command,
            timeout=timeout,
            reason=reason,
        )
        info = await self._rows.create(new, now=now, expires_at=now + self._timeout)
        self._asked.add(message.id)
        log.info("approval requested id=%s reason=%s", info.id, reason)
        if info.status != "pending":
            return (
                f"Approval #{info.id} for this command was already {info.status}; "
                "its outcome comes as a separate message."
            )
        return (
            f"This command needs the user's approval (it {reason}). Approval #{info.id} is "
            f"pending: tell the user to answer /approve {info.id} or /deny {info.id}. "
            f"It expires unanswered in {_duration(self._timeout)}. Do not retry the command "
            "meanwhile: the outcome comes as a separate message."
        )

    async def notice(self, message_id: str) -> str:
        """What the reply to ``message_id`` must show the user, whatever the model wrote.

        The model relays approval requests in its own words; a prompt-injected model
        could misstate the command. So the reply itself lists each pending command as
        recorded (empty when there is none). Only turns that asked for an approval in
        this process are looked up: the query would otherwise cost every turn a read.
        """
        if message_id not in self._asked:
            return ""  # no approval asked for it in this process: spare every turn a query
        self._asked.discard(message_id)
        pending = await self._rows.pending_for(message_id)
        lines = [_pending_line(info) for info in pending]
        if not lines:
            return ""
        return "\n\nWaiting for your approval (nothing runs until you answer):\n" + "\n".join(lines)

    # -- answering ------------------------------------------------------------------------

    async def approve(self, message: InboundMessage, approval_id: str) -> str:
        """``/approve``: run the command, tell the model the result, confirm to the user."""
        decided = await self._decide(message, approval_id, "approved")
        info = decided.info
        if not decided.fresh:
            return await self._answered_before(message, info)
        command = info.command
        if decided.refused or not info.intact:
            log.warning("approval refused id=%s: the command does not match its digest", info.id)
            await self._report(info, _mismatch(info))
            raise CommandError(
                f"approval #{info.id} refused: the command to run does not match the one "
                "you were shown (its SHA-256 differs); nothing ran"
            )
        ctx = ToolContext(
            workspace=self._workspace,
            session_key=info.session_key,
            channel=info.delivery.channel,
            message_id=message.id,
            message=message,
        )
        try:
            result = await self._runner.run(command, ctx, info.timeout)
        except ToolFailed as exc:
            failed = f"The user approved #{info.id}; `{info.command}` failed: {exc}"
            await self._report(info, failed)
            return f"Approved #{info.id}, but {command_reference(info)} failed: {exc}"
        except BaseException:
            text = _interrupted(info)
            await asyncio.shield(self._report(info, text))
            raise
        status, _, output = result.partition("\n")
        exit_text = status.replace("exit code", "exit")
        await self._report(
            info,
            f"The user approved #{info.id}; `{info.command}` ran: {exit_text}, output:\n{output}",
        )
        return f"Approved #{info.id}: {command_reference(info)} ran ({exit_text})."

    async def deny(self, message: InboundMessage, approval_id: str) -> str:
        """``/deny``: refuse the command and tell the model so."""
        decided = await self._decide(message, approval_id, "denied")
        if not decided.fresh:
            return await self._answered_before(message, decided.info)
        await self._report(decided.info, _denied(decided.info))
        return f"Denied #{approval_id}: {command_reference(decided.info)} will not run."

    async def pending(self) -> list[ApprovalInfo]:
        """Every session's approvals still waiting for an answer, oldest first."""
        return await self._rows.pending(self._clock())

    async def decided(self, *, limit: int = 20) -> list[ApprovalInfo]:
        """The latest answered or expired approvals, newest first."""
        return await self._rows.decided(limit=limit)

    async def answer_from_outside(
        self, approval_id: str, decision: Literal["approve", "deny"], *, approver: str
    ) -> InboundMessage | None:
        """Answer from outside the conversation (the control panel) as ``approver``.

        Publishes ``/approve ID`` or ``/deny ID`` into the approval's session, as if
        typed there: its turn answers through `approve` / `deny` like any chat answer,
        in order with the session's other messages, and the confirmation goes to the
        conversation too. Returns that message (wait for its reply on the bus), or None
        when there is no such approval.

        Raises:
            CommandError: the approval is no longer pending, or its time ran out.
        """
        info = await self._rows.get(approval_id)
        if info is None:
            return None
        if info.status != "pending":
            raise CommandError(f"approval #{info.id} was already {info.status}")
        if info.expires_at <= self._clock():
            raise CommandError(
                f"approval #{info.id} expired unanswered; {command_short(info)} was not run"
            )
        message = InboundMessage(
            session_key=info.session_key,
            text=f"/{decision} {info.id}",
            delivery=info.delivery,
            sender=approver,
            approver=approver,
        )
        await self._bus.publish_inbound(message)
        log.info("approval answer published id=%s decision=%s", info.id, decision)
        return message

    async def _decide(
        self, message: InboundMessage, approval_id: str, decision: Literal["approved", "denied"]
    ) -> Decided:
        if message.approver is None:
            raise CommandError(
                f"/{'approve' if decision == 'approved' else 'deny'} is not allowed from here: "
                "this channel does not let its callers answer approvals (for a webhook hook: "
                "allow_approve = true)"
            )
        decided = await self._rows.decide(
            approval_id,
            message.session_key,
            decision=decision,
            now=self._clock(),
            by=message.approver,
            message_id=message.id,
        )
        if decided is None:
            raise CommandError(f"no pending approval #{approval_id} in this conversation")
        if decided.fresh:
            log.info("approval %s id=%s", decision, approval_id)
        return decided

    async def _answered_before(self, message: InboundMessage, info: ApprovalInfo) -> str:
        """Answer for an approval that this message did not just decide."""
        if info.decision_message_id == message.id and info.reported_at is None:
            # This very message decided it, and the process stopped before the outcome
            # went out (a redelivery): report it now, never run the command twice.
            text = _interrupted(info) if info.status == "approved" else _denied(info)
            await self._report(info, text)
            return f"Approval #{info.id} was {info.status}."
        if info.decision_message_id == message.id:
            return f"Approval #{info.id} was {info.status}."
        if info.status == "expired":
            if info.reported_at is None:
                await self._report(info, _expired(info))
            raise CommandError(
                f"approval #{info.id} expired unanswered; {command_short(info)} was not run"
            )
        raise CommandError(f"approval #{info.id} was already {info.status}")

    # -- expiry ---------------------------------------------------------------------------

    async def sweep(self) -> int:
        """Expire what ran out, report outcomes a crash left unreported; how many reported."""
        reported = 0
        for info in await self._rows.expire_due(self._clock()):
            log.info("approval expired id=%s", info.id)
            await self._report(info, _expired(info))
            reported += 1
        for info in await self._rows.unreported():
            await self._report(info, _expired(info) if info.status == "expired" else _denied(info))
            reported += 1
        return reported

    @property
    def running(self) -> bool:
        return self._sweeper.running

    async def start(self) -> None:
        """Sweep once now, then every ``sweep_interval`` seconds."""
        await self._sweep_logged()
        self._sweeper.start(self._sweep_loop)

    async def stop(self) -> None:
        await self._sweeper.stop()

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self._sweep_logged()

    async def _sweep_logged(self) -> None:
        try:
            await self.sweep()
        except Exception:
            log.exception("approval sweep failed; trying again later")

    # -- telling the model ----------------------------------------------------------------

    async def _report(self, info: ApprovalInfo, text: str) -> None:
        """Publish the outcome into the approval's session (once: the id is fixed)."""
        await self._bus.publish_inbound(
            InboundMessage(
                id=outcome_message_id(info.id),
                session_key=info.session_key,
                text=text,
                delivery=info.delivery,
                sender="approvals",
                origin="system",
            )
        )
        await self._rows.mark_reported(info.id, self._clock())


def _unanswerable(session_key: str, message: InboundMessage) -> bool:
    """Nobody could answer an approval asked here: a session nobody types into, or a
    user's message whose channel lets nobody answer (a webhook hook without
    ``allow_approve``), where asking could only wait until it expires."""
    if session_key.startswith(_HUMANLESS_PREFIXES):
        return True
    return message.origin == "user" and message.approver is None


def _pending_line(info: ApprovalInfo) -> str:
    """One pending approval in the reply's notice: the whole command, verbatim."""
    shown = command_block(info)
    answer = f"/approve {info.id} or /deny {info.id}"
    if shown.startswith("`"):
        return f"- #{info.id}: {shown} (it {info.reason}): {answer}"
    return f"- #{info.id} (it {info.reason}): {answer}{shown}"


def _mismatch(info: ApprovalInfo) -> str:
    return (
        f"The user approved #{info.id}, but the command to run no longer matched the one "
        "shown for approval (SHA-256 differs), so nothing ran."
    )


def _denied(info: ApprovalInfo) -> str:
    return f"The user denied #{info.id}; `{info.command}` was not run."


def _expired(info: ApprovalInfo) -> str:
    return f"Approval #{info.id} for `{info.command}` expired unanswered; it was not run."


def _interrupted(info: ApprovalInfo) -> str:
    return (
        f"The user approved #{info.id}; `{info.command}` was started but interrupted before it "
        "finished (it may have run partly). It was not retried."
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
