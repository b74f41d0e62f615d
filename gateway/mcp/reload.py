"""McpFiles: a home's MCP servers as they stand, re-read when their files change.

Every ``[mcp] reload_interval`` seconds the files that define servers are stat'ed
(``config.toml``, the ``mcp.json`` files, the trust record and the workspace files the
workspace's servers run); when any changed, the servers are read again (trust checked
as at start) and handed to `McpManager.apply`, which starts, stops and restarts what
changed. A workspace file becomes a source only once ``familiar trust allow`` records
it: editing it untrusts it (its servers stop), trusting it again is itself a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.mcp import McpConfig
from core.mcp.trust import server_files
from core.trust import TRUST_FILE, WorkspaceTrust
from gateway.config import CONFIG_FILE, FamiliarConfig, load_config
from gateway.plugins import ChannelPlugins

from .sources import import_paths, read_mcp

if TYPE_CHECKING:
    from core.mcp.manager import McpManager

__all__ = ["McpFiles"]

log = logging.getLogger(__name__)

_Stamp = tuple[tuple[str, int, int, int] | None, ...]


def _stat(path: Path) -> tuple[str, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path), st.st_ino, st.st_mtime_ns, st.st_size)


class McpFiles:
    """The MCP servers of a gateway: ``[mcp]`` merged with the ``mcp.json`` files.

    Args:
        section: the ``[mcp]`` section as loaded at start.
        home: the familiar home.
        workspace: the workspace.
        env: what ``$VAR`` in the files expands from.
        config_file: ``config.toml``, whose ``[mcp]`` ``reload_section`` re-reads.
        reload_section: reads ``[mcp]`` again (blocking; raises `ConfigError`).
    """

    def __init__(
        self,
        *,
        section: McpConfig,
        home: Path,
        workspace: Path,
        env: Mapping[str, str],
        config_file: Path,
        reload_section: Callable[[], McpConfig],
    ) -> None:
        self._section = section
        self._home = home
        self._workspace = workspace
        self._env = env
        self._config_file = config_file
        self._reload_section = reload_section
        self._trust = WorkspaceTrust(record=home / TRUST_FILE, workspace=workspace)
        self._current = section
        self._section_stamp = _stat(config_file)
        self._stamp: _Stamp = ()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def of_home(
        cls,
        home: Path,
        workspace: Path,
        config: FamiliarConfig,
        plugins: ChannelPlugins,
        env: Mapping[str, str],
    ) -> McpFiles:
        """The servers of the gateway of ``home``, started with ``config``."""
        return cls(
            section=config.mcp,
            home=home,
            workspace=workspace,
            env=env,
            config_file=home / CONFIG_FILE,
            reload_section=lambda: load_config(home, channel_plugins=plugins).mcp,
        )

    def load(self) -> McpConfig:
        """The servers now (blocking: reads files); also what later changes compare to."""
        found = read_mcp(
            self._section, home=self._home, workspace=self._workspace, env=self._env,
            trust=self._trust,
        )  # fmt: skip
        self._current = found.config
        self._stamp = self._stamp_of(found.config)
        return found.config

    def _stamp_of(self, config: McpConfig) -> _Stamp:
        named: dict[Path, None] = {}
        for server in config.servers.values():
            if Path(server.source).is_relative_to(self._trust.workspace):
                files = server_files(server, cwd=self._home, workspace=self._trust.workspace)
                named.update(dict.fromkeys(files))
        paths = [self._config_file, *import_paths(self._home, self._workspace), *named]
        return (*(_stat(p) for p in paths), _stat(self._trust.record or self._home / TRUST_FILE))

    def reread(self) -> McpConfig | None:
        """The servers again when a file changed since the last read, else None
        (blocking). A ``config.toml`` that no longer loads keeps the last ``[mcp]``."""
        if self._stamp_of(self._current) == self._stamp:
            return None
        section_stamp = _stat(self._config_file)
        if section_stamp != self._section_stamp:
            self._section_stamp = section_stamp
            try:
                self._section = self._reload_section()
            except ConfigError as exc:
                log.warning("mcp: [mcp] of %s not reloaded: %s", self._config_file, exc)
        return self.load()

    def watch(self, manager: McpManager) -> None:
        """Apply every change to ``manager`` from now on (``[mcp] reload_interval``)."""
        if self._section.reload_interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._watch(manager), name="mcp:reload")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self, manager: McpManager) -> None:
        while True:
            await asyncio.sleep(self._section.reload_interval)
            try:
                changed = await asyncio.to_thread(self.reread)
            except (ConfigError, OSError) as exc:
                log.warning("mcp: servers not reloaded: %s", exc)
                continue
            if changed is not None:
                await manager.apply(changed)
