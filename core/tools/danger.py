"""Danger patterns for ``exec``: regexes matched on a normalised command line.

Normalising first defeats the cheap disguises: quotes are collapsed (``rm -rf "/"``,
``r''m``), backslash escapes dropped (``\\rm``), ``${HOME}`` spelled ``$HOME`` and runs
of whitespace made one space. Most patterns then only match a word in *command
position* (the start of the line or of a pipeline stage, after ``;``, ``&&``, ``(``,
``$(``, a backtick, ``then``/``do``, or behind a wrapper such as ``sudo``, ``env``,
``xargs``, ``timeout 5``, ``sh -c``, ``eval``), so ``grep -r mkfs docs/`` and
``echo "rm -rf /"`` pass while ``sh -c 'rm -rf /'`` does not. A quoted ``;`` counts as
a separator after collapsing (``echo "a; reboot"`` asks): the errors lean towards asking.

The patterns also see every simple command the shell would run, in canonical form
(`core.tools.shell_checks`: ``x=rm; $x -rf /.`` is ``rm -rf /``, ``cd / && rm -rf *``
is ``rm -rf /*``), and a danger matcher adds the structural reasons found there (inline
interpreter code, text piped into an interpreter, a file written then run, anything
the parser cannot read for certain). docs/security/approvals.md lists them.

These are a speed bump against accidents and prompt injection, not a sandbox.
"""

from __future__ import annotations

import re

from .shell_checks import inspect

__all__ = ["DEFAULT_DANGER_PATTERNS", "DangerMatcher", "normalise_command"]

_SEP = r"(?:^|[;&|(){}\n`!]|\$\(|\b(?:then|do|else)\s)\s*"
"""Where a simple command starts."""
_WRAPPERS = (
    r"(?:(?:sudo|doas|env|nohup|exec|command|builtin|time|nice|ionice|setsid|xargs|stdbuf"
    r"|timeout|watch|eval|busybox|(?:ba|z|da|k|fi)?sh\s+-[a-z]*c)(?:\s+-[\w=-]*)*\s+"
    r"|\w+=\S*\s+|\d+(?:\.\d+)?[smhd]?\s+)*"
)
"""Words that run the next word as a command (and their options, numbers, VAR=x)."""
_PATH = r"(?:[\w.~-]*/)*"
"""An optional directory before the command name (``/bin/rm``)."""
CMD = _SEP + _WRAPPERS + _PATH
"""Prefix for a pattern whose first word must be in command position."""
_END = r"(?=\s|[;&|)]|$)"
_ARG = r"[^\s;&|()]+\s+"
"""One word of the same simple command, and the space after it."""
_SYSTEM_DIRS = r"(?:bin|boot|dev|etc|home|lib\w*|opt|root|sbin|srv|sys|usr|var)"
_ROOTISH = rf"(?:/|/\*|~/?\*?|\$HOME/?\*?|/{_SYSTEM_DIRS}/?\*?)"
"""/, home, or a top-level system directory (``/tmp/x`` and ``build/`` are not)."""
_FIND_EXEC_RM = r"exec(?:dir)?\s+(?:\S*/)?(?:rm|shred)\b"
_SHELL = r"(?:[\w./-]*/)?(?:ba|z|da|k|fi|c|tc)?sh\b"

