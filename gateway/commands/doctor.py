"""``familiar doctor``: check config, home, workspace, store, provider, hooks, gateway, channels."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import click
from rich.markup import escape

from channels.base import ProbedChannel
from core.errors import ConfigError, FamiliarError
from core.hooks import default_sources, load_hooks
from core.logctx import redact
from core.providers.config import ProviderConfig
from core.tools.sandbox import choose_sandbox
from core.trust import TRUST_FILE, WorkspaceTrust
from gateway.commands.agents import agent_report
from gateway.commands.common import (
    EXIT_FAILED,
    duration,
    home_option,
    no_daemon_hint,
    resolve_home,
    stdout_console,
)
from gateway.commands.doctor_check import Check
from gateway.commands.doctor_group import group_checks
from gateway.commands.doctor_memory import memory_checks
from gateway.commands.doctor_skills import skill_checks
from gateway.commands.doctor_store import store_checks
from gateway.commands.trust import trust_checks
from gateway.commands.undelivered_view import undelivered_checks
from gateway.config import (
    CONFIG_FILE,
    FamiliarConfig,
    check_shared_store,
    hooks_dir,
    load_config,
    workspace_dir,
)
from gateway.control.client import ControlClient, ControlError, DaemonUnavailable
from gateway.mcp import resolve_mcp
from gateway.plugins import BUILT_IN_CHANNELS, ChannelPlugins, build_channels, discover_channels
from gateway.provider_detect import detect_provider

__all__ = ["doctor"]


def _check_home(home: Path) -> Check:
    if not home.is_dir():
        return Check("home writable", False, f"{home} does not exist; run: familiar init")
    try:
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as exc:
        return Check("home writable", False, f"cannot write in {home}: {exc.strerror}")
    return Check("home writable", True, str(home))


def _check_http(config: FamiliarConfig | None) -> list[Check]:
    exposed = config.http.exposure() if config is not None else None
    return [] if exposed is None else [Check("http on loopback", True, exposed, warn=True)]


def _check_mcp_files(home: Path, config: FamiliarConfig | None) -> list[Check]:
    """The MCP servers defined, and the ``mcp.json`` files that could not be used."""
    if config is None:
        return []
    mcp, problems = resolve_mcp(
        config.mcp, home=home, workspace=workspace_dir(home, config), env=os.environ
    )
    checks = [Check("mcp.json files", False, problem) for problem in problems]
    if mcp.servers:
        names = ", ".join(f"{n} ({s.source})" for n, s in sorted(mcp.servers.items()))
        checks.append(Check("mcp servers defined", True, names))
    return checks


def _workspace(home: Path, config: FamiliarConfig | None) -> Path:
    workspace = (config.workspace if config else None) or home / "workspace"
    workspace = workspace.expanduser()
    return workspace if workspace.is_absolute() else home / workspace


def _check_agents(home: Path, config: FamiliarConfig | None) -> list[Check]:
    """Custom agent files: a failed check per file that does not load (file:line), a
    warning per agent whose tools or model map to nothing."""
    if config is None:
        return []
    rows = agent_report(home, config)
    custom = [r for r in rows if r["loaded"] and r["source"] != "built-in"]
    checks = []
    for row in rows:
        if row["loaded"]:
            continue
        where = f"{row['source']}:{row['line']}" if row["line"] else row["source"]
        shadowed = row["shadowed_by"] is not None
        checks.append(Check("custom agent file", shadowed, f"{where}: {row['reason']}", shadowed))
    for row in custom:
        for note in row["notes"]:
            checks.append(Check(f"agent {row['id']}", True, f"{row['source']}: {note}", warn=True))
    if custom or not checks:
        names = ", ".join(r["id"] for r in custom) or "none"
        checks.insert(0, Check("custom agents", True, f"{len(custom)} loaded ({names})"))
    return checks


def _check_workspace(home: Path, config: FamiliarConfig | None) -> Check:
    workspace = _workspace(home, config)
    if not workspace.is_dir():
        return Check("workspace present", False, f"{workspace} is missing; run: familiar init")
    return Check("workspace present", True, str(workspace))


async def _check_provider(config: FamiliarConfig | None) -> Check:
    name = "provider reachable"
    if config is None:
        return Check(name, False, "skipped: the config is invalid")
    source = "config"
    provider = config.provider
    if provider.kind is None:
        choice = await detect_provider(provider, os.environ)
        if choice is None:
            return Check(
                name,
                False,
                "none configured or detected: set provider.kind in config.toml, "
                "export OPENAI_API_KEY / ANTHROPIC_API_KEY, or run Ollama",
            )
        provider, source = choice.config, choice.source
    if provider.kind == "scripted":
        return Check(name, True, "scripted provider (no network)")
    return await _probe_provider(name, provider, source)


async def _probe_provider(name: str, provider: ProviderConfig, source: str) -> Check:
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
        return Check(name, False, f"{label} is unreachable: {exc or type(exc).__name__}")
    if code == 401:
        return Check(name, False, f"{label}: reachable but the key was refused")
    if provider.effective_model is None:
        return Check(name, False, f"{label} answers, but provider.model is unset")
    return Check(name, True, f"{label} answers (HTTP {code}), model {provider.effective_model}")


async def _check_sandbox(config: FamiliarConfig | None) -> Check:
    """Which sandbox ``exec`` commands would run in, probed from this shell."""
    name = "exec sandbox"
    if config is None:
        return Check(name, False, "skipped: the config is invalid")
    exec_config = config.tools.exec
    if not exec_config.enabled:
        return Check(name, True, "exec is disabled (tools.exec.enabled = false)")
    choice = await choose_sandbox(exec_config)
    return _sandbox_verdict(name, choice.as_json(), network=exec_config.network)


def _sandbox_verdict(label: str, choice: dict[str, Any], *, network: bool) -> Check:
    """One check from a sandbox choice (ours, or the one the running gateway reports)."""
    if choice.get("name") is None:
        return Check(label, False, str(choice.get("problem") or "unavailable"))
    if choice["name"] == "none":
        if choice.get("mode") == "none":
            return Check(
                label,
                True,
                "WARNING: none: exec commands from every channel run unconfined and can read "
                "every file this user can ($FAMILIAR_HOME/config.toml, familiar.db) "
                '(tools.exec.sandbox = "none")',
                warn=True,
            )
        return Check(
            label,
            True,
            "WARNING: bubblewrap does not work, so exec runs only for conversations started "
            "in the local CLI, unconfined (it can read $FAMILIAR_HOME/config.toml); Slack, "
            "Teams, webhook callers and their subagents are refused. Cause: "
            f"{choice.get('problem')}",
            warn=True,
        )
    if choice["name"] == "systemd":
        if choice.get("problem"):  # commands fail (clearly) until the socket listens
            return Check(label, False, f"systemd exec unit: {choice['problem']}")
        return Check(
            label, True, f"systemd exec unit (familiar-exec.socket), network {_on(network)}"
        )
    return Check(label, True, f"bwrap (bubblewrap), network {_on(network)}")


def _on(network: bool) -> str:
    return "on" if network else "off"


async def _check_daemon(home: Path) -> list[Check]:
    """The gateway answers, and each of its channels runs."""
    name = "daemon socket answers"
    try:
        async with ControlClient(home, connect_timeout=3.0) as client:
            result = await asyncio.wait_for(client.status(), 5.0)
    except DaemonUnavailable:
        return [Check(name, False, no_daemon_hint(home))]
    except (ControlError, TimeoutError) as exc:
        return [Check(name, False, f"the gateway did not answer properly: {exc or 'timeout'}")]
    up = f"pid {result.get('pid')}, up {duration(result.get('uptime_s'))}"
    checks = [Check(name, True, up), _store_in_gateway(result.get("store_health"))]
    checks += [_running(c) for c in result.get("channels") or []]
    checks += [_process(p) for p in result.get("processes") or []]
    sandbox = result.get("exec_sandbox")
    if isinstance(sandbox, dict):
        # What the gateway itself found, e.g. under a systemd unit that forbids namespaces.
        network = bool(sandbox.get("network", True))
        checks.append(_sandbox_verdict("exec sandbox in the gateway", sandbox, network=network))
    checks += [_mcp_server(s) for s in result.get("mcp") or [] if isinstance(s, dict)]
    checks += undelivered_checks(result)
    return checks


def _store_in_gateway(health: Any) -> Check:
    """The store as the running gateway sees it (a full disk, a lost file)."""
    if not isinstance(health, dict):
        return Check("store in the gateway", True, "not reported", warn=True)
    return Check("store in the gateway", bool(health.get("ok")), str(health.get("detail")))


_STDERR_LINES = 3
"""Lines of a failed MCP server's stderr in its check (``familiar mcp list`` shows all)."""


