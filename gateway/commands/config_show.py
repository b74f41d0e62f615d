"""``familiar config show``: the effective configuration as TOML or JSON, secrets masked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from core.errors import ConfigError
from gateway.commands.common import (
    command_group,
    fail,
    home_option,
    json_option,
    print_json,
    resolve_home,
)
from gateway.config import CONFIG_FILE, load_config
from gateway.masking import masked_config

__all__ = ["config_app"]

config_app = command_group()


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    return json.dumps(str(value), ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml(table: dict[str, Any], prefix: str = "") -> list[str]:
    lines: list[str] = []
    subtables = {k: v for k, v in table.items() if isinstance(v, dict) and v}
    for key, value in table.items():
        if key in subtables:
            continue
        if value is None:
            lines.append(f"# {_toml_key(key)} is not set")
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in subtables.items():
        name = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
        lines += ["", f"[{name}]", *_toml(value, name)]
    return lines


@config_app.command("show")
@json_option()
@home_option
def config_show(as_json: bool, home: Path | None) -> None:
    """Print the effective configuration (config.toml + FAMILIAR_* env), secrets masked.

    Reads the config locally: no running gateway is needed.
    """
    home_dir = resolve_home(home)
    try:
        config = load_config(home_dir)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    masked = masked_config(config)
    if as_json:
        print_json(masked)
        return
    source = home_dir / CONFIG_FILE
    header = f"# effective configuration of {home_dir}"
    header += "" if source.is_file() else f" ({CONFIG_FILE} not found: defaults and env)"
    click.echo("\n".join([header, *_toml(masked)]))
