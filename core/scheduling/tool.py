"""The ``manage_schedule`` tool: the agent creates, lists and cancels its own schedules."""

from __future__ import annotations

from typing import Literal

from core.errors import CommandError, ToolFailed, ToolRetry
from core.group.peer_tasks import GROUP_CHANNEL
from core.scheduling.commands import schedule_created_reply
from core.scheduling.records import ScheduleTarget
from core.scheduling.service import ScheduleService
from core.scheduling.spec import validate_spec
from core.tools.base import ToolContext
from core.tools.decorator import Dep, tool

__all__ = ["manage_schedule"]


@tool
async def manage_schedule(
    ctx: ToolContext,
    service: Dep[ScheduleService],
    action: Literal["create", "list", "cancel"],
    kind: Literal["every", "after", "at", "cron"] | None = None,
    spec: str | None = None,
    prompt: str | None = None,
    timezone: str | None = None,
    schedule_id: int | None = None,
) -> str:
    """Create, list or cancel scheduled prompts of this conversation.

    A schedule later sends its prompt to you as a message in this conversation, and your
    reply goes to the user's chat. Use it for reminders and recurring check-ins.

    Args:
        action: create, list (this conversation's active schedules) or cancel.
        kind: for create: every (repeat at an interval), after (once, after a delay),
            at (once, at a date and time) or cron (5-field cron expression).
        spec: for create: the interval or delay for every/after (10s to 1d, e.g. 30m,
            1h30m), an ISO date and time for at (e.g. 2026-11-23T09:00), or a cron
            expression for cron (e.g. "0 9 * * mon-fri").
        prompt: for create: the plain message to run (not a slash command).
        timezone: for create: IANA zone for at/cron (e.g. Europe/Berlin); default the
            user's configured zone.
        schedule_id: for cancel: the schedule's id (shown as #id).
    """
    if action == "list":
        schedules = await service.list(ctx.session_key)
        if not schedules:
            return "No active schedules in this conversation."
        return "\n".join(s.describe() for s in schedules)
    if action == "cancel":
        if schedule_id is None:
            raise ToolRetry("cancel needs schedule_id (see action=list)")
        cancelled = await service.cancel(schedule_id, ctx.session_key, message_id=ctx.message_id)
        if cancelled is None:
            raise ToolRetry(
                f"there is no active schedule #{schedule_id} in this conversation (see action=list)"
            )
        return f"Cancelled {cancelled.describe()}."
    missing = [
        name for name, value in (("kind", kind), ("spec", spec), ("prompt", prompt)) if not value
    ]
    if missing or kind is None or spec is None or prompt is None:
        raise ToolRetry(f"create needs {', '.join(missing)}")
    message = ctx.message
    if message is None:
        raise ToolFailed("no originating message to schedule replies for")
    if ctx.root_channel == GROUP_CHANNEL:
        raise ToolFailed(
            "this conversation is a task another group member delegated: it ends with "
            "this answer, and a schedule's later replies would reach nobody (say in the "
            "answer what should be done later instead)"
        )
    try:
        checked = validate_spec(
            kind, spec, prompt, tz=timezone, now=service.now(), default_tz=service.default_timezone
        )
    except CommandError as exc:
        raise ToolRetry(str(exc)) from None
    target = ScheduleTarget(ctx.session_key, message.delivery)
    try:
        info = await service.create(target, checked, message_id=ctx.message_id or None)
    except CommandError as exc:
        raise ToolFailed(str(exc)) from None
    return schedule_created_reply(info)
