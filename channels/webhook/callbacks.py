"""Callback URLs: normalised before the ``callback_allow`` prefix check, and POSTed as checked.

A prefix compared with the URL as sent is not a boundary: ``/cb/../../x`` or
``/cb/%2e%2e/x`` start with ``/cb/`` yet reach ``/x`` once the receiving server
resolves them. So a URL is brought to one normal form first (RFC 3986 section 6:
lower-case scheme and host, no default port, percent-encoding of unreserved characters
decoded and the rest in upper case, dot segments removed, no fragment), the prefixes
likewise, and the normal form is what is checked and later POSTed to. What cannot be
put into a form every server reads the same way is refused: credentials in the URL, an
encoded ``/`` or ``\\`` (some servers decode them into path separators), backslashes,
whitespace and control characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["CallbackRefused", "allowed_callback", "normalise_url"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SEPARATORS = ("2f", "5c")
"""``%2F`` and ``%5C``: a ``/`` or ``\\`` some servers decode before routing."""


class CallbackRefused(ValueError):
    """A callback URL that cannot be normalised safely; the message says why."""


def _escapes(text: str, *, path: bool) -> str:
    """Decode escapes of unreserved characters, upper-case the others (RFC 3986 6.2.2)."""
    if "%" in _ESCAPE.sub("", text):
        raise CallbackRefused("a '%' that does not start a percent-encoded byte")

    def one(match: re.Match[str]) -> str:
        hexa = match.group(1).lower()
        if path and hexa in _SEPARATORS:
            raise CallbackRefused("an encoded '/' or '\\' in the path")
        char = chr(int(hexa, 16))
        return char if char in _UNRESERVED else f"%{hexa.upper()}"

    return _ESCAPE.sub(one, text)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path: ``/a/./b/../c`` is ``/a/c``."""
    out: list[str] = []
    segments = path.split("/")[1:]
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        elif segment == ".":
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)


def normalise_url(url: str) -> str:
    """The normal form of an http(s) URL (see the module's docstring).

    Raises:
        CallbackRefused: not http(s), no host, credentials, an encoded separator, a
            backslash, whitespace or a control character, or a bad port.
    """
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url) or "\\" in url:
        raise CallbackRefused("whitespace, a control character or a backslash")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise CallbackRefused(f"not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise CallbackRefused("not an http or https URL")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise CallbackRefused("credentials in the URL")
    host = _escapes(parts.hostname or "", path=False).lower()
    if not host or "%" in host:
        raise CallbackRefused("no host")
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal keeps its brackets
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = _remove_dot_segments(_escapes(parts.path or "/", path=True))
    query = _escapes(parts.query, path=False)
    return urlunsplit((scheme, netloc, path, query, ""))


def allowed_callback(url: str, prefixes: Iterable[str]) -> str | None:
    """The normal form of ``url`` if it starts with the normal form of a prefix, else None.

    Raises:
        CallbackRefused: ``url`` cannot be normalised safely.
    """
    normal = normalise_url(url)
    return normal if any(normal.startswith(normalise_url(p)) for p in prefixes) else None