def _mcp_server(server: dict[str, Any]) -> Check:
    """One MCP server as the gateway sees it; a failing one fails the check."""
    label = f"mcp server {server.get('name')}"
    where = f"(from {server.get('source')})"
    state = server.get("state")
    if state == "ready":
        return Check(label, True, f"ready, {len(server.get('tools') or [])} tools {where}")
    if state == "disabled":
        return Check(label, True, f"disabled {where}")
    if state == "starting":
        return Check(label, True, f"starting {where}", warn=True)
    if state == "stopped":
        return Check(label, True, f"not started yet: starts with the first turn {where}")
    reason = f"{state}: {server.get('error') or 'unknown error'} {where}"
    stderr = str(server.get("stderr") or "").splitlines()[-_STDERR_LINES:]
    return Check(label, False, reason + (f"; stderr: {' | '.join(stderr)}" if stderr else ""))


def _running(channel: dict[str, Any]) -> Check:
    label = f"channel {channel.get('name')} running"
    state = str(channel.get("state"))
    if state == "running":
        return Check(label, True, f"running ({channel.get('restarts', 0)} restarts)")
    reason = state + (f": {channel['error']}" if channel.get("error") else "")
    if channel.get("retry_in") is not None:
        reason += f" (next attempt in {channel['retry_in']}s)"
    return Check(label, False, reason)


