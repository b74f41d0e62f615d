"""Reads hook files (Copilot CLI ``hooks`` JSON, Claude Code ``settings.json``) into commands.

A file is all or nothing: one that cannot be read, is not JSON, or has a malformed
entry is reported (file and reason) and contributes no hook; the other files load.
A file in the workspace loads only when the operator trusts its content and the
workspace files it runs (`core.trust`); an untrusted or changed one is listed apart.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from core.trust import TrustCheck, WorkspaceTrust, named_files, shell_words

from .names import TOOL_ALIASES, Dialect, HookEvent, dialect_of, normalise_event

__all__ = [
    "PACK_FILE",
    "HookCommand",
    "HookFileProblem",
    "HookSet",
    "HookSource",
    "Matcher",
    "check_hook_file",
    "default_sources",
    "fingerprint",
    "hook_files",
    "load_hooks",
]

log = logging.getLogger(__name__)

SourceKind = Literal["copilot", "claude"]
_PLAIN_NAMES = re.compile(r"[A-Za-z0-9_\-]+(?:\s*[|,]\s*[A-Za-z0-9_\-]+)*")
_UNSUPPORTED_TYPES = ("http", "prompt", "agent", "mcp_tool")


@dataclass(frozen=True, slots=True)
class HookSource:
    """Where hooks are read from: a folder of Copilot ``*.json`` files, or one Claude
    Code settings file (its ``hooks`` key)."""

    path: Path
    kind: SourceKind


def default_sources(workspace: Path, user_dir: Path | None) -> list[HookSource]:
    """The places familiar reads hooks from, in the order they run.

    Args:
        workspace: ``.github/hooks/*.json`` (and packs' ``.github/hooks/<name>/hooks.json``)
            and ``.claude/settings{,.local}.json`` in it.
        user_dir: ``$FAMILIAR_HOME/hooks`` (``*.json`` and packs, in the Copilot format).
    """
    sources = [HookSource(workspace / ".github" / "hooks", "copilot")]
    if user_dir is not None:
        sources.append(HookSource(user_dir, "copilot"))
    claude = workspace / ".claude"
    sources += [
        HookSource(claude / "settings.json", "claude"),
        HookSource(claude / "settings.local.json", "claude"),
    ]
    return sources


@dataclass(frozen=True, slots=True)
class Matcher:
    """Which names (tool, agent type, source) a hook entry applies to."""

    pattern: re.Pattern[str] | None = None
    names: frozenset[str] | None = None
    anchored: bool = True

    def matches(self, name: str) -> bool:
        candidates = (name, *TOOL_ALIASES.get(name, ()))
        if self.names is not None:
            return any(c in self.names for c in candidates)
        if self.pattern is None:
            return True
        if self.anchored:
            return any(self.pattern.fullmatch(c) for c in candidates)
        return any(self.pattern.search(c) for c in candidates)


MATCH_ALL = Matcher()


@dataclass(frozen=True, slots=True, kw_only=True)
class HookCommand:
    """One command hook, ready to run."""

    event: HookEvent
    event_name: str
    """The event as the file spells it (sent as ``hook_event_name``)."""
    dialect: Dialect
    argv: tuple[str, ...]
    cwd: str | None = None
    """Relative to the workspace unless absolute."""
    env: tuple[tuple[str, str], ...] = ()
    timeout: float | None = None
    """None: ``hooks.default_timeout``."""
    matcher: Matcher = MATCH_ALL
    source: Path

    @property
    def label(self) -> str:
        return f"{self.source}:{self.event_name}"


@dataclass(frozen=True, slots=True)
class HookFileProblem:
    """A hook file that was not loaded, and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True, slots=True)
class HookSet:
    """Every loaded hook by event, plus what could not be loaded."""

    commands: dict[HookEvent, tuple[HookCommand, ...]] = field(default_factory=dict)
    problems: tuple[HookFileProblem, ...] = ()
    files: tuple[Path, ...] = ()
    """Files that loaded (with or without hooks)."""
    disabled_by: Path | None = None
    """A Claude settings file with ``"disableAllHooks": true``: no hook runs (in a
    Copilot hook file it only switches that file's own hooks off)."""
    trusted: tuple[TrustCheck, ...] = ()
    """Workspace files that loaded: what they and the files they run hashed to."""
    untrusted: tuple[TrustCheck, ...] = ()
    """Workspace files ignored: never trusted, or changed since."""

    def for_event(self, event: HookEvent) -> tuple[HookCommand, ...]:
        if self.disabled_by is not None:
            return ()
        return self.commands.get(event, ())

    @property
    def count(self) -> int:
        return sum(len(c) for c in self.commands.values())


class _Malformed(ValueError):
    """A hook file does not have the expected shape (the message says where)."""


def hook_files(sources: Iterable[HookSource]) -> list[tuple[Path, SourceKind]]:
    """Every hook file of ``sources`` present now, with its format (blocking)."""
    return _files(sources)


PACK_FILE = "hooks.json"
"""A Copilot hook pack's config, in its own folder: ``cp -r hooks/<name> .github/hooks/``
puts it at ``.github/hooks/<name>/hooks.json``. Other JSON files of a pack are its
scripts' data, not hook files."""


def _files(sources: Iterable[HookSource]) -> list[tuple[Path, SourceKind]]:
    found: list[tuple[Path, SourceKind]] = []
    for source in sources:
        if source.kind == "copilot":
            if source.path.is_dir():
                found += [(p, "copilot") for p in sorted(source.path.glob("*.json"))]
                packs = sorted(source.path.glob(f"*/{PACK_FILE}"))
                found += [(p, "copilot") for p in packs if p.is_file()]
        elif source.path.is_file():
            found.append((source.path, "claude"))
    return found


