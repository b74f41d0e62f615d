"""``familiar init``: a commented default config.toml, the run folder and the workspace."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import sys
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from core.errors import ConfigError
from core.private_files import private_dir
from core.workspace import scaffold_workspace
from gateway.config import (
    CONFIG_FILE,
    FamiliarConfig,
    check_shared_store,
    config_model,
    load_config,
    workspace_dir,
)
from gateway.config_docs import class_summary, field_docs, toml_key, toml_value
from gateway.config_docs import defaults as config_defaults
from gateway.home import RUN_DIR
from gateway.logging_setup import LogConfig, setup_logging
from gateway.plugins import ChannelPlugins, discover_channels
from gateway.process_table import EX_CONFIG

__all__ = [
    "RUN_DIR",
    "LoadedHome",
    "init_home",
    "load_home",
    "prepare_home",
    "ready_home",
    "render_default_config",
    "unusable_home",
]

log = logging.getLogger(__name__)

_HEADER = """\
# familiar configuration.
#
# Every setting is listed with its default value, commented out, and so is every
# [section] header: to change a setting, uncomment it and its section's header (once).
# A table copied from the docs (e.g. a [provider] block) can be appended to this file
# as it is. Environment variables FAMILIAR_<SECTION>__<KEY> override this file
# (e.g. FAMILIAR_PROVIDER__BASE_URL, FAMILIAR_HTTP__PORT).
"""


@dataclass(frozen=True)
class LoadedHome:
    """A home as the supervisor prepared it, handed to the roles it forks.

    A forked role uses this configuration instead of reading and validating it again:
    every role then runs the configuration the supervisor started with (edits apply
    when the gateway restarts), and validating it again cost each role ~2 MiB of
    private memory (pydantic's work writes to pages the roles would otherwise share).
    """

    home: Path
    plugins: ChannelPlugins
    config: FamiliarConfig


def load_home(
    home: Path,
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    **overrides: Any,
) -> LoadedHome:
    """The home's channel plugins and configuration (`prepare_home`). Blocking.

    Raises:
        ConfigError: the configuration is bad (see `unusable_home`).
        OSError: the home cannot be prepared.
    """
    plugins = discover_channels(entry_points)
    config = prepare_home(home, channel_plugins=plugins, **overrides)
    return LoadedHome(home=home, plugins=plugins, config=config)


async def ready_home(
    home: Path,
    loaded: LoadedHome | None = None,
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LoadedHome:
    """``loaded`` when it is ``home`` (what the supervisor prepared), else `load_home` in a
    thread, with logging set up first (a first start logs what it scaffolds).

    Raises:
        ConfigError, OSError: as `load_home`.
    """
    if loaded is not None and loaded.home == home:
        return loaded
    setup_logging(LogConfig())
    return await asyncio.to_thread(load_home, home, entry_points=entry_points, **(overrides or {}))


def prepare_home(
    home: Path, *, channel_plugins: ChannelPlugins, **overrides: Any
) -> FamiliarConfig:
    """The home's configuration; on first start, write a commented one and scaffold the
    workspace first (`init_home`). Blocking: call it from a thread in async code.

    Raises:
        ConfigError: the configuration is bad (see `unusable_home`).
        OSError: the home cannot be prepared.
    """
    if not (home / CONFIG_FILE).exists():
        for line in init_home(home, channel_plugins=channel_plugins):
            log.info("first start: %s", line)
    config = load_config(home, channel_plugins=channel_plugins, **overrides)
    check_shared_store(home, config)
    return config


def unusable_home(home: Path, exc: ConfigError | OSError) -> int:
    """Say on stderr why `prepare_home` failed; the exit status: 78 for bad configuration
    (restarting cannot fix it), 1 otherwise."""
    if isinstance(exc, ConfigError):
        print(f"familiar: {exc}", file=sys.stderr)
        return EX_CONFIG
    print(f"familiar: cannot prepare {home}: {exc}", file=sys.stderr)
    return 1


def init_home(home: Path, *, channel_plugins: ChannelPlugins | None = None) -> list[str]:
    """Create what a new home needs, never overwriting anything.

    Writes ``config.toml`` (every setting commented out with its default, mode 0600),
    creates the home, ``run/`` and the workspace folder private (mode 0700) and
    scaffolds the workspace. Blocking I/O: call it
    from a thread inside the daemon.

    Args:
        home: the familiar home (``FAMILIAR_HOME``), created if missing.
        channel_plugins: whose ``[channels.<name>]`` tables to document (default:
            the installed ``familiar.channels`` entry points).

    Returns:
        One human-readable line per thing created (empty when all existed).
    """
    plugins = discover_channels() if channel_plugins is None else channel_plugins
    created: list[str] = []
    private_dir(home)
    config = home / CONFIG_FILE
    try:
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(render_default_config(config_model(plugins)))
        created.append(f"wrote {config}")
    run = home / RUN_DIR
    if not run.is_dir():
        created.append(f"created {run}")
    private_dir(run)
    try:
        workspace = workspace_dir(home, load_config(home, channel_plugins=plugins))
    except ConfigError:
        workspace = home / "workspace"  # the daemon will name the bad key
    private_dir(workspace)
    for path in scaffold_workspace(workspace):
        created.append(f"created {path}")
    return created


def render_default_config(model: type[BaseModel] | None = None) -> str:
    """The commented default ``config.toml``, generated from the config models.

    Defaults and descriptions are read from the models themselves (field
    descriptions, attribute docstrings, ``Attributes:`` sections), so they are
    defined once.

    Args:
        model: the root model (default: `FamiliarConfig` with a ``[channels.<name>]``
            section per installed channel plugin).
    """
    if model is None:
        model = config_model(discover_channels())
    lines = [_HEADER]
    sections: list[tuple[str, BaseModel, type[BaseModel]]] = []
    defaults = config_defaults(model)
    docs = field_docs(model)
    for name, value in defaults.items():
        if isinstance(value, BaseModel):
            sections.append((name, value, type(value)))
        else:
            lines.extend(_entry(name, value, docs.get(name)))
    for name, value, cls in sections:
        lines.extend(_section(name, value, cls))
    return "\n".join(lines).rstrip() + "\n"


def _section(path: str, value: BaseModel, cls: type[BaseModel]) -> list[str]:
    lines = [""]
    summary = class_summary(cls)
    if summary:
        lines.extend(_comment(summary))
    # Commented too: a header may then be declared once further down, by a table
    # copied from the docs, without "Cannot declare ('provider',) twice".
    lines.append(f"# [{path}]")
    docs = field_docs(cls)
    nested: list[tuple[str, BaseModel]] = []
    for name in cls.model_fields:
        field_value = getattr(value, name)
        if isinstance(field_value, BaseModel):
            nested.append((name, field_value))
        else:
            key = cls.model_fields[name].alias or name
            lines.extend(_entry(key, field_value, docs.get(name)))
    for name, sub in nested:
        lines.extend(_section(f"{path}.{toml_key(name)}", sub, type(sub)))
    return lines


def _entry(name: str, value: Any, doc: str | None) -> list[str]:
    lines = [""] if doc else []
    if doc:
        lines.extend(_comment(doc))
    if value is None:
        lines.append(f"# {toml_key(name)} =   (not set)")
        return lines
    rendered = toml_value(value)
    first, *rest = rendered.split("\n")
    lines.append(f"# {toml_key(name)} = {first}")
    lines.extend(f"# {line}" for line in rest)
    return lines


def _comment(text: str) -> list[str]:
    return [f"# {line}".rstrip() for line in textwrap.wrap(" ".join(text.split()), width=86)]
