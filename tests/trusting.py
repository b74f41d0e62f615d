"""Trust a test workspace's hook and MCP files as ``familiar trust allow`` does."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from core.hooks import default_sources
from core.hooks.loader import check_hook_file, hook_files
from core.trust import TRUST_FILE, TrustCheck, WorkspaceTrust
from gateway.mcp.sources import check_mcp_file, import_paths


def trust_workspace(
    home: Path, workspace: Path, *, env: Mapping[str, str] | None = None
) -> WorkspaceTrust:
    """Record every hook and MCP file now in ``workspace`` as trusted in ``home/trust.json``
    (with the workspace files they run); returns the trust of that record."""
    trust = WorkspaceTrust(record=home / TRUST_FILE, workspace=workspace)
    checks: list[TrustCheck] = [
        check_hook_file(path, kind, trust)
        for path, kind in hook_files(default_sources(workspace, None))
    ]
    for path in import_paths(home, workspace)[:3]:
        if path.exists():
            check, _, _ = check_mcp_file(
                path, home=home, trust=trust, env=os.environ if env is None else env
            )
            checks.append(check)
    trust.allow(checks)
    return trust
