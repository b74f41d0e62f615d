"""Workspace trust: a control file in the workspace counts only with the content trusted.

Hook files and MCP server definitions make the gateway start processes outside the
``exec`` sandbox, and the workspace is where the agent (so whoever talks to it) writes.
A workspace control file is honoured only when the trust record (``$FAMILIAR_HOME/
trust.json``, written by ``familiar trust allow``, never visible to ``exec``) holds the
SHA-256 of its current content and of every workspace file it names to run, unchanged.

Files outside the workspace (``$FAMILIAR_HOME/mcp.json``, ``$FAMILIAR_HOME/hooks``) are
the operator's own and are read as they are; callers decide which files need trust.
Blocking I/O throughout: call from a thread in the daemon.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shlex
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.private_files import PRIVATE_FILE

__all__ = [
    "MISSING",
    "NOT_A_FILE",
    "TRUST_FILE",
    "UNREADABLE",
    "Fingerprint",
    "TrustCheck",
    "TrustState",
    "WorkspaceTrust",
    "allow_command",
    "digest",
    "named_files",
    "shell_words",
]

log = logging.getLogger(__name__)

TRUST_FILE = "trust.json"
"""The trust record, in ``$FAMILIAR_HOME``."""
MISSING = "missing"
"""The digest of a named file that does not exist."""
NOT_A_FILE = "not-a-file"
"""The digest of a named path that exists but is no regular file (a folder, a FIFO)."""
UNREADABLE = "unreadable"
"""The digest of a named file this process may not read."""

_VERSION = 1
_CHUNK = 1 << 16
_INTERPRETERS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "fish", "python", "python3", "node", "deno", "bun"}
    | {"ruby", "perl", "php", "pwsh", "lua"}
)
"""Programs whose first plain argument is the script they run (tracked even if missing)."""
_INLINE = frozenset({"-c", "-m", "-e", "--eval", "-p", "--print", "-E"})
"""Options after which an interpreter runs code given on its command line."""
_SEPARATORS = frozenset({";", "&", "&&", "|", "||", "(", ")", ";;", "|&"})


def allow_command(path: Path, home: Path | None) -> str:
    """The exact command that trusts ``path`` (in the home ``home``)."""
    where = f" --home {shlex.quote(str(home))}" if home is not None else ""
    return f"familiar trust allow {shlex.quote(str(path))}{where}"


class TrustState(StrEnum):
    """Whether a workspace control file is honoured."""

    TRUSTED = "trusted"
    """The record holds its current content and that of every file it names."""
    UNTRUSTED = "untrusted"
    """Never trusted (or revoked): ignored."""
    CHANGED = "changed"
    """Trusted once, but it (or a file it names) changed since: ignored."""


def digest(path: Path) -> str:
    """The SHA-256 (hex) of a regular file's content, or `MISSING`, `NOT_A_FILE`, `UNREADABLE`.

    Links are followed (the content is what runs). A FIFO is never read from.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return MISSING
    except NotADirectoryError:
        return MISSING
    except OSError:
        return UNREADABLE
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return NOT_A_FILE
    with os.fdopen(fd, "rb") as f:
        sha = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def shell_words(argv: Sequence[str]) -> list[list[str]]:
    """The commands an argv runs, each as its words: ``sh -c TEXT`` is split as a shell
    would (roughly: quotes, and ``;``, ``&&``, ``|`` between commands)."""
    if len(argv) == 3 and argv[1] == "-c" and Path(argv[0]).name in ("sh", "bash"):
        lexer = shlex.shlex(argv[2], posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # unbalanced quotes: the shell refuses it too; look at the words
            tokens = argv[2].split()
        commands: list[list[str]] = [[]]
        for token in tokens:
            if token in _SEPARATORS:
                commands.append([])
            else:
                commands[-1].append(token)
        return [c for c in commands if c]
    return [list(argv)] if argv else []


def _programs(words: Sequence[str]) -> set[str]:
    """The words of one command that name code to run by path: the program (unless a bare
    name, which ``PATH`` finds), and an interpreter's script."""
    # ``VAR=value prog`` runs prog
    words = [w for w in words if not ("=" in w and w.partition("=")[0].isidentifier())]
    if not words:
        return set()
    found = {words[0]} if "/" in words[0] else set()
    name = Path(words[0]).name
    if name in _INTERPRETERS or name.rstrip("0123456789.") in _INTERPRETERS:
        for word in words[1:]:
            if word in _INLINE:
                break  # code on the command line (or a module by name), no script
            if not word.startswith("-"):
                found.add(word)
                break
    return found


def _inside(path: Path, workspace: Path) -> bool:
    if path.is_relative_to(workspace):
        return True
    try:
        return path.resolve().is_relative_to(workspace.resolve())
    except (OSError, RuntimeError):
        return False


def named_files(commands: Iterable[Sequence[str]], *, cwd: Path, workspace: Path) -> list[Path]:
    """The workspace files some commands name to run, as absolute paths.

    A word counts when it resolves (from ``cwd``) into the workspace and either names an
    existing file, or is a program or an interpreter's script: those count even when
    missing, so that a file created later at that name does not run unseen.

    Args:
        commands: each command's words (`shell_words`).
        cwd: where the commands run; relative words are resolved from it.
        workspace: the workspace (absolute).
    """
    found: dict[Path, None] = {}
    for words in commands:
        programs = _programs(words)
        for word in words:
            candidates = [word, word.partition("=")[2]] if "=" in word else [word]
            for text in candidates:
                if not text or (text.startswith("-") and text not in programs):
                    continue
                path = Path(os.path.normpath(cwd / text))
                if not _inside(path, workspace) or path == workspace:
                    continue
                if text in programs or path.is_file():
                    found[path] = None
    return list(found)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The content of a control file and of the workspace files it names."""

    sha256: str
    named: tuple[tuple[str, str], ...] = ()
    """(absolute path, `digest`) of each named file, sorted by path."""

    @classmethod
    def of(cls, path: Path, named: Iterable[Path], content: bytes | None = None) -> Fingerprint:
        """Hash ``path`` (or its ``content`` as read by the caller) and ``named`` now."""
        sha = digest(path) if content is None else hashlib.sha256(content).hexdigest()
        return cls(sha, tuple(sorted((str(p), digest(p)) for p in set(named))))

    @property
    def whole(self) -> str:
        """One digest of the file and the files it names (the file's own ``sha256`` when
        it names none): what an operator reviews before trusting it."""
        if not self.named:
            return self.sha256
        whole = hashlib.sha256(self.sha256.encode())
        for path, named_digest in self.named:
            whole.update(f"\0{path}\0{named_digest}".encode())
        return whole.hexdigest()


@dataclass(frozen=True, slots=True)
class TrustCheck:
    """One control file checked against the record.

    Attributes:
        path: the control file (absolute, as found in the workspace).
        state: trusted, untrusted or changed.
        fingerprint: its content now.
        changed: what differs from the record (the file itself and/or named files).
    """

    path: Path
    state: TrustState
    fingerprint: Fingerprint
    changed: tuple[str, ...] = ()

    @property
    def trusted(self) -> bool:
        return self.state is TrustState.TRUSTED

    @property
    def named(self) -> tuple[str, ...]:
        """The workspace files it names to run."""
        return tuple(p for p, _ in self.fingerprint.named)


def _entry(raw: Any, where: str) -> tuple[str, dict[str, str]]:
    if not isinstance(raw, dict) or not isinstance(raw.get("sha256"), str):
        raise ValueError(f"{where}: no sha256")
    named = raw.get("named", {})
    if not isinstance(named, dict) or not all(isinstance(v, str) for v in named.values()):
        raise ValueError(f"{where}: named is not an object of digests")
    return raw["sha256"], named


class WorkspaceTrust:
    """The trust record of one workspace's control files.

    Args:
        record: the trust file (``$FAMILIAR_HOME/trust.json``); None: nothing is trusted.
        workspace: the workspace whose control files it covers.
    """

    def __init__(self, *, record: Path | None, workspace: Path) -> None:
        self.record = record
        self.workspace = workspace.absolute()
        self._noted: set[tuple[str, str, str]] = set()

    def stamp(self) -> tuple[int, int, int] | None:
        """What changes when the record is written (None: there is none)."""
        try:
            st = self.record.stat() if self.record is not None else None
        except OSError:
            return None
        return None if st is None else (st.st_ino, st.st_mtime_ns, st.st_size)

    def entries(self) -> dict[str, tuple[str, dict[str, str]]]:
        """The record: control file -> (its sha256, {named file: digest}).

        Raises:
            ConfigError: the record exists but cannot be read or is not a trust record.
        """
        if self.record is None:
            return {}
        try:
            text = self.record.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"cannot read the trust record {self.record}: {exc}", key="trust"
            ) from None
        try:
            data = json.loads(text)
            files = data["files"] if isinstance(data, dict) else None
            if data.get("version") != _VERSION or not isinstance(files, dict):
                raise ValueError(f'expected {{"version": {_VERSION}, "files": {{...}}}}')
            return {str(k): _entry(v, str(k)) for k, v in files.items()}
        except (ValueError, KeyError) as exc:
            raise ConfigError(
                f"the trust record {self.record} is not valid: {exc}; move it aside and "
                "trust the files again",
                key="trust",
            ) from None

    def _entries_or_none(self) -> dict[str, tuple[str, dict[str, str]]]:
        try:
            return self.entries()
        except ConfigError as exc:
            # The daemon goes on without trust (every workspace file ignored); the CLI,
            # which writes the record, reports it.
            if ("record", str(exc), "") not in self._noted:
                self._noted.add(("record", str(exc), ""))
                log.error("%s", exc)
            return {}

    def check(
        self, path: Path, named: Iterable[Path], *, content: bytes | None = None
    ) -> TrustCheck:
        """``path`` (a workspace control file) and the files it names, against the record.

        Args:
            content: the file's content as the caller read (and will use) it; default:
                read it here.
        """
        path = path.absolute()
        now = Fingerprint.of(path, named, content)
        entry = self._entries_or_none().get(str(path))
        if entry is None:
            return TrustCheck(path, TrustState.UNTRUSTED, now)
        sha, recorded = entry
        changed = [str(path)] if sha != now.sha256 else []
        changed += [p for p, d in now.named if recorded.get(p) != d]
        state = TrustState.CHANGED if changed else TrustState.TRUSTED
        return TrustCheck(path, state, now, tuple(changed))

    def note(self, check: TrustCheck, *, what: str) -> None:
        """Log an ignored control file once per content (not on every reload or turn)."""
        key = (str(check.path), check.state.value, check.fingerprint.sha256)
        if check.trusted or key in self._noted:
            return
        self._noted.add(key)
        extra = f" ({', '.join(check.changed)} changed since trusted)" if check.changed else ""
        log.warning(
            "workspace %s file ignored path=%s state=%s%s; trust it with: %s",
            what,
            check.path,
            check.state.value,
            extra,
            self.allow_command(check.path),
        )

    def allow_command(self, path: Path) -> str:
        """The exact command that trusts ``path`` in this record."""
        return allow_command(path, self.record.parent if self.record is not None else None)

    def allow(self, checks: Iterable[TrustCheck]) -> None:
        """Record each file's fingerprint as trusted (one atomic write).

        Raises:
            ConfigError: the record is invalid or cannot be written (it is left as it was).
        """
        entries = self.entries()
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        files = {k: {"sha256": s, "named": n} for k, (s, n) in entries.items()}
        for check in checks:
            files[str(check.path)] = {
                "sha256": check.fingerprint.sha256,
                "named": dict(check.fingerprint.named),
                "trusted_at": stamp,
            }
        self._write(files)

    def revoke(self, paths: Iterable[Path]) -> None:
        """Drop ``paths`` from the record (one atomic write).

        Raises:
            ConfigError: a path is not in the record, or the record cannot be written.
        """
        entries = self.entries()
        keys = [str(p.absolute()) for p in paths]
        unknown = [k for k in keys if k not in entries]
        if unknown:
            raise ConfigError(f"not trusted: {', '.join(unknown)}", key="trust")
        self._write(
            {k: {"sha256": s, "named": n} for k, (s, n) in entries.items() if k not in keys}
        )

    def _write(self, files: dict[str, Any]) -> None:
        if self.record is None:
            raise ConfigError("there is no trust record to write", key="trust")
        text = json.dumps({"version": _VERSION, "files": files}, indent=2, sort_keys=True)
        folder = self.record.parent
        try:
            with _temp_beside(self.record) as (fd, temp):
                os.fchmod(fd, PRIVATE_FILE)
                owner = folder.stat()
                if os.geteuid() == 0 and owner.st_uid != 0:
                    # root trusting for a service user: the daemon must be able to read it
                    os.fchown(fd, owner.st_uid, owner.st_gid)
                with os.fdopen(os.dup(fd), "w", encoding="utf-8") as f:
                    f.write(text + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temp, self.record)
        except OSError as exc:
            raise ConfigError(
                f"cannot write the trust record {self.record}: {exc.strerror or exc}", key="trust"
            ) from exc


@contextlib.contextmanager
def _temp_beside(target: Path) -> Iterator[tuple[int, Path]]:
    """A new private temporary file in the target's folder, removed unless renamed."""
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    temp = Path(name)
    try:
        yield fd, temp
    finally:
        os.close(fd)
        temp.unlink(missing_ok=True)
