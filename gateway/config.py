"""Loads the one config tree: ``config.toml`` in the home, overridden by ``FAMILIAR_*`` env vars.

This is the only place that reads files or the environment for configuration; core is
handed the resulting models.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from channels.base import ChannelConfig
from channels.cli import CliConfig
from core.agent.config import AgentConfig
from core.errors import ConfigError
from core.group.config import GroupConfig, member_name_problem
from core.hooks import HooksConfig
from core.mcp.config import McpConfig
from core.memory.config import MemoryConfig
from core.providers.aliases import ModelAliases
from core.providers.config import ProviderConfig
from core.scheduling import SchedulerConfig
from core.skills import SkillsConfig
from core.store.config import StoreConfig
from core.tools.config import ToolsConfig
from gateway.home import default_home
from gateway.logging_setup import LogConfig
from gateway.plugins import ChannelPlugins, discover_channels
from gateway.ui_config import UiConfig

__all__ = [
    "CONFIG_FILE",
    "ChannelsConfig",
    "DeliveryConfig",
    "FamiliarConfig",
    "GatewayConfig",
    "HttpConfig",
    "UninstalledChannel",
    "check_shared_store",
    "config_model",
    "default_home",
    "hooks_dir",
    "load_config",
    "shared_store_problem",
    "store_url",
    "unknown_env_sections",
    "workspace_dir",
]

CONFIG_FILE = "config.toml"
DB_FILE = "familiar.db"
HOOKS_DIR = "hooks"


class HttpConfig(BaseModel):
    """The HTTP server (health, metrics, webhooks, Slack, Teams)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Serve HTTP; false: no health, metrics, webhook, Slack HTTP mode or Teams."""
    host: str = "127.0.0.1"
    """Address to bind; anything but loopback exposes the routes (a warning at start)."""
    port: int = Field(default=8787, ge=0, le=65535)
    """Port to bind (0 picks a free one)."""

    def exposure(self, bound_port: int | None = None) -> str | None:
        """A warning when ``host`` is not a loopback address (None when it is, or off).

        What listens there is public to whoever reaches the address: health, metrics,
        and the webhook, Slack and Teams routes of the channels that are enabled.

        Args:
            bound_port: the port actually bound, when known (``port = 0`` picks one).
        """
        if not self.enabled or _loopback(self.host):
            return None
        where = (
            "every interface" if self.host in ("", "0.0.0.0", "::") else "a non-loopback address"
        )
        return (
            f"http.host is {self.host or '(empty)'} ({where}): /healthz, /readyz and /metrics "
            "(and the webhook, Slack and Teams routes of enabled channels, and the web panel's "
            "login over plain HTTP) are reachable "
            f"from the network on port {bound_port or self.port}; "
            'set http.host = "127.0.0.1" unless a firewall or a reverse proxy guards that port'
        )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


class GatewayConfig(BaseModel):
    """How the gateway runs: a main process, a supervisor of role processes, or one process.

    Attributes:
        processes: ``main`` (default): one main process runs the agent, the scheduler,
            the control socket, HTTP and the ``cli`` and ``webhook`` channels; every
            other enabled channel (Slack, Teams, a plugin's) runs in a child process of
            its own (``channel:<name>``), restarted when it dies, so a crashing channel
            SDK cannot take the agent down. With no such channel enabled it is one
            process. ``multi``: ``familiar gateway`` is a supervisor of role processes
            (channels, ``agent_workers`` agent workers, scheduler), so turns use every
            core. ``single``: everything in one process, no children at all.
        agent_workers: agent processes in ``multi`` mode; ``auto`` = the number of CPU
            cores (at least 1).
        restart_backoff_max: the longest wait, in seconds, before restarting a child
            that keeps dying (the wait doubles from 0.5 s per quick death).
        crash_loop_restarts: a child that dies this many times in a row, each within
            ``crash_loop_window`` seconds of its start, is reported ``crash-loop``.
        crash_loop_window: see ``crash_loop_restarts``; a child that ran longer counts
            as healthy again.
        child_stop_timeout: seconds a child gets to stop after SIGTERM (beyond
            ``agent.shutdown_grace``) before it is killed.
        channel_processes: ``one`` (default): in ``multi``, every channel runs in the
            ``channels`` process (in ``main``, those with an SDK of their own still run
            in theirs); ``per-channel``: each enabled channel but ``cli`` runs in a
            process of its own (``channel:<name>``), so a crashing channel leaves the
            others answering; the front (the ``channels`` or the main process) keeps
            the control socket and the HTTP port and forwards each channel's routes to
            it. Needs ``processes`` ``main`` or ``multi``.
    """

    model_config = ConfigDict(extra="forbid")

    processes: Literal["main", "multi", "single"] = "main"
    agent_workers: int | Literal["auto"] = "auto"
    restart_backoff_max: float = Field(default=30.0, ge=0.5, le=3600.0)
    crash_loop_restarts: int = Field(default=5, ge=2)
    crash_loop_window: float = Field(default=60.0, gt=0)
    child_stop_timeout: float = Field(default=10.0, gt=0)
    channel_processes: Literal["one", "per-channel"] = "one"

    @model_validator(mode="after")
    def _consistent(self) -> GatewayConfig:
        if isinstance(self.agent_workers, int) and not 1 <= self.agent_workers <= 256:
            raise ValueError("agent_workers must be auto or between 1 and 256")
        if self.channel_processes == "per-channel" and self.processes == "single":
            raise ValueError(
                'channel_processes = "per-channel" needs processes = "main" or "multi" '
                "(a single process cannot give each channel a process of its own)"
            )
        return self

    @property
    def per_channel(self) -> bool:
        """Whether each channel but ``cli`` runs in a process of its own."""
        return self.channel_processes == "per-channel"

    def worker_count(self) -> int:
        """The number of agent workers (``auto`` resolved on this host)."""
        if self.agent_workers == "auto":
            return max(1, os.cpu_count() or 1)
        return self.agent_workers


class DeliveryConfig(BaseModel):
    """Replies no channel can deliver."""

    model_config = ConfigDict(extra="forbid")

    expire_after: float = Field(default=86_400.0, gt=0)
    """Seconds a reply whose channel is not enabled (disabled since it was asked for,
    or not installed) waits in the outbox, shown by ``familiar status`` and ``doctor``,
    before it is given up on as a ``delivery.failed`` event (default one day: enabling
    the channel again within it still delivers the reply)."""


class UninstalledChannel(BaseModel):
    """A ``[channels.<name>]`` table no installed plugin describes: kept, never started."""

    model_config = ConfigDict(extra="allow")

    enabled: bool = False
    """Enabling it is an error until a package provides this channel."""

    unavailable: ClassVar[str] = (
        "this channel is enabled but no package provides it "
        "(no 'familiar.channels' entry point of that name is installed)"
    )

    @model_validator(mode="after")
    def _not_enabled(self) -> UninstalledChannel:
        if self.enabled:
            raise PydanticCustomError(
                "channel_unavailable", "{reason}", {"reason": self.unavailable}
            )
        return self


class ChannelsConfig(BaseModel):
    """Channels: one ``[channels.<name>]`` table per installed channel, checked by its
    plugin; ``enabled = true`` starts it with the gateway."""

    # config_model() adds a typed field per installed plugin; tables of channels that
    # are not installed stay UninstalledChannel (an error once enabled).
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, UninstalledChannel] = Field(init=False)

    cli: CliConfig = Field(default_factory=CliConfig)

    def installed(self) -> dict[str, ChannelConfig]:
        """Name -> config of every installed channel."""
        found = {name: getattr(self, name) for name in type(self).model_fields}
        return {name: value for name, value in found.items() if isinstance(value, ChannelConfig)}

    def enabled(self) -> dict[str, ChannelConfig]:
        """Name -> config of every installed channel with ``enabled = true`` (cli too)."""
        return {name: value for name, value in self.installed().items() if value.enabled}


class FamiliarConfig(BaseSettings):
    """Every setting of familiar; sections mirror ``config.toml``."""

    model_config = SettingsConfigDict(
        env_prefix="FAMILIAR_",
        env_nested_delimiter="__",
        extra="forbid",
        nested_model_default_partial_update=True,
    )

    workspace: Path | None = None
    """Workspace folder; default ``<home>/workspace``."""
    agent: AgentConfig = Field(default_factory=AgentConfig)
    provider: ProviderConfig = Field(default_factory=ProviderConfig)
    models: ModelAliases = Field(default_factory=ModelAliases)
    """Model aliases and display names (agent files' ``model``) -> provider model ids."""
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    group: GroupConfig = Field(default_factory=GroupConfig)
    ui: UiConfig = Field(default_factory=UiConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Precedence: explicit arguments, then env vars, then config.toml, then defaults.
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


def config_model(plugins: ChannelPlugins) -> type[FamiliarConfig]:
    """`FamiliarConfig` whose ``channels`` has a typed table per plugin in ``plugins``."""
    return _config_model(
        tuple((name, plugin.config_model) for name, plugin in plugins.loaded.items()),
        tuple(plugins.broken.items()),
    )


@cache
def _config_model(
    loaded: tuple[tuple[str, type[ChannelConfig]], ...], broken: tuple[tuple[str, str], ...]
) -> type[FamiliarConfig]:
    """Built once per set of plugins (pydantic builds a schema of the whole configuration):
    the roles forked after the supervisor built it use its model instead of their own."""
    tables: dict[str, Any] = {name: (model, Field(default_factory=model)) for name, model in loaded}
    for name, reason in broken:
        if name in tables:
            continue
        unusable = type(
            f"Unusable_{name}",
            (UninstalledChannel,),
            {
                "__doc__": f"Channel plugin {name!r} is installed but cannot be used.",
                "unavailable": reason,
                "__module__": __name__,
            },
        )
        tables[name] = (unusable, Field(default_factory=unusable))
    channels = create_model(
        "ChannelsConfig", __base__=ChannelsConfig, __doc__=ChannelsConfig.__doc__, **tables
    )
    return type(
        "FamiliarConfig",
        (FamiliarConfig,),
        {
            "__module__": __name__,
            "__annotations__": {"channels": channels},
            "channels": Field(default_factory=channels),
        },
    )


def workspace_dir(home: Path, config: FamiliarConfig) -> Path:
    """The workspace folder: ``workspace`` (relative to the home) or ``<home>/workspace``."""
    workspace = (config.workspace or Path("workspace")).expanduser()
    return workspace if workspace.is_absolute() else home / workspace


def store_url(home: Path, config: FamiliarConfig) -> str:
    """``store.url``, or the embedded SQLite file ``<home>/familiar.db``."""
    return config.store.url or f"sqlite+aiosqlite:///{home / DB_FILE}"


def hooks_dir(home: Path) -> Path:
    """The operator's own hook files: ``<home>/hooks/*.json`` (Copilot CLI format)."""
    return home / HOOKS_DIR


def unknown_env_sections(model: type[FamiliarConfig], environ: Mapping[str, str]) -> list[str]:
    """``FAMILIAR_<SECTION>__...`` variables whose section the configuration does not have.

    pydantic-settings reads only the variables of known fields, so a misspelt section
    (``FAMILIAR_AGNET__NAME``) would be ignored without a word; one inside a known
    section is caught by that section's ``extra="forbid"``. Variables without ``__``
    (``FAMILIAR_HOME``, ``FAMILIAR_SUPERVISED``) are not configuration.
    """
    prefix = str(model.model_config.get("env_prefix", "")).lower()
    delimiter = str(model.model_config.get("env_nested_delimiter") or "__")
    sections = sorted(
        name
        for name, field in model.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    )
    problems = []
    for variable in sorted(environ):
        if not variable.lower().startswith(prefix):
            continue
        section, nested, _rest = variable[len(prefix) :].partition(delimiter)
        if nested and section.lower() not in sections:
            problems.append(
                f"{variable}: there is no section {section.lower()!r} "
                f"(sections: {', '.join(sections)})"
            )
    return problems


def _describe(error: dict[str, Any]) -> str:
    key = ".".join(str(p) for p in error["loc"])
    return f"{key}: {error['msg']}"


@cache
def _bound_to(model: type[FamiliarConfig], path: Path) -> type[FamiliarConfig]:
    """``model`` reading ``path``: pydantic-settings takes the TOML file from
    ``model_config``, so it is bound in a subclass. Made once per file: pydantic builds
    the subclass's whole schema again (~4 MiB), and the roles forked after the supervisor
    loaded the configuration use its class instead of their own."""
    return type(
        "FamiliarConfig",
        (model,),
        {"__module__": __name__, "model_config": {**model.model_config, "toml_file": path}},
    )


def load_config(
    home: Path, *, channel_plugins: ChannelPlugins | None = None, **overrides: Any
) -> FamiliarConfig:
    """Read ``<home>/config.toml`` and the environment; raise ConfigError naming bad keys.

    Args:
        home: the familiar home.
        channel_plugins: validate ``[channels.<name>]`` tables with these plugins'
            models (default: the installed ``familiar.channels`` entry points).
        overrides: settings that win over the file and the environment, by section.
    """
    path = home / CONFIG_FILE
    model = config_model(discover_channels() if channel_plugins is None else channel_plugins)
    unknown = unknown_env_sections(model, os.environ)
    if unknown:
        raise ConfigError(
            "invalid configuration (FAMILIAR_* environment variables):\n  " + "\n  ".join(unknown),
            key=unknown[0].split(":", 1)[0],
        )
    try:
        config: FamiliarConfig = _bound_to(model, path)(**overrides)
    except ValidationError as exc:
        problems = [_describe(e) for e in exc.errors()]  # type: ignore[arg-type]
        first_key = ".".join(str(p) for p in exc.errors()[0]["loc"])
        where = f"{path} or FAMILIAR_* environment variables"
        raise ConfigError(
            "invalid configuration (" + where + "):\n  " + "\n  ".join(problems), key=first_key
        ) from exc
    except (OSError, ValueError) as exc:  # unreadable file, TOML syntax error
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    return config


def check_shared_store(home: Path, config: FamiliarConfig) -> None:
    """Refuse ``store.schema`` or ``[group] enabled`` on a store they cannot work with.

    Not part of `load_config`: each table stays loadable (and shown by ``config show``)
    on its own; the gateway refuses to start (exit 78) and ``doctor`` fails.

    Raises:
        ConfigError: naming the key and the reason.
    """
    if (problem := shared_store_problem(config)) is not None:
        key, reason = problem
        where = f"{home / CONFIG_FILE} or FAMILIAR_* environment variables"
        raise ConfigError(f"invalid configuration ({where}):\n  {key}: {reason}", key=key)


def shared_store_problem(config: FamiliarConfig) -> tuple[str, str] | None:
    """``(key, reason)`` when ``store.schema`` or ``[group]`` cannot work with the store."""
    sqlite = config.store.url is None or config.store.url.startswith("sqlite")
    if config.store.search_schema is not None and sqlite:
        return "store.schema", "is for PostgreSQL only (store.url is SQLite)"
    if not config.group.enabled:
        return None
    if sqlite:
        return (
            "group.enabled",
            "group mode needs a store that several gateways share: set store.url to a "
            "PostgreSQL database (postgresql+asyncpg://...) and store.schema, or set "
            "group.enabled = false",
        )
    name = config.group.member_name(config.agent.name)
    if (problem := member_name_problem(name)) is not None:
        return "group.name", f"{problem} (set group.name; it defaults to agent.name)"
    return None
