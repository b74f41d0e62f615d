"""``familiar trust [allow|revoke]``: which workspace hook and MCP files the gateway honours."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from core.errors import ConfigError
from gateway.commands.common import (
    EXIT_USAGE,
    CommandGroup,
    fail,
    home_option,
    json_option,
    print_json,
    resolve_home,
    stdout_console,
)
from gateway.commands.doctor_check import Check
from gateway.config import load_config
from gateway.trust import ControlFile, WorkspaceControl, allow_command, workspace_control

__all__ = ["trust_app", "trust_checks"]

_HOME_KEY = "familiar.trust.home"
_STYLE = {"trusted": "green", "untrusted": "yellow", "changed": "red"}
_paths_argument = click.argument(
    "paths",
    nargs=-1,
    required=True,
    metavar="PATH...",
    help="Control files: paths from here, or relative to the workspace.",
)


def _control(ctx: click.Context, home: Path | None) -> tuple[Path, WorkspaceControl]:
    given = home if home is not None else ctx.meta.get(_HOME_KEY)
    where = resolve_home(given)
    try:
        return where, workspace_control(where, load_config(where))
    except ConfigError as exc:
        raise fail(str(exc)) from None


@click.group(cls=CommandGroup, invoke_without_command=True)
@json_option()
@home_option
@click.pass_context
def trust_app(ctx: click.Context, as_json: bool, home: Path | None) -> None:
    """Without a subcommand: every hook and MCP file in the workspace, and its state.

    A workspace file that makes the gateway start a process (hooks: .github/hooks/*.json,
    .claude/settings.json, .claude/settings.local.json; MCP servers: .mcp.json,
    .github/mcp.json, .vscode/mcp.json) is honoured only while it, and every workspace
    file it runs, has the content recorded by "familiar trust allow". States: trusted,
    untrusted (ignored), changed (trusted once, changed since: ignored).
    """
    if ctx.invoked_subcommand is not None:
        ctx.meta[_HOME_KEY] = home
        return
    where, control = _control(ctx, home)
    if as_json:
        print_json(control.as_json())
        return
    console = stdout_console()
    if not control.files:
        console.print(f"No hook or MCP files in {escape(str(control.workspace))}.")
        return
    table = Table("state", "file", "kind", "runs", title=f"Workspace {control.workspace}")
    for f in control.files:
        state = f.check.state.value
        named = ", ".join(_short(p, control) for p in f.check.named) or "-"
        table.add_row(
            f"[{_STYLE[state]}]{state}[/]",
            escape(_short(str(f.check.path), control)),
            f.kind,
            escape(named),
        )
    console.print(table)
    for f in control.ignored:
        console.print(escape(_why(f, where, control)), soft_wrap=True)


def _short(path: str, control: WorkspaceControl) -> str:
    p = Path(path)
    return str(p.relative_to(control.workspace)) if p.is_relative_to(control.workspace) else path


def _why(f: ControlFile, home: Path, control: WorkspaceControl) -> str:
    changed = ", ".join(_short(p, control) for p in f.check.changed)
    what = f"changed since trusted ({changed})" if changed else f.check.state.value
    return f"{f.check.path} is ignored: {what}; trust it with: {allow_command(home, f.check.path)}"


@trust_app.command("allow")
@_paths_argument
@home_option
@click.pass_context
def allow(ctx: click.Context, paths: tuple[str, ...], home: Path | None) -> None:
    """Trust PATH... with their current content and that of the workspace files they run.

    Review each file (and the scripts it names) first: what is recorded is what runs.
    Hooks are used at their next reload (within hooks.reload_interval), MCP servers at
    the next gateway start.
    """
    _, control = _control(ctx, home)
    found: list[ControlFile] = []
    errors: list[str] = []
    for given in paths:
        f = control.find(given)
        if f is not None:
            found.append(f)
        elif not any((base / given).exists() for base in (Path.cwd(), control.workspace)):
            errors.append(f"{given}: no such file (here or in {control.workspace})")
        else:
            errors.append(
                f"{given} is not a hook or MCP file of the workspace {control.workspace}; "
                'see "familiar trust" for the files there'
            )
    if errors:
        raise fail("\n".join(errors) + "\nnothing was trusted", EXIT_USAGE)
    try:
        control.trust.allow(f.check for f in found)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    for f in found:
        runs = ", ".join(_short(p, control) for p in f.check.named) or "no workspace file"
        click.echo(
            f"trusted {f.check.path} (sha256 {f.check.fingerprint.sha256[:16]}…; runs: {runs})"
        )


@trust_app.command("revoke")
@_paths_argument
@home_option
@click.pass_context
def revoke(ctx: click.Context, paths: tuple[str, ...], home: Path | None) -> None:
    """Stop trusting PATH... (also a file that is gone); the gateway then ignores them."""
    _, control = _control(ctx, home)
    try:
        targets = [(given, control.recorded(given)) for given in paths]
    except ConfigError as exc:
        raise fail(str(exc)) from None
    unknown = [given for given, path in targets if path is None]
    if unknown:
        raise fail(
            f"not trusted: {', '.join(unknown)}\nnothing was revoked; "
            '"familiar trust" lists the files and their state',
            EXIT_USAGE,
        )
    try:
        control.trust.revoke(path for _, path in targets if path is not None)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    for _, path in targets:
        click.echo(f"revoked {path}")


def trust_checks(home: Path) -> list[Check]:
    """``doctor``'s checks: one warning per ignored file, naming the command that trusts it."""
    try:
        control = workspace_control(home, load_config(home))
    except ConfigError:
        return []  # the config check reports it
    if not control.ignored:
        return [Check("workspace hook and MCP files", True, f"{len(control.files)} trusted")]
    return [
        Check(f"workspace {f.kind} file", True, _why(f, home, control), warn=True)
        for f in control.ignored
    ]
