"""The orchestration commands: ``/review``, ``/research``, ``/fleet``, ``/autopilot`` and
``/subconscious run``, handled before the model on every channel.

The first three are macros (`core.commands.Macro`): the main agent answers the
prompt the command writes, the same prompt a person could have typed. ``/research``
also narrows the main agent's tools for the run, in code (`RESEARCH_TOOLS`).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from core.commands import CommandHandler, CommandRouter, Macro
from core.errors import CommandError, PolicyDenied, TaskRefused
from core.messages import InboundMessage
from core.orchestration.modes import SessionModes
from core.orchestration.todo_tool import SPAWN_TOOL
from core.orchestration.todos import TodoStore
from core.tasks.registry import SpawnRequest, TaskRegistry
from core.tools.policy import ToolPolicy

__all__ = [
    "REM_DESCRIPTION",
    "REM_NAME",
    "RESEARCH_TOOLS",
    "consolidation_request",
    "register_orchestration_commands",
    "research_slug",
]

RESEARCH_TOOLS = ("sessions_spawn", "write_file", "read_file", "task_complete")
"""The only tools the main agent may use while ``/research`` runs (as the seed lists)."""
REM_NAME = "rem-consolidate"
REM_DESCRIPTION = "Consolidate session learnings"
_SLUG_CHARS = 60


def research_slug(topic: str) -> str:
    """``workspace/research/<slug>.md``'s slug: lowercase words joined by hyphens."""
    slug = re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-")
    return slug[:_SLUG_CHARS].rstrip("-") or "topic"


def _in_git(workspace: Path) -> bool:
    """Whether the workspace is (inside) a git repository."""
    return any((folder / ".git").exists() for folder in (workspace, *workspace.parents))


def _review_prompt(target: str) -> str:
    return (
        f"Review request (/review). Use the sessions_spawn tool with agent_type "
        f'"code-review" (mode sync) to review: {target}.\n'
        "Put everything the reviewer needs into its prompt: what to review and where "
        "(for uncommitted changes: `git status --short`, `git diff` and `git diff "
        "--cached` in the workspace). When it answers, reply with its findings as they "
        "are (bugs, security and logic problems, each with file and line and a fix), "
        "most important first; if it found nothing worth reporting, say so plainly. "
        "Do not review style."
    )


def _research_prompt(topic: str, report: str) -> str:
    tools = ", ".join(RESEARCH_TOOLS)
    return (
        f"Research request (/research): {topic}\n\n"
        "You are the research orchestrator. Work in this order:\n"
        "1. Plan 3 to 5 independent threads that together cover the topic.\n"
        "2. Dispatch them all at once: one sessions_spawn call per thread, agent_type "
        '"research", mode "sync", all in the same response so they run in parallel. '
        "Each prompt is self-contained: the thread's question, what to look for, and to "
        "return findings with sources (file paths, URLs, command output).\n"
        "3. Evaluate coverage: if a part of the topic is missing or thin, dispatch more "
        "research agents (6 to 10 in all for a broad topic).\n"
        f"4. Write the synthesised report with write_file to `{report}`: a summary, "
        "then each thread's findings with their sources, then open questions.\n"
        "5. Call task_complete with a short summary and the report's path "
        f"`{report}`.\n\n"
        f"While this runs you may use only these tools: {tools}."
    )


def _fleet_prompt(goal: str) -> str:
    return (
        f"Fleet request (/fleet): {goal}\n\n"
        "Work in fleet mode:\n"
        "1. Break the goal into todos with the todo tool (action add): a short id, a "
        "title, a self-contained prompt for the agent that will do it, and depends_on "
        "for todos that need another's result first.\n"
        "2. Run them with todo action start (no id: every todo whose dependencies are "
        "done). Each runs as a background subagent; independent ones run in parallel.\n"
        "3. After you answer, this run waits for the running agents and tells you what "
        "finished and which todos are ready; start those the same way.\n"
        "4. When every todo is done or failed, call task_complete with a report: what "
        "each todo produced, what failed and why."
    )


def consolidation_request(session_key: str) -> str:
    """The prompt rem-agent gets."""
    return (
        f"Consolidate the memory of session {session_key}: merge duplicate entries, drop "
        "entries a newer one contradicts, and remember durable learnings from its "
        "recent conversation."
    )


