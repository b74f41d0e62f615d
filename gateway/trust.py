"""The workspace control files of a home (hook and MCP files) and whether each is trusted.

What ``familiar trust`` lists and changes, and what ``status`` and ``doctor`` report:
every file the gateway would read to start processes outside the sandbox, checked as
the gateway checks it (`core.hooks.loader.check_hook_file`, `gateway.mcp.sources`).
Blocking I/O: the CLI calls it directly, anything async from a thread.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from core.errors import ConfigError
from core.hooks import default_sources
from core.hooks.loader import check_hook_file, hook_files
from core.trust import TRUST_FILE, TrustCheck, WorkspaceTrust
from core.trust import allow_command as trusting
from gateway.config import FamiliarConfig, hooks_dir, load_config, workspace_dir
from gateway.mcp.sources import check_mcp_file, import_paths

__all__ = [
    "ControlFile",
    "WorkspaceControl",
    "allow_command",
    "trust_lines",
    "trust_summary",
    "workspace_control",
]

Kind = Literal["hooks", "mcp"]


def allow_command(home: Path, path: Path) -> str:
    """The exact command that trusts ``path`` in ``home``."""
    return trusting(path, home)


@dataclass(frozen=True, slots=True)
class ControlFile:
    """One workspace control file and its trust state."""

    kind: Kind
    check: TrustCheck

    def as_json(self, home: Path) -> dict[str, Any]:
        return {
            "path": str(self.check.path),
            "kind": self.kind,
            "state": self.check.state.value,
            "named": list(self.check.named),
            "changed": list(self.check.changed),
            "fingerprint": self.check.fingerprint.whole,
            "allow": allow_command(home, self.check.path),
        }


@dataclass(frozen=True, slots=True)
class WorkspaceControl:
    """The control files of one home's workspace, and its trust record."""

    home: Path
    trust: WorkspaceTrust
    files: list[ControlFile]

    @property
    def workspace(self) -> Path:
        return self.trust.workspace

    @property
    def ignored(self) -> list[ControlFile]:
        """The files the gateway ignores: untrusted or changed since trusted."""
        return [f for f in self.files if not f.check.trusted]

    def find(self, given: str) -> ControlFile | None:
        """The control file ``given`` names: a path from here, or from the workspace."""
        for base in (Path.cwd(), self.workspace):
            where = Path(os.path.normpath(base / Path(given).expanduser()))
            for f in self.files:
                if where == f.check.path or _same(where, f.check.path):
                    return f
        return None

    def recorded(self, given: str) -> Path | None:
        """The trusted path ``given`` names (the file may be gone), else None.

        Raises:
            ConfigError: the record is not valid.
        """
        entries = self.trust.entries()
        for base in (Path.cwd(), self.workspace):
            where = Path(os.path.normpath(base / Path(given).expanduser()))
            if str(where) in entries:
                return where
        found = self.find(given)
        return found.check.path if found is not None and str(found.check.path) in entries else None

    def as_json(self) -> dict[str, Any]:
        return {
            "workspace": str(self.workspace),
            "record": str(self.trust.record),
            "files": [f.as_json(self.home) for f in self.files],
        }


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() and a.exists()
    except OSError:
        return False


def workspace_control(
    home: Path, config: FamiliarConfig, env: Mapping[str, str] | None = None
) -> WorkspaceControl:
    """Every hook and MCP file present in the workspace, checked against the record."""
    workspace = workspace_dir(home, config)
    trust = WorkspaceTrust(record=home / TRUST_FILE, workspace=workspace)
    files: list[ControlFile] = []
    for path, kind in hook_files(default_sources(workspace, hooks_dir(home))):
        if path.absolute().is_relative_to(trust.workspace):
            files.append(ControlFile("hooks", check_hook_file(path, kind, trust)))
    for path in import_paths(home, workspace):
        if not path.absolute().is_relative_to(trust.workspace):
            continue
        try:
            check, _, _ = check_mcp_file(
                path, home=home, trust=trust, env=os.environ if env is None else env
            )
        except FileNotFoundError:
            continue
        except OSError:
            check = trust.check(path, [])
        files.append(ControlFile("mcp", check))
    return WorkspaceControl(home, trust, files)


def trust_summary(home: Path) -> dict[str, Any]:
    """What ``familiar status --json`` shows under ``"trust"``: the ignored files."""
    try:
        control = workspace_control(home, load_config(home))
    except ConfigError as exc:
        return {"error": str(exc)}
    return {"untrusted": [f.as_json(home) for f in control.ignored]}


def trust_lines(summary: dict[str, Any]) -> list[str]:
    """``status``'s text for its ``"trust"`` entry (`gateway.trust.trust_summary`)."""
    if "error" in summary:
        return [f"trust: cannot check the workspace files: {summary['error']}"]
    return [
        f"trust: {f['path']} is ignored ({f['state']}); trust it with: {f['allow']}"
        for f in summary.get("untrusted") or []
    ]