DEFAULT_DANGER_PATTERNS: dict[str, str] = {
    rf"{CMD}rm\s+(?:{_ARG})*{_ROOTISH}{_END}": (
        "deletes /, the home directory or a system directory"
    ),
    r"--no-preserve-root": "deletes /",
    rf"{CMD}find\s+(?:-{_ARG})*{_ROOTISH}\s[^;&|\n]*?-(?:delete\b|{_FIND_EXEC_RM})": (
        "deletes files under /, the home directory or a system directory"
    ),
    rf"(?<!\|)\|(?!\|)\s*(?:(?:sudo|doas|env|exec)\s+(?:-\S+\s+)*)*{_SHELL}": (
        "pipes text into a shell (downloaded or decoded code)"
    ),
    rf"{CMD}(?:{_SHELL}|source|\.)\s+(?:-\S+\s+)*<\(": "runs downloaded or generated code",
    rf"{CMD}(?:eval\s|{_SHELL}\s+-[a-z]*c\s)[^;&|]*(?:\$|`)": (
        "runs dynamically built shell code (eval / sh -c with $ or `)"
    ),
    rf"(?:>>?|{CMD}tee\s+(?:-\S+\s+)*)\s*/(?:etc|boot)\b": "writes to /etc or /boot",
    rf"{CMD}(?:cp|mv|ln|install|rsync)\s[^;&|]*\s/(?:etc|boot)(?:/\S*)?\s*(?=$|[;&|)])": (
        "writes to /etc or /boot"
    ),
    rf"{CMD}sed\s+(?:{_ARG})*-i\S*\s[^;&|]*/(?:etc|boot)\b": "writes to /etc or /boot",
    rf"{CMD}ch(?:mod|own|grp)\s+(?:{_ARG})+{_ROOTISH}{_END}": ("changes / or a system directory"),
    rf"{CMD}(?:mkfs(?:\.\w+)?|mke2fs|mkswap|wipefs|fdisk|sfdisk|parted)\b": (
        "formats, repartitions or wipes a disk"
    ),
    rf"{CMD}dd\b[^;&|]*\bof=/dev/(?!null\b|zero\b|stdout\b|stderr\b)": "writes to a device",
    r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*": "writes to a block device",
    r"([\w:.]+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1": "is a fork bomb",
    rf"{CMD}(?:shutdown|reboot|halt|poweroff)\b": "shuts the machine down",
    rf"{CMD}systemctl\s+(?:-\S+\s+)*(?:poweroff|reboot|halt|kexec|suspend|hibernate)\b": (
        "shuts the machine down"
    ),
    rf"{CMD}(?:init|telinit)\s+[06]\b": "shuts the machine down",
}
"""Default ``tools.exec.danger_patterns``: regex (on the normalised command) -> reason."""

_QUOTED_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_SPACE = re.compile(r"[ \t\r\f\v]+")


def normalise_command(command: str) -> str:
    """The command line as the patterns see it: quotes and escapes gone, spaces collapsed.

    ``rm -rf "/"`` -> ``rm -rf /``; ``\\rm -r''f ${HOME}`` -> ``rm -rf $HOME``.
    """
    text = command.replace("\\\n", "")
    text = _QUOTED_ESCAPE.sub(r"\1", text)
    text = text.replace('"', "").replace("'", "")
    text = re.sub(r"\$\{(\w+)\}", r"$\1", text)
    lines = (_SPACE.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


class DangerMatcher:
    """Finds the first pattern a command matches, and the reason to give for it.

    Args:
        patterns: regexes searched in the normalised command line.
        reasons: a reason per known pattern (default: the defaults'); others get
            ``matches <kind> pattern '<regex>'``.
        kind: names the patterns in that generic reason (``danger``, ``deny``).
        structural: also give the parser's structural reasons (default: for ``danger``
            matchers that have patterns; an empty ``danger_patterns`` turns them off too).
    """

    def __init__(
        self,
        patterns: list[str],
        reasons: dict[str, str] | None = None,
        *,
        kind: str = "danger",
        structural: bool | None = None,
    ) -> None:
        known = DEFAULT_DANGER_PATTERNS if reasons is None else reasons
        self._patterns = [
            (re.compile(p, re.MULTILINE), known.get(p) or f"matches {kind} pattern {p!r}")
            for p in patterns
        ]
        self._structural = bool(patterns) and kind == "danger" if structural is None else structural

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def reason(self, command: str, *, cwd: str | None = None) -> str | None:
        """Why ``command`` matches (``"deletes /"``), or None when nothing matches.

        Args:
            command: the shell command line.
            cwd: the directory it runs in (relative paths are resolved against it).
        """
        if not self._patterns and not self._structural:
            return None
        inspection = inspect(command, cwd=cwd)
        views = list(dict.fromkeys([normalise_command(command), *inspection.lines]))
        for regex, why in self._patterns:
            if any(regex.search(view) for view in views):
                return why
        return inspection.reason if self._structural else None
