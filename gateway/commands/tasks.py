"""``familiar tasks list|show|cancel``: the subagents of the running gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from gateway.commands.common import (
    command_group,
    home_option,
    json_option,
    print_json,
    query,
    resolve_home,
    stdout_console,
)
from gateway.commands.output import add_row, styled

__all__ = ["tasks_app"]

tasks_app = command_group()

task_id_argument = click.argument("task_id", metavar="ID", help="The subagent's id.")


def _progress(task: dict[str, Any]) -> str:
    progress = task.get("progress") or {}
    last = progress.get("last_intent")
    text = f"{progress.get('turns', 0)} turns, {progress.get('tool_calls', 0)} tool calls"
    return f"{text} (last: {last})" if last else text


def _progress_now(task: dict[str, Any]) -> str:
    current = (task.get("progress") or {}).get("current")
    if not current:
        return _progress(task)
    tool = current.get("tool")
    now = f"now: {current.get('tool_calls', 0)} tool calls" + (f", in {tool}" if tool else "")
    return f"{_progress(task)}; {now}"


def _print_trees(trees: list[dict[str, Any]]) -> None:
    console = stdout_console()
    for tree in trees:
        console.print(
            styled(
                (tree.get("session"), "bold"),
                f" · {tree.get('active')} active, {tree.get('total')} in all",
            )
        )
        stack = [(task, 1) for task in reversed(tree.get("tasks") or [])]
        while stack:
            task, depth = stack.pop()
            what = " ".join(str(task.get("description") or task.get("name") or "").split())
            console.print(
                styled(
                    "  " * depth,
                    (task.get("id"), "bold"),
                    f" {task.get('agent_type')} · {task.get('status')} · {task.get('mode')} · "
                    f"{_progress_now(task)} — {what[:60]}",
                )
            )
            stack.extend((child, depth + 1) for child in reversed(task.get("children") or []))


@tasks_app.command("list")
@click.option("--owner", metavar="KEY", help="Only those of this parent session.")
@click.option(
    "--tree",
    is_flag=True,
    help="Per parent session, each agent with the agents it started and its live progress.",
)
@json_option()
@home_option
def list_tasks(owner: str | None, tree: bool, as_json: bool, home: Path | None) -> None:
    """List subagents, newest first."""
    if tree:
        trees = query(resolve_home(home), lambda client: client.task_trees(session=owner))
        if as_json:
            print_json({"sessions": trees})
        elif not trees:
            click.echo("No subagents.")
        else:
            _print_trees(trees)
        return
    tasks = query(resolve_home(home), lambda client: client.tasks(owner=owner))
    if as_json:
        print_json({"tasks": tasks})
        return
    if not tasks:
        click.echo("No subagents.")
        return
    table = Table(box=None, header_style="bold")
    table.add_column("id", no_wrap=True, min_width=12)
    for column in ("agent", "status", "mode", "parent", "progress", "what"):
        table.add_column(column)
    for task in tasks:
        what = " ".join(str(task.get("description") or task.get("name") or "").split())
        add_row(
            table,
            task.get("id"),
            task.get("agent_type"),
            task.get("status"),
            task.get("mode"),
            task.get("owner"),
            _progress(task),
            what[:60],
        )
    stdout_console().print(table)


@tasks_app.command("show")
@task_id_argument
@json_option()
@home_option
def show_task(task_id: str, as_json: bool, home: Path | None) -> None:
    """Show one subagent: prompt, status, progress, result and its conversation."""
    task = query(resolve_home(home), lambda client: client.task(task_id))
    if as_json:
        print_json(task)
        return
    console = stdout_console()
    console.print(
        f"[bold]{escape(str(task.get('id')))}[/bold] {escape(str(task.get('agent_type')))} · "
        f"{escape(str(task.get('status')))} · {escape(str(task.get('mode')))} · memory "
        f"{escape(str(task.get('memory_share_mode')))} · depth {escape(str(task.get('depth')))}"
    )
    console.print(f"parent: {escape(str(task.get('owner')))}  session: "
                  f"{escape(str(task.get('session')))}")  # fmt: skip
    console.print(f"progress: {escape(_progress_now(task))}")
    console.print(f"prompt: {escape(str(task.get('prompt')))}")
    if task.get("result") is not None:
        console.print(f"result: {escape(str(task.get('result')))}")
    for message in task.get("history") or []:
        console.print(
            f"  {escape(str(message.get('role')))}: {escape(str(message.get('content')))}"
        )


@tasks_app.command("cancel")
@task_id_argument
@home_option
def cancel_task(task_id: str, home: Path | None) -> None:
    """Cancel a subagent and every subagent it started."""
    answer = query(resolve_home(home), lambda client: client.cancel_task(task_id))
    cancelled = answer.get("cancelled") or []
    if cancelled:
        click.echo("Cancelled " + ", ".join(str(c) for c in cancelled) + ".")
    else:
        click.echo(f"{task_id} had already finished ({answer.get('status')}).")
