"""What a unit's account must reach before a unit is written (`familiar service ...`).

A unit whose user cannot run the interpreter or read the code fails with 203/EXEC,
and so does one whose interpreter or code is under /tmp, which ``PrivateTmp=yes``
replaces with an empty directory inside the unit. ``service install`` and
``service role-unit`` make the same checks (`UnitChecks`) before writing anything.
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.errors import ConfigError

__all__ = ["PRIVATE_TMP", "SYSTEM_HOME", "Account", "UnitChecks", "account", "under"]

PRIVATE_TMP = (Path("/tmp"), Path("/var/tmp"))
"""Directories that ``PrivateTmp=yes`` replaces with empty ones inside the unit."""
SYSTEM_HOME = Path("/var/lib/familiar")  # StateDirectory=familiar

Account = tuple[str, str, int, int]
"""(user, primary group, uid, gid) of an existing account."""


def under(path: Path, parents: Sequence[Path]) -> bool:
    """Whether ``path`` is one of ``parents`` or inside one."""
    return any(path == p or p in path.parents for p in parents)


def account(user: str) -> Account:
    """Return (user, primary group, uid, gid) of an existing account.

    Raises:
        ConfigError: there is no such account (with the ``useradd`` that makes one).
    """
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise ConfigError(
            f"user {user!r} does not exist; create it with: useradd --system --home-dir "
            f"{SYSTEM_HOME} --shell /usr/sbin/nologin {user}",
            key="user",
        ) from None
    try:
        group = grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        group = str(entry.pw_gid)
    return entry.pw_name, group, entry.pw_uid, entry.pw_gid


@dataclass(frozen=True, kw_only=True)
class UnitChecks:
    """The interpreter and code a unit runs, and where ``PrivateTmp=yes`` hides files.

    Attributes:
        python: the interpreter of ExecStart=.
        code_root: where its ``-m gateway.cli`` imports from.
        private_tmp: the directories the unit does not see (tests point them elsewhere,
            so that they pass from a checkout under /tmp too).
    """

    python: Path
    code_root: Path
    private_tmp: Sequence[Path] = PRIVATE_TMP

    def require(self, owner: Account | None, *, command: str) -> None:
        """Raise unless ``owner`` (None: this process's user) can start the unit.

        ``command`` is what to run again once familiar is installed where the account
        reaches it (``familiar service install --system``...), for the hint.

        Raises:
            ConfigError: why it could not, and how to install familiar so that it can.
        """
        runner = _Runner.of(owner) if owner else _Runner.me()
        if (problem := self._unreachable(runner)) is not None:
            raise ConfigError(f"{problem}\n{self._hint(system=owner is not None, then=command)}")

    def _unreachable(self, runner: _Runner) -> str | None:
        package = self.code_root / "gateway"
        for path, what in ((self.python, "the interpreter"), (self.code_root, "the code")):
            if under(path, self.private_tmp) or under(path.resolve(), self.private_tmp):
                return (
                    f"{what} {path} is under /tmp or /var/tmp, which the unit's PrivateTmp=yes "
                    "replaces with an empty directory: the service would fail to start "
                    "(status 203/EXEC)"
                )
        problem = (
            runner.cannot(self.python, "x")
            or runner.cannot(self.code_root, "rx")
            or runner.cannot(package, "rx")
            or runner.cannot(package / "cli.py", "r")
        )
        if problem is None:
            return None
        return f"{problem}: the service would fail to start (status 203/EXEC)"

    def _hint(self, *, system: bool, then: str) -> str:
        root = self.code_root
        source = str(root) if (root / "pyproject.toml").is_file() else "familiar"
        venv = Path("/opt/familiar") if system else Path.home() / ".local" / "familiar"
        return (
            f"install familiar where the service user can reach it, then write the unit "
            f"from there: python3 -m venv {venv} && {venv}/bin/pip install "
            f"{shlex.quote(source)} && {venv}/bin/{then}"
        )


@dataclass(frozen=True, slots=True)
class _Runner:
    """The account a unit runs as, for checking what it may read and execute."""

    name: str
    uid: int
    groups: frozenset[int]

    @classmethod
    def me(cls) -> _Runner:
        entry = pwd.getpwuid(os.getuid())
        groups = frozenset([os.getgid(), *os.getgroups()])
        return cls(entry.pw_name, entry.pw_uid, groups)

    @classmethod
    def of(cls, owner: Account) -> _Runner:
        name, _group, uid, gid = owner
        return cls(name, uid, frozenset(os.getgrouplist(name, gid)))

    def cannot(self, path: Path, need: Literal["r", "x", "rx"]) -> str | None:
        """Why this account cannot use ``path`` (None when it can).

        Each directory on the way (on the path as written and, for a symlink, on its
        target) must be searchable, and the file itself readable or executable. Mode
        bits only: ACLs and mandatory access control are not looked at.
        """
        chains = [path.absolute()]
        if (real := path.resolve()) != chains[0]:
            chains.append(real)
        for chain in chains:
            for parent in reversed(chain.parents):
                if (problem := self._denied(parent, "x", "enter")) is not None:
                    return problem
        return self._denied(real, need, {"r": "read", "x": "run", "rx": "read"}[need])

    def _denied(self, path: Path, need: str, verb: str) -> str | None:
        try:
            st = path.stat()
        except FileNotFoundError:
            return f"{path} does not exist"
        except OSError as exc:
            return f"cannot check {path}: {exc.strerror}"
        bits = (4 if "r" in need else 0) | (1 if "x" in need else 0)
        mode = stat.S_IMODE(st.st_mode)
        if self.uid == 0:  # root needs an x bit somewhere to execute, nothing else
            allowed = not bits & 1 or stat.S_ISDIR(st.st_mode) or bool(mode & 0o111)
        else:
            shift = 6 if st.st_uid == self.uid else 3 if st.st_gid in self.groups else 0
            allowed = (mode >> shift) & bits == bits
        if allowed:
            return None
        owner = _user_name(st.st_uid)
        return f"user {self.name} cannot {verb} {path} (mode {mode:04o}, owner {owner})"


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
