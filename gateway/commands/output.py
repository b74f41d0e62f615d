"""Data in the commands' tables and lines: printed as it is, never read as Rich markup.

A session key, a path, a prompt or a memory is data: ``[bold]`` in it stays literal.
Emoji codes (``:ok:``) are off in every console (`gateway.commands.common.stdout_console`).
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

__all__ = ["add_row", "data", "styled"]


def data(value: object) -> Text:
    """``value`` as text shown verbatim (a `Text` is kept: it is built of data already)."""
    return value if isinstance(value, Text) else Text(str(value))


def styled(*parts: object | tuple[object, str]) -> Text:
    """Text of data pieces, some styled: ``styled((state, "green"), f" pid {pid}")``."""
    text = Text()
    for part in parts:
        if isinstance(part, tuple):
            value, style = part
            text.append(str(value), style=style)
        else:
            text.append(data(part))
    return text


def add_row(table: Table, *cells: object) -> None:
    """A row of data cells (each shown verbatim, see `data`)."""
    table.add_row(*(data(cell) for cell in cells))
