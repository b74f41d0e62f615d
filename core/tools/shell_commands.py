"""What a command does with the words after its name (pure): the command a wrapper runs,
the code an interpreter is given, the files a command writes.

`code_use` answers for one argument vector: ``sudo -u x rm ...`` runs the command at
index 3; ``bash -lc CODE`` runs shell code; ``python3 -c CODE`` Python; ``perl -e``
inline code that always asks (`core.tools.inline_code`); ``sh`` alone reads code from
stdin; ``sh s.sh`` runs a script file.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

from .inline_code import INLINE_FLAGS, awk_runs_commands, interpreter_kind

__all__ = ["Use", "code_use", "written_targets"]

UseKind = Literal["none", "inner", "shell", "shell_joined", "python", "stdin", "script", "ask"]
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=.*", re.DOTALL)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    name: (frozenset(opts.split()), skip)
    for name, opts, skip in [
        ("sudo", "-u -g -C -D -h -p -r -t -U -T --user --group --chdir --host --prompt", 0),
        ("doas", "-u -C", 0),
        ("env", "-u -C --unset --chdir", 0),
        ("nohup", "", 0),
        ("exec", "-a", 0),
        ("command", "", 0),
        ("builtin", "", 0),
        ("time", "-f -o --format --output", 0),
        ("nice", "-n --adjustment", 0),
        ("ionice", "-c -n -p -t --class --classdata", 0),
        ("setsid", "", 0),
        ("stdbuf", "-i -o -e", 0),
        ("timeout", "-s -k --signal --kill-after", 1),
        ("xargs", "-I -n -P -d -E -L -s -a --max-args --max-procs --delimiter --arg-file", 0),
        ("chroot", "--userspec --groups", 1),
        ("unbuffer", "", 0),
        ("busybox", "", 0),
        ("taskset", "", 1),
        ("chrt", "", 1),
        ("nsenter", "-t -m -u -i -n -p -U -S -G --target", 0),
        ("unshare", "", 0),
        ("strace", "-o -e -p -s -E", 0),
        ("coproc", "", 0),
    ]
}
WRAPPERS = frozenset(_WRAPPERS)
"""Commands that run the command after their options (``sudo``, ``env``, ``timeout 5``)."""
_CODE_WRAPPERS = frozenset({"su", "sg", "runuser", "flock", "script"})
"""Commands whose ``-c`` option is shell code."""
_SHELL_VALUE_FLAGS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_PERL_INLINE = re.compile(r"-[lnpaistwWxT0-9]*[eE]")


@dataclass(frozen=True, slots=True)
class Use:
    """What the words after a command's name are: ``index`` points into those words."""

    kind: UseKind
    index: int = 0
    lang: str = ""
    """For ``stdin``: ``shell``, ``python`` or ``other``."""
    reason: str = ""
    text: str | None = None
    """Code given attached to its option (``python3 -c'print(1)'``)."""


def code_use(name: str, args: list[str]) -> Use:
    """How command ``name`` treats ``args`` (the words after its name)."""
    if name in _WRAPPERS:
        return _wrapper(name, args)
    if name in _CODE_WRAPPERS and "-c" in args[:-1]:
        return Use("shell", args.index("-c") + 1)
    if name == "watch":
        first = next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))
        return Use("shell_joined", first) if first < len(args) else Use("none")
    if name in ("source", ".") and args:
        return Use("script", 0)
    kind = interpreter_kind(name)
    if kind == "shell":
        return _shell(args)
    if kind == "python":
        return _python(args)
    if kind == "awk":
        return _awk(name, args)
    if kind == "other":
        return _other(name, args)
    return Use("none")


def _wrapper(name: str, args: list[str]) -> Use:
    with_value, skip = _WRAPPERS[name]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if name == "env" and _ASSIGN.fullmatch(arg):
            i += 1
            continue
        if name == "env" and arg in ("-S", "--split-string") and i + 1 < len(args):
            return Use("shell", i + 1)
        if not arg.startswith("-") or arg == "-":
            break
        i += 2 if arg in with_value else 1
    i += skip
    return Use("inner", i) if i < len(args) else Use("none")


def _shell(args: list[str]) -> Use:
    i, code, stdin = 0, False, False
    while i < len(args) and args[i].startswith(("-", "+")) and args[i] not in ("-", "--"):
        flag = args[i]
        code |= flag.startswith("-") and not flag.startswith("--") and "c" in flag
        stdin |= not flag.startswith("--") and "s" in flag[1:]
        i += 2 if flag in _SHELL_VALUE_FLAGS else 1
    i += 1 if i < len(args) and args[i] == "--" else 0
    if code:
        return Use("shell", i) if i < len(args) else Use("none")
    if stdin or i >= len(args):
        return Use("stdin", lang="shell")
    return Use("script", i)


def _python(args: list[str]) -> Use:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-" or not arg.startswith("-"):
            break
        if arg == "--":
            i += 1
            break
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        for j, letter in enumerate(arg[1:]):
            if letter not in "cmWX":
                continue
            attached = arg[2 + j :]
            if letter == "c":  # the code: attached (-c'...') or the next word
                if attached:
                    return Use("python", i, text=attached)
                return Use("python", i + 1) if i + 1 < len(args) else Use("none")
            if letter == "m":
                return Use("none")
            i += 0 if attached else 1
            break
        i += 1
    if i >= len(args) or args[i] == "-":
        return Use("stdin", lang="python")
    return Use("script", i)


def _awk(name: str, args: list[str]) -> Use:
    i, script = 0, None
    why = f"runs an {name} program that can run commands or write files"
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        arg = args[i]
        if arg in ("-f", "--file") and i + 1 < len(args):
            script = i + 1
        if arg in ("-e", "--source") and i + 1 < len(args) and awk_runs_commands(args[i + 1]):
            return Use("ask", reason=why)
        i += 2 if arg in ("-F", "-v", "-f", "-e", "-i", "--file", "--source") else 1
    if script is not None:
        return Use("script", script)
    if i < len(args) and awk_runs_commands(args[i]):
        return Use("ask", reason=why)
    return Use("none")


def _other(name: str, args: list[str]) -> Use:
    flags = INLINE_FLAGS[name]
    for arg in args:
        bare = arg.split("=", 1)[0]
        if bare in flags or (name == "perl" and _PERL_INLINE.fullmatch(arg)):
            return Use(
                "ask",
                reason=f"gives {name} code inline ({bare}), and inline {name} code always asks",
            )
    operand = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
    return Use("stdin", lang="other") if operand is None else Use("script", operand)


def written_targets(name: str, args: list[str]) -> tuple[list[str], list[str]]:
    """Files ``name args`` writes or makes executable, and the sources it copies into them
    (a directory target also holds ``dir/<source name>``)."""
    operands = [a for a in args if not a.startswith("-")]
    if name == "tee":
        return operands, []
    if name == "chmod":
        return operands[1:], []
    if name in ("cp", "mv", "install", "ln") and len(operands) >= 2:
        return [operands[-1]], operands[:-1]
    if name == "dd":
        return [a[3:] for a in args if a.startswith("of=")], []
    if name == "sed" and any(a.startswith("-i") for a in args):
        return operands[1:], []
    if name in ("curl", "wget"):
        out = [
            value
            for flag, value in itertools.pairwise(args)
            if flag in ("-o", "--output", "-O", "--output-document")
            and not (name == "curl" and flag == "-O")
        ]
        urls = [a for a in operands if "://" in a]
        return out + [u.split("?")[0].rstrip("/").rsplit("/", 1)[-1] for u in urls], []
    return [], []
