"""Seeing through the shell: every simple command of a command line in canonical form
(for the danger patterns), and the structural reasons a command asks regardless.

The canonical form is what the shell would run: quotes removed, static variables and
``$IFS`` substituted, ``$'..'`` decoded, wrappers (``sudo``, ``env``, ``timeout 5``...)
looked through, paths normalised (``/.``, ``//``, ``/usr/../``, a glob in a top-level
name) and relative paths resolved against the directory the command would be in
(``cd / && rm -rf *`` is ``rm -rf /*``). Structural reasons: inline interpreter code
(`core.tools.inline_code`), text piped into an interpreter, a file the same command
wrote (or made executable) then run, a command name only known at run time, ``eval``
of dynamic text, aliases, and anything the parser cannot read for certain.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field, replace

from .inline_code import python_is_harmless
from .shell_commands import WRAPPERS, Use, code_use, written_targets
from .shell_lex import ShellSyntaxError, lex
from .shell_parse import Command, Expanded, Redirect, Vars, expand, parse
from .shell_paths import normalised, resolved

__all__ = ["Inspection", "inspect"]

_WRITES = {">", ">>", ">|", "&>", "&>>", "<>"}
_POSITIONAL = set("123456789@*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)", re.DOTALL)
_DECLARERS = {"export", "declare", "local", "typeset", "readonly"}
_READERS = {"read", "mapfile", "readarray", "for", "select", "getopts"}
_DESTRUCTIVE = {"rm", "rmdir", "shred", "unlink", "find", "chmod", "chown", "chgrp", "truncate"}
_MAX_COMMANDS = 20_000
_MAX_DEPTH = 24


@dataclass
class Inspection:
    """The canonical lines of a command and the first structural reason to ask (or None)."""

    lines: list[str] = field(default_factory=list)
    reason: str | None = None


@dataclass
class _State:
    vars: Vars
    cwds: tuple[str, ...] | None
    """Where the next command may run (None: only known at run time)."""
    written: set[str]
    positional: bool = False
    """A function or ``set --`` may give ``$1``... a value the check cannot see."""


@dataclass
class _Run:
    out: Inspection
    count: int = 0

    def ask(self, reason: str) -> None:
        if self.out.reason is None:
            self.out.reason = reason


def inspect(command: str, *, cwd: str | None = None) -> Inspection:
    """The canonical simple commands of ``command`` and a structural reason to ask.

    Args:
        command: the shell command line.
        cwd: the directory it starts in (relative paths stay relative without one).
    """
    run = _Run(Inspection())
    state = _State(vars={}, cwds=(posixpath.normpath(cwd) if cwd else ".",), written=set())
    _source(command, state, run, 0)
    return run.out


def _source(text: str, state: _State, run: _Run, depth: int) -> None:
    try:
        commands = parse(lex(text, depth=depth))
    except ShellSyntaxError as exc:
        run.ask(f"cannot be read for certain ({exc}), and what cannot be read asks")
        return
    except RecursionError:
        run.ask("is nested too deeply to be read, and what cannot be read asks")
        return
    for command in commands:
        run.count += 1
        if run.count > _MAX_COMMANDS:
            run.ask("is too long to be read, and what cannot be read asks")
            return
        _command(command, state, run, depth)


def _sub(text: str, state: _State, run: _Run, depth: int) -> None:
    """Run ``text`` as a subshell: what it assigns or where it goes stays inside."""
    _source(text, replace(state, vars=dict(state.vars), written=state.written), run, depth + 1)


def _substitutions(
    command: Command, expanded: list[Expanded], state: _State, run: _Run, depth: int
) -> None:
    """Every ``$(...)``, backtick and ``<(...)`` of the command runs too: check each."""
    for e in expanded:
        for source in e.substitutions:
            _sub(source, state, run, depth)
    for r in command.redirects:
        if r.heredoc is not None and r.heredoc.expands:
            for part in r.heredoc.body:
                if part.kind == "cmd":
                    _sub(part.value, state, run, depth)


def _assignments(command: Command) -> int:
    """How many of the leading words are ``name=value`` assignments."""
    count = 0
    for word in command.words:
        first = word[0] if word else None
        if first is None or first.kind != "lit" or first.quoted or not _ASSIGN.match(first.value):
            break
        count += 1
    return count


def _command(command: Command, state: _State, run: _Run, depth: int) -> None:
    words = command.words
    if state.positional and any(
        p.kind == "var" and p.value in _POSITIONAL for word in words for p in word
    ):
        run.ask("passes arguments through a shell function or set --, which cannot be followed")
    expanded = [expand(word, state.vars) for word in words]
    redirects = [expand(r.target, state.vars) for r in command.redirects]
    _substitutions(command, [*expanded, *redirects], state, run, depth)
    if command.defines_function:
        state.positional = True
        return
    n_assign = _assignments(command)
    if n_assign == len(words):
        for e in expanded:
            _assign(state, e)
    shown = [
        r.op + " " + (normalised(target) if r.op in _WRITES else target)
        for r, e in zip(command.redirects, redirects, strict=True)
        for target in (e.alternatives or ((),))[0]
    ]
    written_now = _redirect_writes(command.redirects, redirects, state)
    for argv, dynamic in _argvs(expanded[n_assign:]):
        if argv:
            _argv(argv, dynamic, command, shown, state, run, depth)
    state.written |= written_now


def _assign(state: _State, e: Expanded) -> None:
    """``name=value`` alone: the shell variable may hold ``value`` from here on."""
    joined = [" ".join(alternative) for alternative in e.alternatives]
    match = _ASSIGN.match(joined[0]) if joined else None
    if match is None:
        return
    values = None if e.dynamic else tuple(_ASSIGN.sub(r"\2", text) for text in joined)
    _set(state, match.group(1), values)


def _set(state: _State, name: str, values: tuple[str, ...] | None) -> None:
    before = state.vars.get(name, ())
    if values is None or before is None:
        state.vars[name] = None
        return
    merged = tuple(dict.fromkeys((*before, *values)))
    state.vars[name] = merged if len(merged) <= 8 else None


def _argvs(expanded: list[Expanded]) -> list[tuple[list[str], list[bool]]]:
    """The argument vectors a command may have (with each field's ``dynamic``), at most 16."""
    out: list[tuple[list[str], list[bool]]] = [([], [])]
    for e in expanded:
        if len(e.alternatives) == 1:  # the usual case: extend in place (long commands)
            for argv, flags in out:
                argv.extend(e.alternatives[0])
                flags.extend([e.dynamic] * len(e.alternatives[0]))
            continue
        out = [
            (argv + list(alt), flags + [e.dynamic] * len(alt))
            for argv, flags in out
            for alt in e.alternatives
        ][:16]
    return out


def _redirect_writes(redirects: list[Redirect], targets: list[Expanded], state: _State) -> set[str]:
    written: set[str] = set()
    for r, e in zip(redirects, targets, strict=True):
        if r.op in _WRITES:
            for alternative in e.alternatives:
                for target in alternative:
                    written |= resolved(target, state.cwds)
    return written


def _emit(argv: list[str], redirects: list[str], state: _State, run: _Run) -> None:
    """The canonical lines: the command's base name, arguments resolved per directory."""
    name = argv[0].rsplit("/", 1)[-1]
    for cwd in state.cwds or (None,):
        words = [name, *(_line_arg(arg, cwd) for arg in argv[1:]), *redirects]
        run.out.lines.append(" ".join(w.replace("\n", " ") for w in words))


def _line_arg(arg: str, cwd: str | None) -> str:
    if not arg or arg.startswith(("-", "$")) or "=" in arg:
        return arg
    if arg.startswith(("/", "~")):
        return normalised(arg)
    if cwd is None or cwd == ".":
        return normalised(arg) if "/" in arg else arg
    return normalised(posixpath.join(cwd, arg))


def _argv(
    argv: list[str],
    dynamic: list[bool],
    command: Command,
    shown: list[str],
    state: _State,
    run: _Run,
    depth: int,
    *,
    wrapped: bool = False,
) -> None:
    """One argument vector: its canonical line, then what its command name implies."""
    if depth > _MAX_DEPTH:
        run.ask("is nested too deeply to be read, and what cannot be read asks")
        return
    name = argv[0].rsplit("/", 1)[-1]
    if dynamic[0] and ("$" in name or not name):
        run.ask("runs a command whose name is only known when it runs")
    if name not in WRAPPERS or not wrapped:  # a chain of wrappers: its ends suffice
        _emit(argv, shown, state, run)
    if "/" in argv[0]:
        _runs_written(argv[0], state, run)
    _builtins(name, argv, dynamic, command, shown, state, run, depth)


def _runs_written(path: str, state: _State, run: _Run) -> None:
    if resolved(path, state.cwds) & state.written:
        run.ask(f"runs a file the same command wrote or made executable ({path})")


def _builtins(
    name: str,
    argv: list[str],
    dynamic: list[bool],
    command: Command,
    shown: list[str],
    state: _State,
    run: _Run,
    depth: int,
) -> None:
    """What the command name implies: shell state, code it runs, files it writes."""
    args, flags = argv[1:], dynamic[1:]
    if name in ("cd", "pushd"):
        _cd(args, flags, state)
    elif name in _DECLARERS | _READERS or name in ("set", "alias", "eval"):
        _shell_state(name, args, flags, state, run, depth)
    elif name == "find":
        _find(args, flags, state, run, depth)
    else:
        _use(code_use(name, args), name, args, flags, command, shown, state, run, depth)
    relative = any(not a.startswith(("-", "/", "~", "$")) for a in args)
    if name in _DESTRUCTIVE and state.cwds is None and relative:
        run.ask("changes files relative to a directory only known when it runs")
    targets, sources = written_targets(name, args)
    for target in targets:
        where = resolved(target, state.cwds)
        state.written |= where
        state.written |= {f"{d}/{posixpath.basename(s)}" for d in where for s in sources}


def _shell_state(
    name: str, args: list[str], flags: list[bool], state: _State, run: _Run, depth: int
) -> None:
    """Builtins that change what later commands mean: variables, aliases, eval."""
    if name in _DECLARERS:
        for arg in args:
            if (m := _ASSIGN.fullmatch(arg)) is not None:
                _set(state, m.group(1), None if any(flags) else (m.group(2),))
    elif name in _READERS:
        for arg in args:
            if re.fullmatch(r"[A-Za-z_]\w*", arg) and arg != "in":
                state.vars[arg] = None
            if name in ("for", "select"):
                break
    elif name == "set":
        state.positional |= bool(args) and args[0] == "--"
    elif name == "alias":
        if any("=" in a for a in args):
            run.ask("defines an alias, which can rename any command")
    elif any(flags):
        run.ask("runs dynamically built shell code (eval)")
    else:
        _source(" ".join(args), state, run, depth + 1)


def _use(
    use: Use,
    name: str,
    args: list[str],
    flags: list[bool],
    command: Command,
    shown: list[str],
    state: _State,
    run: _Run,
    depth: int,
) -> None:
    """Follow what ``code_use`` found: a wrapped command, inline code, stdin, a script."""
    i = use.index
    if use.kind == "inner":
        _argv(args[i:], flags[i:], command, shown, state, run, depth + 1, wrapped=True)
    elif use.kind == "shell":
        _shell_code(args[i], flags[i], state, run, depth)
    elif use.kind == "shell_joined":
        _shell_code(" ".join(args[i:]), any(flags[i:]), state, run, depth)
    elif use.kind == "python":
        code = args[i] if use.text is None else use.text
        if flags[i] or not python_is_harmless(code):
            run.ask(f"gives {name} inline code that is not plainly harmless Python")
    elif use.kind == "stdin":
        _stdin_code(command, name, use.lang, state, run, depth)
    elif use.kind == "script":
        _script(args[i], flags[i], state, run)
    elif use.kind == "ask":
        run.ask(use.reason)


def _cd(args: list[str], dynamic: list[bool], state: _State) -> None:
    """Where later commands run: every directory a ``cd`` may have reached (it may fail)."""
    operands = [(a, d) for a, d in zip(args, dynamic, strict=True) if not a.startswith("-")]
    if not operands:
        target: str | None = "~"
    else:
        target = None if operands[0][1] or operands[0][0] == "-" else operands[0][0]
    if target is None or state.cwds is None:
        state.cwds = None
        return
    merged = tuple(dict.fromkeys((*state.cwds, *sorted(resolved(target, state.cwds)))))
    state.cwds = merged if len(merged) <= 8 else None


def _find(args: list[str], dynamic: list[bool], state: _State, run: _Run, depth: int) -> None:
    """``find ... -exec CMD {} ;``: CMD is a command of its own."""
    for i, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(args):
            end = next((j for j in range(i + 1, len(args)) if args[j] in (";", "+")), len(args))
            if end > i + 1:
                inner = Command(words=[], redirects=[])
                _argv(args[i + 1 : end], dynamic[i + 1 : end], inner, [], state, run, depth + 1)


def _shell_code(code: str, dynamic: bool, state: _State, run: _Run, depth: int) -> None:
    if dynamic:
        run.ask("runs shell code built at run time")
        return
    _source(code, _State(vars={}, cwds=state.cwds, written=state.written), run, depth + 1)


def _script(path: str, dynamic: bool, state: _State, run: _Run) -> None:
    if dynamic and "$(" in path:
        run.ask("runs generated code (a process or command substitution)")
    _runs_written(path, state, run)


def _stdin_code(
    command: Command, name: str, lang: str, state: _State, run: _Run, depth: int
) -> None:
    """An interpreter with no program argument reads its program from stdin."""
    if command.piped_from:
        run.ask(f"pipes text into {name} as code")
        return
    for r in command.redirects:
        if r.op == "<":
            e = expand(r.target, state.vars)
            _script(" ".join(e.alternatives[0]), e.dynamic, state, run)
            continue
        if r.heredoc is not None:
            parts = r.heredoc.body
            static = all(p.kind == "lit" for p in parts)
            body = "".join(p.value for p in parts) if static else None
        elif r.op == "<<<":
            e = expand(r.target, state.vars)
            body = None if e.dynamic else " ".join(e.alternatives[0]) + "\n"
        else:
            continue
        if body is None:
            run.ask(f"feeds {name} code built at run time")
        elif lang == "shell":
            _shell_code(body, False, state, run, depth)
        elif lang != "python" or not python_is_harmless(body):
            run.ask(f"gives {name} code on stdin that is not plainly harmless")
