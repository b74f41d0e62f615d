"""Approvals: ``exec`` commands that wait for the user's ``/approve`` or ``/deny``."""

from __future__ import annotations

from .commands import register_approval_commands
from .records import ApprovalInfo, ApprovalStatus, outcome_message_id, parse_approval_id
from .repository import ApprovalRepository
from .service import ApprovalService, CommandRunner

__all__ = [
    "ApprovalInfo",
    "ApprovalRepository",
    "ApprovalService",
    "ApprovalStatus",
    "CommandRunner",
    "outcome_message_id",
    "parse_approval_id",
    "register_approval_commands",
]
