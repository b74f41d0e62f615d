"""Tool lists that narrow what may run for the rest of one message's turn, once added."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ToolRestrictions"]


class ToolRestrictions:
    """The tool lists added while one message is answered (an active skill's
    ``allowed-tools``): each binds every later call of that message, as an agent's own
    tool list does (`core.tools.registry.ToolRegistry.execute`). One per `ToolContext`,
    so per message; empty until something adds to it.
    """

    def __init__(self) -> None:
        self._lists: dict[str, tuple[str, ...]] = {}

    def add(self, whose: str, patterns: Iterable[str]) -> None:
        """Bind later calls to ``patterns`` (names or fnmatch patterns); ``whose`` names
        the list in a refusal. Adding the same ``whose`` again keeps the first list."""
        self._lists.setdefault(whose, tuple(patterns))

    def lists(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every list added, as ``(whose, patterns)``, oldest first."""
        return list(self._lists.items())

    def __bool__(self) -> bool:
        return bool(self._lists)
