"""``familiar schedule add|list|cancel``: manage scheduled prompts of the running gateway."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import aiohttp
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gateway.config import default_home
from gateway.control_client import ControlClient, ControlError, DaemonUnavailable

__all__ = ["ScheduleClient", "describe_schedule", "schedule_app"]

T = TypeVar("T")

EXIT_FAILED = 1
EXIT_NO_DAEMON = 2
DEFAULT_SESSION = "cli:default"

schedule_app = typer.Typer(
    no_args_is_help=True, help="Schedule prompts on the running gateway (list, add, cancel)."
)

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        metavar="DIR",
        help="FAMILIAR_HOME (default: $FAMILIAR_HOME or ~/.familiar).",
        show_default=False,
    ),
]


class ScheduleClient(ControlClient):
    """The control client plus the schedule routes (``/v1/schedules``)."""

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            async with self._http().request(
                method, path, json=body, timeout=self._timeout(30.0)
            ) as resp:
                text = await resp.text()
                status = resp.status
        except (aiohttp.ClientConnectionError, FileNotFoundError) as exc:
            raise self._unavailable(exc) from exc
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {"error": text.strip()}
        if status >= 400:
            message = data.get("error", text) if isinstance(data, dict) else text
            raise ControlError(str(message), status=status)
        return data

    async def add_schedule(
        self, *, kind: str, spec: str, prompt: str, session: str, timezone: str | None
    ) -> dict[str, Any]:
        """``POST /v1/schedules``: the new schedule (400 -> ControlError with the reason)."""
        body = {"kind": kind, "spec": spec, "prompt": prompt, "session": session}
        if timezone is not None:
            body["timezone"] = timezone
        result: dict[str, Any] = await self._call("POST", "/v1/schedules", body)
        return result

    async def schedules(self) -> list[dict[str, Any]]:
        """``GET /v1/schedules``: the active schedules."""
        body = await self._call("GET", "/v1/schedules")
        items = body.get("schedules", []) if isinstance(body, dict) else []
        return list(items) if isinstance(items, list) else []

    async def cancel_schedule(self, schedule_id: int) -> dict[str, Any]:
        """``DELETE /v1/schedules/{id}`` (404 -> ControlError)."""
        result: dict[str, Any] = await self._call("DELETE", f"/v1/schedules/{schedule_id}")
        return result


def _home(home: Path | None) -> Path:
    return (home or default_home()).expanduser().absolute()


def _run(home: Path, coro: Coroutine[Any, Any, T]) -> T:
    """Run one request; exit 2 with a hint when no daemon answers, 1 on its errors."""
    try:
        return asyncio.run(coro)
    except DaemonUnavailable:
        print(
            f'no familiar gateway is running on {home} — start it with "familiar gateway"',
            file=sys.stderr,
        )
        raise typer.Exit(EXIT_NO_DAEMON) from None
    except ControlError as exc:
        Console(stderr=True, highlight=False).print(escape(str(exc)), style="red")
        raise typer.Exit(EXIT_FAILED) from None


def _session_key(value: str) -> str:
    value = value.strip()
    return value if ":" in value else f"cli:{value}"


def describe_schedule(item: dict[str, Any]) -> str:
    """One line for a schedule as the control API returns it."""
    kind, spec = item.get("kind"), item.get("spec")
    head = f'cron "{spec}"' if kind == "cron" else "once" if kind == "at" else f"{kind} {spec}"
    when = item.get("next_run") or "no further runs"
    where, prompt = item.get("session"), item.get("prompt")
    return f"#{item.get('id')} {head} — next run {when} — {where}: {prompt!r}"


@schedule_app.command("add")
def add(
    prompt: Annotated[str, typer.Argument(help="The plain message to run (not a slash command).")],
    every: Annotated[
        str | None, typer.Option("--every", metavar="D", help="Repeat every D (10s to 1d).")
    ] = None,
    after: Annotated[
        str | None, typer.Option("--after", metavar="D", help="Run once after D.")
    ] = None,
    at: Annotated[
        str | None, typer.Option("--at", metavar="ISO", help="Run once at this date and time.")
    ] = None,
    cron: Annotated[
        str | None,
        typer.Option("--cron", metavar="EXPR", help='5-field cron, e.g. "0 9 * * mon-fri".'),
    ] = None,
    tz: Annotated[
        str | None, typer.Option("--tz", metavar="TZ", help="IANA timezone for --at/--cron.")
    ] = None,
    session: Annotated[
        str, typer.Option("--session", metavar="KEY", help="Session key (NAME means cli:NAME).")
    ] = DEFAULT_SESSION,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    home: HomeOption = None,
) -> None:
    """Schedule PROMPT: exactly one of --every, --after, --at or --cron."""
    chosen = [
        (k, v) for k, v in (("every", every), ("after", after), ("at", at), ("cron", cron)) if v
    ]
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --every, --after, --at or --cron")
    (kind, spec), home_dir = chosen[0], _home(home)

    async def request() -> dict[str, Any]:
        async with ScheduleClient(home_dir) as client:
            return await client.add_schedule(
                kind=kind, spec=spec, prompt=prompt, session=_session_key(session), timezone=tz
            )

    item = _run(home_dir, request())
    if as_json:
        typer.echo(json.dumps(item, indent=2, ensure_ascii=False))
    else:
        typer.echo(f"Scheduled {describe_schedule(item)}")


@schedule_app.command("list")
def list_schedules(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    home: HomeOption = None,
) -> None:
    """List the active schedules of every session."""
    home_dir = _home(home)

    async def request() -> list[dict[str, Any]]:
        async with ScheduleClient(home_dir) as client:
            return await client.schedules()

    items = _run(home_dir, request())
    if as_json:
        typer.echo(json.dumps({"schedules": items}, indent=2, ensure_ascii=False))
        return
    if not items:
        typer.echo("No schedules.")
        return
    table = Table("id", "session", "kind", "spec", "next run", "runs", "prompt")
    for item in items:
        table.add_row(
            f"#{item.get('id')}",
            escape(str(item.get("session"))),
            str(item.get("kind")),
            escape(str(item.get("spec"))),
            str(item.get("next_run") or "-"),
            str(item.get("run_count")),
            escape(str(item.get("prompt"))),
        )
    Console(highlight=False).print(table)


@schedule_app.command("cancel")
def cancel(
    schedule_id: Annotated[str, typer.Argument(metavar="ID", help="The schedule id (3 or #3).")],
    home: HomeOption = None,
) -> None:
    """Cancel a schedule."""
    raw = schedule_id.strip().lstrip("#")
    if not raw.isdigit():
        raise typer.BadParameter(f"{schedule_id!r} is not a schedule id (e.g. 3 or #3)")
    home_dir = _home(home)

    async def request() -> dict[str, Any]:
        async with ScheduleClient(home_dir) as client:
            return await client.cancel_schedule(int(raw))

    item = _run(home_dir, request())
    typer.echo(f"Cancelled #{item.get('id')}.")
