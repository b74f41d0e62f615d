"""Slash commands for schedules: /every, /after, /at, /cron, /schedules, /unschedule."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from core.commands import CommandRouter
from core.errors import CommandError
from core.messages import InboundMessage
from core.scheduling.records import ScheduleInfo
from core.scheduling.service import ScheduleService
from core.scheduling.spec import parse_command

__all__ = ["parse_schedule_id", "register_schedule_commands", "schedule_created_reply"]

_ID_RE = re.compile(r"#?\s*(\d{1,18})")
_UNSCHEDULE_USAGE = "usage: /unschedule <id> — e.g. /unschedule #3 (see /schedules for the ids)"
_KINDS: dict[str, tuple[str, str]] = {
    "every": ("/every <interval> <prompt>", "run a prompt repeatedly (10s to 1d), e.g. /every 5m"),
    "after": ("/after <delay> <prompt>", "run a prompt once after a delay (10s to 1d)"),
    "at": ("/at <date>T<time> [tz=Area/City] <prompt>", "run a prompt once at a date and time"),
    "cron": (
        '/cron "<m h dom mon dow>" [tz=Area/City] <prompt>',
        "run a prompt on a cron schedule",
    ),
}


def parse_schedule_id(text: str) -> int:
    """Read a schedule id as users write it: ``#3`` or ``3``.

    Raises:
        CommandError: the text is not an id.
    """
    match = _ID_RE.fullmatch(text.strip())
    if match is None:
        raise CommandError(_UNSCHEDULE_USAGE)
    return int(match.group(1))


def schedule_created_reply(info: ScheduleInfo) -> str:
    """The confirmation for a new schedule: id, kind, interval or next run, and the prompt."""
    return f"Scheduled {info.describe()}. Cancel it with /unschedule #{info.id}."


def register_schedule_commands(
    router: CommandRouter, service: ScheduleService, default_tz: str | None = None
) -> None:
    """Register the scheduling commands on ``router``.

    Args:
        router: the runtime's command router.
        service: the running schedule service.
        default_tz: IANA zone for schedules that name none; defaults to the service's.
    """
    zone = default_tz or service.default_timezone
    for kind, (usage, summary) in _KINDS.items():
        router.register(kind, _creator(service, kind, zone), usage=usage, summary=summary)

    async def list_schedules(message: InboundMessage, _args: str) -> str:
        schedules = await service.list(message.session_key)
        if not schedules:
            return "No schedules in this session. Create one with /every, /after, /at or /cron."
        return "\n".join(["Schedules in this session:", *(s.describe() for s in schedules)])

    async def unschedule(message: InboundMessage, args: str) -> str:
        if not args.strip():
            raise CommandError(_UNSCHEDULE_USAGE)
        schedule_id = parse_schedule_id(args)
        cancelled = await service.cancel(schedule_id, message.session_key, message_id=message.id)
        if cancelled is None:
            raise CommandError(
                f"there is no active schedule #{schedule_id} in this session — see /schedules"
            )
        return f"Cancelled {cancelled.describe()}."

    router.register(
        "schedules", list_schedules, usage="/schedules", summary="list this session's schedules"
    )
    router.register(
        "unschedule",
        unschedule,
        usage="/unschedule <id>",
        summary="cancel a schedule of this session",
    )


def _creator(
    service: ScheduleService, kind: str, zone: str
) -> Callable[[InboundMessage, str], Awaitable[str]]:
    async def create(message: InboundMessage, args: str) -> str:
        spec = parse_command(kind, args, now=service.now(), default_tz=zone)
        return schedule_created_reply(await service.create(message, spec))

    return create
