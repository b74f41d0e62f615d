"""The built-in agents that the orchestration commands start: code-review, research, rem-agent."""

from __future__ import annotations

from core.tasks.spec import AgentSpec

__all__ = ["CONSOLIDATE_TOOL", "ORCHESTRATION_AGENTS", "SEALED_AGENTS"]

CONSOLIDATE_TOOL = "memory_consolidate"
_READ_TOOLS = ("read_file", "list_dir", "resolve_path", "recall")
SEALED_AGENTS = frozenset({"rem-agent"})
"""Built-ins no agent file replaces: rem-agent is handed a session's whole memory and
recent conversation (`CONSOLIDATE_TOOL`) and runs by itself for idle sessions, while the
workspace's agent files can be written by anyone who can make the agent write a file."""

ORCHESTRATION_AGENTS: tuple[AgentSpec, ...] = (
    AgentSpec(
        name="code-review",
        description="High signal-to-noise review of a change or of files: finds bugs, "
        "security and logic problems, never style.",
        tools=("exec", *_READ_TOOLS),
        instructions="Review the change or files you are given. Read the diff "
        "(`git diff`, `git diff --cached`, `git status --short` when it is a git "
        "repository) and the code around it. Report only what matters: bugs, security "
        "problems, logic errors, missed edge cases, broken error handling. Never comment "
        "on style, naming or formatting. For each finding give the file and line, what "
        "is wrong, why it matters and a fix. If you find nothing worth reporting, say so "
        "in one line. You cannot change files.",
    ),
    AgentSpec(
        name="research",
        description="Investigates one thread of a research question with the tools it "
        "has; returns findings with their sources.",
        tools=("exec", *_READ_TOOLS, "mcp__*"),
        instructions="Investigate the one thread you are given, thoroughly but within "
        "it. Use your tools: read files, run read-only commands, call MCP tools (web "
        "search, fetch) when you have them. Answer with your findings as short points, "
        "each with its source: a file path, a URL an MCP tool returned, or the command "
        "whose output shows it. Say what you could not find out. Do not write files.",
    ),
    AgentSpec(
        name="rem-agent",
        description="Memory consolidation: merges duplicate memory entries, drops what a "
        "newer entry contradicts, records durable learnings of the session.",
        tools=(CONSOLIDATE_TOOL,),
        instructions="You consolidate the memory of the session that started you. Call "
        f"{CONSOLIDATE_TOOL} with action=list first: it shows that session's memory "
        "entries (oldest first, exact duplicates flagged) and its recent conversation. "
        "Then: merge entries that say the same thing into one (action=merge with their "
        "ids and the merged text); drop an entry a newer one contradicts (action=drop "
        "with the reason); add durable learnings from the conversation that are not "
        "remembered yet (action=add): preferences, decisions, facts about the user's "
        "setup; never passing chatter. Change nothing when the memory is already clean. "
        "Answer with a short list of what you changed.",
    ),
)
