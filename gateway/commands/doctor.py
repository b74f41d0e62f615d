"""``familiar doctor``: check config, home, workspace, provider, gateway and channels."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import typer
from rich.markup import escape

from core.errors import ConfigError
from core.providers.config import ProviderConfig
from gateway.commands.common import (
    EXIT_FAILED,
    HomeOption,
    duration,
    no_daemon_hint,
    resolve_home,
    stdout_console,
)
from gateway.config import CONFIG_FILE, FamiliarConfig, load_config
from gateway.control_client import ControlClient, ControlError, DaemonUnavailable
from gateway.plugins import CHANNELS_GROUP, load_channels
from gateway.provider_detect import detect_provider

__all__ = ["doctor"]


@dataclass(frozen=True)
class _Check:
    name: str
    ok: bool
    reason: str


def _check_home(home: Path) -> _Check:
    if not home.is_dir():
        return _Check("home writable", False, f"{home} does not exist; run: familiar init")
    try:
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as exc:
        return _Check("home writable", False, f"cannot write in {home}: {exc.strerror}")
    return _Check("home writable", True, str(home))


def _check_workspace(home: Path, config: FamiliarConfig | None) -> _Check:
    workspace = (config.workspace if config else None) or home / "workspace"
    workspace = workspace.expanduser()
    if not workspace.is_absolute():
        workspace = home / workspace
    if not workspace.is_dir():
        return _Check("workspace present", False, f"{workspace} is missing; run: familiar init")
    return _Check("workspace present", True, str(workspace))


async def _check_provider(config: FamiliarConfig | None) -> _Check:
    name = "provider reachable"
    if config is None:
        return _Check(name, False, "skipped: the config is invalid")
    source = "config"
    provider = config.provider
    if provider.kind is None:
        choice = await detect_provider(provider, os.environ)
        if choice is None:
            return _Check(
                name,
                False,
                "none configured or detected: set provider.kind in config.toml, "
                "export OPENAI_API_KEY / ANTHROPIC_API_KEY, or run Ollama",
            )
        provider, source = choice.config, choice.source
    if provider.kind == "scripted":
        return _Check(name, True, "scripted provider (no network)")
    return await _probe_provider(name, provider, source)


async def _probe_provider(name: str, provider: ProviderConfig, source: str) -> _Check:
    """GET the models list: any HTTP answer means reachable; 401 means a refused key."""
    base = provider.effective_base_url or ""
    label = f"{provider.kind} at {base}" + ("" if source == "config" else f" (from {source})")
    url = f"{base}/v1/models" if provider.kind == "anthropic" else f"{base}/models"
    headers: dict[str, str] = {}
    if provider.api_key is not None:
        secret = provider.api_key.get_secret_value()
        if provider.kind == "anthropic":
            headers = {"x-api-key": secret, "anthropic-version": "2023-06-01"}
        else:
            headers = {"Authorization": f"Bearer {secret}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3.0)) as http,
            http.get(url, headers=headers) as resp,
        ):
            code = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        return _Check(name, False, f"{label} is unreachable: {exc or type(exc).__name__}")
    if code == 401:
        return _Check(name, False, f"{label}: reachable but the key was refused")
    if provider.effective_model is None:
        return _Check(name, False, f"{label} answers, but provider.model is unset")
    return _Check(name, True, f"{label} answers (HTTP {code}), model {provider.effective_model}")


async def _check_daemon(home: Path) -> _Check:
    name = "daemon socket answers"
    try:
        async with ControlClient(home, connect_timeout=3.0) as client:
            result = await asyncio.wait_for(client.status(), 5.0)
    except DaemonUnavailable:
        return _Check(name, False, no_daemon_hint(home))
    except (ControlError, TimeoutError) as exc:
        return _Check(name, False, f"the gateway did not answer properly: {exc or 'timeout'}")
    return _Check(name, True, f"pid {result.get('pid')}, up {duration(result.get('uptime_s'))}")


def _check_channels(config: FamiliarConfig | None) -> list[_Check]:
    """Each enabled plugin channel is installed and accepts its table (credentials too)."""
    if config is None:
        return []
    entry_points = list(importlib.metadata.entry_points(group=CHANNELS_GROUP))
    checks = []
    for name, table in config.channels.items():
        if name == "cli" or not isinstance(table, dict) or table.get("enabled") is not True:
            continue
        label = f"channel {name} credentials"
        try:
            # Builds the channel (it validates its config) without starting it.
            load_channels({name: table}, entry_points)
        except ConfigError as exc:
            checks.append(_Check(label, False, str(exc)))
        else:
            checks.append(_Check(label, True, f"[channels.{name}] accepted"))
    return checks


async def _doctor(home: Path) -> list[_Check]:
    config: FamiliarConfig | None = None
    try:
        config = load_config(home)
        source = home / CONFIG_FILE
        where = str(source) if source.is_file() else f"defaults ({source} not found)"
        checks = [_Check("config valid", True, where)]
    except ConfigError as exc:
        checks = [_Check("config valid", False, str(exc))]
    checks += [_check_home(home), _check_workspace(home, config)]
    checks += await asyncio.gather(_check_provider(config), _check_daemon(home))
    return checks + _check_channels(config)


def doctor(home: HomeOption = None) -> None:
    """Check the setup: config, home, workspace, provider, gateway and channel credentials.

    Exits non-zero when any check failed.
    """
    home_dir = resolve_home(home)
    checks = asyncio.run(_doctor(home_dir))
    console = stdout_console()
    for check in checks:
        mark = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
        console.print(f"{mark} {escape(check.name)}: {escape(check.reason)}", soft_wrap=True)
    if not all(c.ok for c in checks):
        raise typer.Exit(EXIT_FAILED)
