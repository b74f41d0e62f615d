"""Loads the one config tree: ``config.toml`` in the home, overridden by ``FAMILIAR_*`` env vars.

This is the only place that reads files or the environment for configuration; core is
handed the resulting models.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from core.agent.config import AgentConfig
from core.errors import ConfigError
from core.providers.config import ProviderConfig
from core.scheduler_config import SchedulerConfig
from core.store.config import StoreConfig
from core.tools.config import ToolsConfig
from gateway.logging_setup import LogConfig

__all__ = [
    "CONFIG_FILE",
    "FamiliarConfig",
    "HttpConfig",
    "default_home",
    "load_config",
]

CONFIG_FILE = "config.toml"


class HttpConfig(BaseModel):
    """The HTTP server (health, metrics, webhooks, Slack, Teams)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)


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
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    channels: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """``[channels.<name>]`` tables; each channel validates its own (``enabled = true``)."""

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


def default_home(env: dict[str, str] | None = None) -> Path:
    """``FAMILIAR_HOME`` or ``~/.familiar``."""
    env = dict(os.environ) if env is None else env
    return Path(env.get("FAMILIAR_HOME") or Path.home() / ".familiar").expanduser()


def _describe(error: dict[str, Any]) -> str:
    key = ".".join(str(p) for p in error["loc"])
    return f"{key}: {error['msg']}"


def load_config(home: Path, **overrides: Any) -> FamiliarConfig:
    """Read ``<home>/config.toml`` and the environment; raise ConfigError naming bad keys."""
    path = home / CONFIG_FILE
    # pydantic-settings reads the TOML path from model_config: bind it in a subclass.
    bound = type(
        "FamiliarConfig",
        (FamiliarConfig,),
        {"model_config": {**FamiliarConfig.model_config, "toml_file": path}},
    )
    try:
        config: FamiliarConfig = bound(**overrides)
        return config
    except ValidationError as exc:
        problems = [_describe(e) for e in exc.errors()]  # type: ignore[arg-type]
        first_key = ".".join(str(p) for p in exc.errors()[0]["loc"])
        where = f"{path} or FAMILIAR_* environment variables"
        raise ConfigError(
            "invalid configuration (" + where + "):\n  " + "\n  ".join(problems), key=first_key
        ) from exc
    except (OSError, ValueError) as exc:  # unreadable file, TOML syntax error
        raise ConfigError(f"cannot read {path}: {exc}") from exc
