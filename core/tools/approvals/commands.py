"""Slash commands for approvals: /approve <id> and /deny <id>."""

from __future__ import annotations

from core.commands import CommandRouter
from core.errors import CommandError
from core.messages import InboundMessage

from .records import parse_approval_id
from .service import ApprovalService

__all__ = ["register_approval_commands"]


def register_approval_commands(router: CommandRouter, service: ApprovalService) -> None:
    """Register ``/approve`` and ``/deny`` on ``router``."""

    async def approve(message: InboundMessage, args: str) -> str:
        return await service.approve(message, _id(args, "approve"))

    async def deny(message: InboundMessage, args: str) -> str:
        return await service.deny(message, _id(args, "deny"))

    router.register(
        "approve",
        approve,
        usage="/approve <id>",
        summary="run a command the assistant asked approval for",
    )
    router.register(
        "deny", deny, usage="/deny <id>", summary="refuse a command the assistant asked to run"
    )


def _id(args: str, name: str) -> str:
    usage = f"usage: /{name} <id> — e.g. /{name} k3xq7m (the id the assistant gave)"
    if not args.strip():
        raise CommandError(usage)
    return parse_approval_id(args, usage=usage)