async def _check_hooks(home: Path, config: FamiliarConfig | None) -> list[Check]:
    """The hook files load (each malformed one is its own failed check)."""
    name = "hook files"
    if config is None:
        return [Check(name, False, "skipped: the config is invalid")]
    if not config.hooks.enabled:
        return [Check(name, True, "hooks are off (hooks.enabled = false)")]
    workspace = workspace_dir(home, config)
    sources = default_sources(workspace, hooks_dir(home))
    trust = WorkspaceTrust(record=home / TRUST_FILE, workspace=workspace)
    hooks = await asyncio.to_thread(lambda: load_hooks(sources, trust=trust))
    checks = [Check(f"hook file {p.path}", False, p.reason) for p in hooks.problems]
    if hooks.disabled_by is not None:
        checks.append(
            Check(name, True, f"disableAllHooks is set in {hooks.disabled_by}", warn=True)
        )
    elif not hooks.problems:
        summary = f"{hooks.count} hooks from {len(hooks.files)} files" if hooks.files else "none"
        checks.append(Check(name, True, summary))
    return checks


def _process(process: dict[str, Any]) -> Check:
    """One process of the gateway (a role, or the single process) runs and is not looping."""
    label = f"process {process.get('name') or process.get('role')} running"
    state = str(process.get("state"))
    restarts = int(process.get("restarts") or 0)
    if state == "running":
        detail = f"pid {process.get('pid')}, {restarts} restarts"
        return Check(label, True, detail, warn=restarts > 0)
    reason = state + (f": {process['error']}" if process.get("error") else "")
    return Check(label, False, f"{reason} ({restarts} restarts)")


async def _check_channels(config: FamiliarConfig | None, plugins: ChannelPlugins) -> list[Check]:
    """Installed plugins load; each enabled channel accepts its table (credentials too),
    and a channel that can probe its credentials (token acquisition) does."""
    checks = [
        Check(f"channel plugin {name} loads", False, reason)
        for name, reason in plugins.broken.items()
    ]
    if config is None:
        return checks
    for name, table in config.channels.enabled().items():
        if name in BUILT_IN_CHANNELS:
            continue
        label = f"channel {name} credentials"
        try:
            # Builds the channel (its plugin checks its config) without starting it.
            [channel] = build_channels({name: table}, plugins)
        except ConfigError as exc:
            checks.append(Check(label, False, str(exc)))
            continue
        if not isinstance(channel, ProbedChannel):
            checks.append(Check(label, True, f"[channels.{name}] accepted"))
            continue
        try:
            proven = await channel.probe()
        except FamiliarError as exc:
            checks.append(Check(label, False, redact(str(exc))))
        else:
            checks.append(Check(label, True, proven))
    return checks


def _channel_config_error(exc: ConfigError) -> list[Check]:
    """The channel a config error is about, as that channel's own check."""
    parts = (exc.key or "").split(".")
    if len(parts) < 2 or parts[0] != "channels":
        return []
    prefix = f"channels.{parts[1]}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip().startswith(prefix)]
    return [Check(f"channel {parts[1]} credentials", False, "; ".join(lines) or str(exc))]


async def _doctor(home: Path) -> list[Check]:
    config: FamiliarConfig | None = None
    plugins = discover_channels()
    try:
        config = load_config(home, channel_plugins=plugins)
        source = home / CONFIG_FILE
        where = str(source) if source.is_file() else f"defaults ({source} not found)"
        check_shared_store(home, config)
        checks = [Check("config valid", True, where)]
    except ConfigError as exc:
        checks = [Check("config valid", False, str(exc)), *_channel_config_error(exc)]
    checks += [_check_home(home), _check_workspace(home, config), *_check_http(config)]
    checks += _check_mcp_files(home, config)
    checks += await asyncio.to_thread(trust_checks, home)
    checks += await asyncio.to_thread(_check_agents, home, config)
    checks += await asyncio.to_thread(skill_checks, home, config)
    checks += await store_checks(home, config)
    checks += await memory_checks(home, config)
    checks += await group_checks(home, config)
    provider, sandbox, hooks, daemon = await asyncio.gather(
        _check_provider(config),
        _check_sandbox(config),
        _check_hooks(home, config),
        _check_daemon(home),
    )
    channels = await _check_channels(config, plugins)
    return [*checks, provider, sandbox, *hooks, *channels, *daemon]


@click.command("doctor")
@home_option
def doctor(home: Path | None) -> None:
    """Exits non-zero when any check failed. Warnings (``!``, e.g. ``exec`` without a
    sandbox) do not change the exit code.
    """
    home_dir = resolve_home(home)
    checks = asyncio.run(_doctor(home_dir))
    console = stdout_console()
    for check in checks:
        if check.warn:
            mark = "[bold yellow]![/bold yellow]"
        else:
            mark = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
        console.print(f"{mark} {escape(check.name)}: {escape(check.reason)}", soft_wrap=True)
    if not all(c.ok for c in checks):
        raise click.exceptions.Exit(EXIT_FAILED)