def fingerprint(
    sources: Iterable[HookSource], also: Iterable[Path] = ()
) -> tuple[tuple[str, int, int], ...]:
    """What changes when a hook file (or a file of ``also``) is added, removed or edited
    (blocking: stats files)."""
    out: list[tuple[str, int, int]] = []
    for path in [*(p for p, _ in _files(sources)), *also]:
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(out)


def _read(path: Path, kind: SourceKind) -> tuple[list[HookCommand], bool, bytes]:
    content = path.read_bytes()
    return (*_parse_file(json.loads(content.decode("utf-8")), path, kind), content)


def _named(commands: Iterable[HookCommand], workspace: Path) -> list[Path]:
    """The workspace files the hooks of one file run (scripts, programs)."""
    found: dict[Path, None] = {}
    here = str(workspace)
    for c in commands:
        # Claude Code's hooks name their scripts by "$CLAUDE_PROJECT_DIR"/..., set to the workspace
        argv = [
            a.replace("${CLAUDE_PROJECT_DIR}", here).replace("$CLAUDE_PROJECT_DIR", here)
            for a in c.argv
        ]
        cwd = workspace / c.cwd if c.cwd else workspace
        found.update(dict.fromkeys(named_files(shell_words(argv), cwd=cwd, workspace=workspace)))
    return list(found)


def check_hook_file(path: Path, kind: SourceKind, trust: WorkspaceTrust) -> TrustCheck:
    """A workspace hook file against the trust record (a malformed one names no file)."""
    try:
        commands, _, content = _read(path, kind)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, _Malformed):
        return trust.check(path, [])
    return trust.check(path, _named(commands, trust.workspace), content=content)


