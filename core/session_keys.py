"""The one rule for session names and keys, shared by the CLI, the CLI channel and the daemon.

A session key is ``<channel>:<rest>`` (``cli:work``, ``slack:T1:C2:171.5``): at most
512 printable characters without whitespace. A CLI session NAME (what ``--session``
takes, the part after ``cli:``) is 1-128 letters, digits or ``._@+=-`` starting with a
letter or digit, and so is a web panel session NAME (the part after ``ui:``). Every
check raises ValueError with a message meant for the user.
"""

from __future__ import annotations

import re

__all__ = [
    "CLI_PREFIX",
    "DEFAULT_CLI_KEY",
    "MAX_KEY_LENGTH",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "UI_PREFIX",
    "check_cli_key",
    "check_cli_name",
    "check_session_key",
    "check_ui_key",
    "cli_key",
    "session_key_for",
    "ui_key",
]

CLI_PREFIX = "cli:"
MAX_NAME_LENGTH = 128
MAX_KEY_LENGTH = 512
DEFAULT_CLI_KEY = "cli:default"
UI_PREFIX = "ui:"

NAME_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._@+=-]{{0,{MAX_NAME_LENGTH - 1}}}"
"""A session NAME as a regular expression (unanchored), for schemas that need the pattern."""
_NAME = re.compile(NAME_PATTERN)
_CHANNEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_NAME_RULE = (
    f"a session name is 1-{MAX_NAME_LENGTH} letters, digits or ._@+=- "
    "and starts with a letter or digit"
)


def _shown(value: str) -> str:
    return repr(value[:80] + ("…" if len(value) > 80 else ""))


def check_cli_name(name: str) -> str:
    """Return ``name`` if it is a valid CLI session NAME.

    Raises:
        ValueError: not 1-128 letters, digits or ``._@+=-`` starting with a letter or digit.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"{_shown(name)} is not a valid session name: {_NAME_RULE}")
    return name


def cli_key(name: str) -> str:
    """The session key ``cli:NAME`` of a CLI session NAME (checked)."""
    return CLI_PREFIX + check_cli_name(name)


def ui_key(name: str) -> str:
    """The session key ``ui:NAME`` of a web panel session NAME (checked)."""
    return UI_PREFIX + check_cli_name(name)


def check_session_key(key: str) -> str:
    """Return ``key`` if it is a valid session key ``<channel>:<rest>``.

    ``cli:`` and ``ui:`` keys must also carry a valid session NAME.

    Raises:
        ValueError: longer than 512 characters, not ``<channel>:<rest>``, or containing
            whitespace or control characters.
    """
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"a session key is at most {MAX_KEY_LENGTH} characters, not {len(key)}")
    channel, colon, rest = key.partition(":")
    if not colon or not rest or not _CHANNEL.fullmatch(channel):
        raise ValueError(
            f"{_shown(key)} is not a session key: use <channel>:<name>, e.g. cli:default"
        )
    if not key.isprintable() or any(c.isspace() for c in key):
        raise ValueError(
            f"{_shown(key)} is not a session key: no spaces or control characters allowed"
        )
    if key.startswith((CLI_PREFIX, UI_PREFIX)):
        check_cli_name(rest)
    return key


def check_cli_key(key: str) -> str:
    """Return the NAME of a ``cli:NAME`` session key.

    Raises:
        ValueError: not ``cli:`` followed by a valid session NAME.
    """
    if not key.startswith(CLI_PREFIX):
        raise ValueError(f"the session must look like cli:NAME, not {_shown(key)}")
    return check_cli_name(key.removeprefix(CLI_PREFIX))


def check_ui_key(key: str) -> str:
    """Return the NAME of a ``ui:NAME`` session key (the web panel's sessions).

    Raises:
        ValueError: not ``ui:`` followed by a valid session NAME.
    """
    if not key.startswith(UI_PREFIX):
        raise ValueError(f"the session must look like ui:NAME, not {_shown(key)}")
    return check_cli_name(key.removeprefix(UI_PREFIX))


def session_key_for(value: str) -> str:
    """A session key from what a user typed: a bare NAME means ``cli:NAME``.

    Raises:
        ValueError: neither a valid session key nor a valid CLI session NAME.
    """
    value = value.strip()
    return check_session_key(value) if ":" in value else cli_key(value)
