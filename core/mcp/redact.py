"""URLs cut to scheme, host and port in what MCP errors and stderr tails show."""

from __future__ import annotations

import re

__all__ = ["redact_urls"]

_URL = re.compile(
    r"\b(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?:[^\s/@'\"<>]*@)?"
    r"(?P<host>[^\s/?#'\"<>]+)[^\s'\"<>]*"
)


def redact_urls(text: str) -> str:
    """``text`` with every URL cut to its scheme, host and port: an MCP server's URL often
    carries its key (``?api_key=``, a secret path, user:password@), and errors land in
    the log, in ``/readyz`` (no auth) and in tool errors the model (so a chat user) sees."""
    return _URL.sub(lambda m: f"{m['scheme']}{m['host']}/...", text)
