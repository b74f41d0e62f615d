"""The ``task_complete`` tool: the model's way to say an (autopilot) task is done."""

from __future__ import annotations

from core.tools.decorator import tool

__all__ = ["task_complete"]


@tool
async def task_complete(summary: str = "") -> str:
    """Call this when the task you were given is completely done.

    Args:
        summary: one or two sentences on what was done, shown to the user.
    """
    return "Task marked complete."
