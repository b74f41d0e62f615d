"""Model replies as HTML, safely: Markdown by markdown-it-py with raw HTML off.

Raw HTML in a reply is shown as text (``<script>`` stays ``&lt;script&gt;``), links with
``javascript:``-like schemes are not made links (markdown-it's own check), and the
panel's Content-Security-Policy loads no image from elsewhere. Tables scroll inside
their own box, so a wide one never makes the page scroll sideways.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

__all__ = ["reply_html"]


def _table_open(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return '<div class="table-wrap"><table>\n'


def _table_close(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return "</table></div>\n"


_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
_MD.add_render_rule("table_open", _table_open)
_MD.add_render_rule("table_close", _table_close)


def reply_html(text: str, format: str = "markdown") -> Markup:
    """``text`` as HTML to put in a page: Markdown rendered (``format`` ``markdown``), or
    the text as it is in a ``<pre>`` (``text``: a slash command's output)."""
    if format == "text":
        return Markup("<pre>{}</pre>").format(text)
    # Safe: markdown-it escapes every character of the text it does not turn into markup,
    # and with html off it passes no tag through.
    return Markup(_MD.render(text))
