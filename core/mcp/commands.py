"""``/answer`` and ``/decline``: the person's reply to an MCP server's question."""

from __future__ import annotations

from core.commands import CommandRouter
from core.messages import InboundMessage

from .elicit import ElicitationService

__all__ = ["register_mcp_commands"]


def register_mcp_commands(router: CommandRouter, questions: ElicitationService) -> None:
    """Register ``/answer <id> ...`` and ``/decline <id>`` on ``router``."""

    async def answer(message: InboundMessage, args: str) -> str:
        if not args.strip():
            pending = await questions.pending(message.session_key)
            if not pending:
                return "No MCP server is waiting for an answer in this conversation."
            return "Questions waiting for an answer:\n" + "\n".join(
                f"  {qid} ({server}): {text}" for qid, server, text in pending
            )
        return await questions.answer(message, args)

    router.register(
        "answer",
        answer,
        usage="/answer <id> <value> | /answer <id> name=value ...",
        summary="answer an MCP server's question (no id: list the open ones)",
    )
    router.register(
        "decline",
        questions.decline,
        usage="/decline <id>",
        summary="decline an MCP server's question",
    )