def _read_or_problem(
    path: Path, kind: SourceKind
) -> tuple[list[HookCommand], bool, bytes] | HookFileProblem:
    try:
        return _read(path, kind)
    except OSError as exc:
        return HookFileProblem(path, f"cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError:
        return HookFileProblem(path, "not UTF-8 text")
    except json.JSONDecodeError as exc:
        return HookFileProblem(path, f"not JSON: {exc}")
    except _Malformed as exc:
        return HookFileProblem(path, str(exc))


def load_hooks(sources: Sequence[HookSource], *, trust: WorkspaceTrust) -> HookSet:
    """Read every hook file of ``sources`` (blocking: run it in a thread).

    Args:
        trust: the record a file in ``trust.workspace`` must match to load.
    """
    commands: dict[HookEvent, list[HookCommand]] = {}
    problems: list[HookFileProblem] = []
    loaded: list[Path] = []
    trusted: list[TrustCheck] = []
    untrusted: list[TrustCheck] = []
    disabled_by: Path | None = None
    for path, kind in _files(sources):
        read = _read_or_problem(path, kind)
        if isinstance(read, HookFileProblem):
            problems.append(read)
            continue
        parsed, disable, content = read
        if path.absolute().is_relative_to(trust.workspace):
            check = trust.check(path, _named(parsed, trust.workspace), content=content)
            if not check.trusted:
                trust.note(check, what="hook")
                untrusted.append(check)
                continue
            trusted.append(check)
        loaded.append(path)
        if disable and kind == "copilot":
            # GitHub: in a hook file it skips that file's hooks only
            log.info("disableAllHooks is set in %s: its hooks do not run", path)
            continue
        if disable and disabled_by is None:
            disabled_by = path
        for command in parsed:
            commands.setdefault(command.event, []).append(command)
    for problem in problems:
        log.warning("hook file not loaded path=%s reason=%s", problem.path, problem.reason)
    if disabled_by is not None:
        log.warning("disableAllHooks is set in %s: no hook runs", disabled_by)
    return HookSet(
        commands={e: tuple(c) for e, c in commands.items()},
        problems=tuple(problems),
        files=tuple(loaded),
        disabled_by=disabled_by,
        trusted=tuple(trusted),
        untrusted=tuple(untrusted),
    )


def _parse_file(data: Any, path: Path, kind: SourceKind) -> tuple[list[HookCommand], bool]:
    if not isinstance(data, dict):
        raise _Malformed("the top level is not a JSON object")
    version = data.get("version")
    if version is not None and version != 1:
        raise _Malformed(f"unsupported version {version!r} (expected 1)")
    disable = data.get("disableAllHooks", False)
    if not isinstance(disable, bool):
        raise _Malformed('"disableAllHooks" is not true or false')
    hooks = data.get("hooks")
    if hooks is None:
        if kind == "copilot":
            raise _Malformed('no "hooks" object')
        return [], disable
    if not isinstance(hooks, dict):
        raise _Malformed('"hooks" is not an object')
    out: list[HookCommand] = []
    for name, entries in hooks.items():
        event = normalise_event(name)
        if event is None:
            log.info("hook event %r in %s is not one familiar fires; ignored", name, path)
            continue
        if not isinstance(entries, list):
            raise _Malformed(f"hooks.{name} is not a list")
        for i, entry in enumerate(entries):
            out += _parse_entry(entry, f"hooks.{name}[{i}]", name, event, path, kind)
    return out, disable


def _parse_entry(
    entry: Any, where: str, name: str, event: HookEvent, path: Path, kind: SourceKind
) -> list[HookCommand]:
    if not isinstance(entry, dict):
        raise _Malformed(f"{where} is not an object")
    group_matcher = _matcher(entry.get("matcher"), where, kind)
    if "hooks" in entry:  # Claude's {matcher, hooks: [...]} grouping
        handlers = entry["hooks"]
        if not isinstance(handlers, list):
            raise _Malformed(f"{where}.hooks is not a list")
        found: list[HookCommand] = []
        for j, handler in enumerate(handlers):
            if not isinstance(handler, dict):
                raise _Malformed(f"{where}.hooks[{j}] is not an object")
            command = _command(handler, f"{where}.hooks[{j}]", name, event, path, group_matcher)
            if command is not None:
                found.append(command)
        return found
    command = _command(entry, where, name, event, path, group_matcher)
    return [] if command is None else [command]


def _matcher(raw: Any, where: str, kind: SourceKind) -> Matcher:
    if raw is None:
        return MATCH_ALL
    if not isinstance(raw, str):
        raise _Malformed(f"{where}.matcher is not a string")
    text = raw.strip()
    if text in ("", "*", ".*"):
        return MATCH_ALL
    if kind == "claude" and _PLAIN_NAMES.fullmatch(text):
        return Matcher(names=frozenset(n.strip() for n in re.split(r"[|,]", text)))
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise _Malformed(f"{where}.matcher {raw!r} is not a valid regex: {exc}") from exc
    return Matcher(pattern=pattern, anchored=kind == "copilot")


def _command(
    entry: dict[str, Any],
    where: str,
    name: str,
    event: HookEvent,
    path: Path,
    matcher: Matcher,
) -> HookCommand | None:
    kind = entry.get("type", "command")
    if kind in _UNSUPPORTED_TYPES:
        log.info("hook %s in %s has type %r, which familiar does not run", where, path, kind)
        return None
    if kind != "command":
        raise _Malformed(f"{where}.type {kind!r} is not a hook type")
    argv = _argv(entry, where)
    if argv is None:
        log.info("hook %s in %s has no command for this platform; skipped", where, path)
        return None
    timeout = entry.get("timeoutSec", entry.get("timeout"))
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise _Malformed(f"{where}: the timeout is not a positive number of seconds")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise _Malformed(f"{where}.cwd is not a string")
    env = entry.get("env") or {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise _Malformed(f"{where}.env is not an object of strings")
    return HookCommand(
        event=event,
        event_name=name,
        dialect=dialect_of(name),
        argv=argv,
        cwd=cwd,
        env=tuple(env.items()),
        timeout=float(timeout) if timeout is not None else None,
        matcher=matcher,
        source=path,
    )


def _argv(entry: dict[str, Any], where: str) -> tuple[str, ...] | None:
    args = entry.get("args")
    if args is not None and (
        not isinstance(args, list) or not all(isinstance(a, str) for a in args)
    ):
        raise _Malformed(f"{where}.args is not a list of strings")
    for key in ("exec", "bash", "command"):
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise _Malformed(f"{where}.{key} is not a non-empty string")
        if key == "exec" or (key == "command" and args is not None):
            return (value, *(args or ()))  # exec form: no shell
        return ("bash" if key == "bash" else "/bin/sh", "-c", value)
    if isinstance(entry.get("powershell"), str):
        return None  # a Windows-only entry
    raise _Malformed(f'{where} has no "bash", "command" or "exec"')