class _Commands:
    def __init__(
        self,
        *,
        workspace: Path,
        modes: SessionModes,
        registry: TaskRegistry,
        policy: ToolPolicy | None,
    ) -> None:
        self._workspace = workspace
        self._modes = modes
        self._registry = registry
        self._policy = policy

    async def review(self, _message: InboundMessage, args: str) -> Macro:
        target = args.strip()
        if not target:
            if not await asyncio.to_thread(_in_git, self._workspace):
                raise CommandError(
                    "usage: /review WHAT (files, a commit, a PR description); without WHAT "
                    "it reviews the uncommitted changes of a git workspace, and this "
                    "workspace is not a git repository"
                )
            target = "the uncommitted changes of the workspace (a git repository)"
        return Macro(command="review", argument=args.strip(), prompt=_review_prompt(target))

    async def research(self, _message: InboundMessage, args: str) -> Macro:
        topic = " ".join(args.split())
        if not topic:
            raise CommandError("usage: /research TOPIC")
        report = f"research/{research_slug(topic)}.md"
        return Macro(
            command="research",
            argument=topic,
            prompt=_research_prompt(topic, report),
            tools=RESEARCH_TOOLS,
            autopilot=True,
            report=report,
        )

    async def fleet(self, _message: InboundMessage, args: str) -> Macro:
        goal = args.strip()
        if not goal:
            raise CommandError("usage: /fleet GOAL")
        return Macro(command="fleet", argument=goal, prompt=_fleet_prompt(goal), autopilot=True)

    async def autopilot(self, message: InboundMessage, args: str) -> str:
        word = args.strip().lower()
        if word not in ("", "on", "off"):
            raise CommandError("usage: /autopilot [on|off]")
        if not word:
            state = "on" if await self._modes.autopilot(message.session_key) else "off"
            return f"Autopilot is {state} for this conversation (/autopilot on|off)."
        enabled = word == "on"
        changed = await self._modes.set_autopilot(
            message.session_key, enabled, message_id=message.id
        )
        if not enabled:
            return (
                "Autopilot off: each message gets one answer."
                if changed
                else ("Autopilot was already off.")
            )
        return (
            "Autopilot on: every message continues until the task is complete "
            "(at most agent.max_continuations nudges)."
            if changed
            else "Autopilot was already on."
        )

    async def subconscious(self, message: InboundMessage, args: str) -> str:
        if args.strip().lower() != "run":
            raise CommandError("usage: /subconscious run")
        if self._policy is not None:  # it starts an agent, as sessions_spawn would
            try:
                self._policy.check(
                    SPAWN_TOOL, channel=message.delivery.channel, agent_type="main", depth=0
                )
            except PolicyDenied as exc:
                raise CommandError(f"/subconscious cannot start rem-agent here: {exc}") from None
        existing = await self._registry.repo.find(REM_NAME, owner_key=message.session_key)
        prompt = consolidation_request(message.session_key)
        try:
            if existing is not None and existing.status == "running":
                return f"{REM_NAME} ({existing.id}) is running already."
            if existing is not None and existing.status == "idle":
                task = await self._registry.send(
                    message.session_key, existing.id, prompt, wait=False
                )
                return f"Woke {REM_NAME} ({task.id}) in the background; it reports when done."
            task, _ = await self._registry.spawn(
                SpawnRequest(
                    owner_key=message.session_key,
                    owner_depth=0,
                    agent_type="rem-agent",
                    prompt=prompt,
                    description=REM_DESCRIPTION,
                    name=REM_NAME,
                    mode="background",
                    parent=message,
                )
            )
        except TaskRefused as exc:
            raise CommandError(str(exc)) from None
        return (
            f"Started rem-agent {task.id} ('{REM_NAME}') in the background; it reports when done."
        )


def register_orchestration_commands(
    commands: CommandRouter,
    *,
    workspace: Path,
    modes: SessionModes,
    registry: TaskRegistry,
    todos: TodoStore,
    policy: ToolPolicy | None = None,
) -> None:
    """Register the five orchestration commands and add autopilot and todos to /status."""
    c = _Commands(workspace=workspace, modes=modes, registry=registry, policy=policy)
    commands.register_macro(
        "review",
        c.review,
        usage="/review [WHAT]",
        summary="code-review agent on WHAT (default: the uncommitted changes)",
    )
    commands.register_macro(
        "research",
        c.research,
        usage="/research TOPIC",
        summary="parallel research agents; a cited report in research/",
    )
    commands.register_macro(
        "fleet",
        c.fleet,
        usage="/fleet GOAL",
        summary="todos with dependencies, run as parallel background agents",
    )
    commands.register(
        "autopilot",
        c.autopilot,
        usage="/autopilot [on|off]",
        summary="every message continues until the task is complete",
    )
    commands.register(
        "subconscious",
        c.subconscious,
        usage="/subconscious run",
        summary="rem-agent consolidates this conversation's memory in the background",
    )
    _extend_status(commands, modes, todos)


def _extend_status(commands: CommandRouter, modes: SessionModes, todos: TodoStore) -> None:
    def wrapper(inner: CommandHandler) -> CommandHandler:
        async def status(message: InboundMessage, args: str) -> str:
            text = await inner(message, args)
            state = "on" if await modes.autopilot(message.session_key) else "off"
            text += f"\nautopilot {state}"
            found = await todos.list(message.session_key)
            if found:
                counts: dict[str, int] = {}
                for t in found:
                    counts[t.status] = counts.get(t.status, 0) + 1
                text += " · todos " + ", ".join(f"{n} {s}" for s, n in counts.items())
            return text

        return status

    commands.wrap("status", wrapper)
