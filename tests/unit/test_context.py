"""Tests for the context builder: system prompt, history window and compaction."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.agent.agents_section import AgentListing
from core.agent.context import (
    ContextBuilder,
    ContextConfig,
    Window,
    compact,
    estimate_tokens,
)
from core.agent.tokens import ESTIMATE
from core.providers.base import ChatMessage, ToolCall, ToolSpec

FIXED = datetime(2025, 1, 6, 8, 30, tzinfo=UTC)  # a Monday
TOOLS = [
    ToolSpec(name="read_file", description="Read a file.\nMore detail.", parameters={}),
    ToolSpec(name="exec", description="Run a shell command.", parameters={}),
]


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _builder(root: Path, **config: object) -> ContextBuilder:
    return ContextBuilder(
        workspace=root,
        config=ContextConfig.model_validate({"timezone": "Europe/Berlin", **config}),
        clock=lambda: FIXED,
        recheck_seconds=0,
    )


def _user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def _assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def _tool_group(call_id: str, result: str) -> list[ChatMessage]:
    call = ToolCall(id=call_id, name="read_file", arguments={"path": "notes.md"})
    return [
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", content=result, tool_call_id=call_id, name="read_file"),
    ]


def _tokens(messages: tuple[ChatMessage, ...]) -> int:
    return sum(estimate_tokens(m) for m in messages)


# -- config -----------------------------------------------------------------------


def test_config_defaults_and_validation() -> None:
    config = ContextConfig()
    assert (config.file_max_chars, config.history_token_budget) == (12000, 12000)
    assert (config.summary_max_chars, config.timezone) == (4000, None)
    with pytest.raises(ValidationError):
        ContextConfig.model_validate({"unknown": 1})
    with pytest.raises(ValidationError):
        ContextConfig(timezone="Mars/Olympus_Mons")


# -- system prompt ----------------------------------------------------------------


async def test_system_prompt_order(tmp_path: Path) -> None:
    for name in ("IDENTITY.md", "TOOLS.md", "USER.md", "SOUL.md", "AGENTS.md"):
        _write(tmp_path, name, f"content of {name}")
    _write(tmp_path, "memory/MEMORY.md", "remembered")
    prompt = await _builder(tmp_path).system_prompt(
        session_key="cli:default",
        channel="cli",
        tools=TOOLS,
        agents=[AgentListing("researcher", "Finds things\non the web.")],
        extra="EXTRA TEXT",
        summary="user: earlier",
    )
    markers = [
        "## Runtime",
        "## AGENTS.md",
        "## SOUL.md",
        "## USER.md",
        "## TOOLS.md",
        "## IDENTITY.md",
        "## memory/MEMORY.md",
        "## Tools",
        "## Agents",
        "EXTRA TEXT",
        "## Earlier in this conversation (summary)",
    ]
    positions = [prompt.index(marker) for marker in markers]
    assert positions == sorted(positions)
    assert prompt.startswith("## Runtime")
    assert "- read_file: Read a file.\n" in prompt
    assert "More detail." not in prompt
    assert "- exec: Run a shell command." in prompt
    assert "- researcher: Finds things on the web." in prompt
    assert prompt.rstrip().endswith("user: earlier")


async def test_runtime_block_uses_injected_clock(tmp_path: Path) -> None:
    prompt = await _builder(tmp_path).system_prompt(
        session_key="slack:T1:C1", channel="slack", tools=[]
    )
    assert "- Name: familiar" in prompt
    assert "- Current time: 2025-01-06T09:30:00+01:00 (Monday)" in prompt
    assert "- Timezone: Europe/Berlin" in prompt
    assert "- Channel: slack" in prompt
    assert "- Session: slack:T1:C1" in prompt


async def test_runtime_block_host_local_time(tmp_path: Path) -> None:
    builder = ContextBuilder(workspace=tmp_path, config=ContextConfig(), clock=lambda: FIXED)
    prompt = await builder.system_prompt(session_key="cli:x", channel="cli", tools=[])
    local = FIXED.astimezone()
    assert f"- Current time: {local.isoformat(timespec='seconds')}" in prompt
    assert "(host local time)" in prompt


async def test_missing_and_empty_files_are_skipped(tmp_path: Path) -> None:
    _write(tmp_path, "SOUL.md", "be kind")
    _write(tmp_path, "USER.md", "   \n")
    (tmp_path / "TOOLS.md").mkdir()
    prompt = await _builder(tmp_path).system_prompt(session_key="k", channel="cli", tools=[])
    assert "## SOUL.md\n\nbe kind" in prompt
    for absent in ("AGENTS.md", "USER.md", "TOOLS.md", "IDENTITY.md", "MEMORY.md", "## Tools"):
        assert f"## {absent}" not in prompt


async def test_files_are_capped_with_marker(tmp_path: Path) -> None:
    _write(tmp_path, "AGENTS.md", "a" * 150)
    prompt = await _builder(tmp_path, file_max_chars=100).system_prompt(
        session_key="k", channel="cli", tools=[]
    )
    assert "a" * 100 + "\n[... truncated: 50 more characters in AGENTS.md ...]" in prompt
    assert "a" * 101 not in prompt


async def test_file_changes_are_picked_up(tmp_path: Path) -> None:
    builder = _builder(tmp_path)
    _write(tmp_path, "AGENTS.md", "first version")
    assert "first version" in await builder.system_prompt(session_key="k", channel="c", tools=[])
    _write(tmp_path, "AGENTS.md", "second version, longer")
    assert "second version" in await builder.system_prompt(session_key="k", channel="c", tools=[])


async def test_unchanged_files_are_served_from_cache(tmp_path: Path) -> None:
    builder = _builder(tmp_path)
    _write(tmp_path, "AGENTS.md", "original")
    path = tmp_path / "AGENTS.md"
    await builder.system_prompt(session_key="k", channel="c", tools=[])
    stat = path.stat()
    # Same size and mtime: the builder trusts its cache and does not re-read.
    path.write_text("modified", encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    prompt = await builder.system_prompt(session_key="k", channel="c", tools=[])
    assert "original" in prompt


async def test_concurrent_sessions_share_one_builder(tmp_path: Path) -> None:
    _write(tmp_path, "AGENTS.md", "shared instructions")
    builder = _builder(tmp_path)
    prompts = await asyncio.gather(
        *(
            builder.system_prompt(session_key=f"cli:{i}", channel="cli", tools=TOOLS)
            for i in range(200)
        )
    )
    assert all(
        "shared instructions" in p and f"- Session: cli:{i}\n" in p for i, p in enumerate(prompts)
    )


async def test_summary_is_capped_keeping_newest(tmp_path: Path) -> None:
    prompt = await _builder(tmp_path, summary_max_chars=20).system_prompt(
        session_key="k", channel="c", tools=[], summary="old " * 20 + "NEWEST"
    )
    assert prompt.rstrip().endswith("NEWEST")
    assert "old old old old old old" not in prompt


# -- window -----------------------------------------------------------------------


def test_window_keeps_everything_within_budget(tmp_path: Path) -> None:
    history = [_user("hi"), _assistant("hello"), _user("how are you?")]
    window = _builder(tmp_path).window(history, summary=None)
    assert window == Window(messages=tuple(history), dropped=())


def test_window_respects_budget_and_returns_dropped_prefix(tmp_path: Path) -> None:
    history = [m for i in range(20) for m in (_user(f"q{i} " * 20), _assistant(f"a{i} " * 20))]
    history.append(_user("last"))
    window = _builder(tmp_path, history_token_budget=200).window(history, summary=None)
    assert _tokens(window.messages) <= 200
    assert window.messages[-1] == history[-1]
    assert window.dropped + window.messages == tuple(history)
    assert len(window.dropped) > 0


def test_window_summary_counts_against_budget(tmp_path: Path) -> None:
    history = [_user("x" * 40) for _ in range(10)]  # 16 tokens each (4 + estimate 12)
    builder = _builder(tmp_path, history_token_budget=80)
    assert len(builder.window(history, summary=None).messages) == 5
    assert len(builder.window(history, summary="s" * 120).messages) == 2


def test_window_keeps_tool_groups_intact(tmp_path: Path) -> None:
    group = _tool_group("c1", "r" * 400)
    history = [_user("old"), *group, _assistant("done"), _user("next")]
    group_cost = sum(estimate_tokens(m) for m in group)
    tail_cost = estimate_tokens(history[-1]) + estimate_tokens(history[-2])
    # Room for the tool result alone but not for the whole group.
    budget = tail_cost + estimate_tokens(group[1]) + 1
    assert budget < tail_cost + group_cost
    window = _builder(tmp_path, history_token_budget=budget).window(history, summary=None)
    assert window.messages == (history[-2], history[-1])
    assert window.messages[0].role != "tool"


def test_window_never_starts_with_a_tool_result(tmp_path: Path) -> None:
    for budget in range(0, 400, 7):
        history = [
            _user("go"),
            *_tool_group("a", "x" * 100),
            *_tool_group("b", "y" * 100),
            _assistant("ok"),
            _user("more"),
            *_tool_group("c", "z" * 100),
        ]
        window = _builder(tmp_path, history_token_budget=budget).window(history, summary=None)
        assert window.messages[0].role != "tool"
        open_calls: set[str] = set()
        for message in window.messages:
            if message.role == "tool":
                assert message.tool_call_id in open_calls
            else:
                open_calls = {c.id for c in message.tool_calls}
        assert window.dropped + window.messages == tuple(history)


def test_window_keeps_last_user_message_over_budget(tmp_path: Path) -> None:
    history = [_user("short"), _assistant("ok"), _user("huge " * 1000)]
    window = _builder(tmp_path, history_token_budget=10).window(history, summary=None)
    assert window.messages == (history[-1],)
    assert window.dropped == tuple(history[:2])


def test_window_keeps_whole_current_turn_after_last_user(tmp_path: Path) -> None:
    history = [_user("earlier"), _assistant("yes"), _user("do it"), *_tool_group("c", "r" * 200)]
    window = _builder(tmp_path, history_token_budget=5).window(history, summary=None)
    assert window.messages == tuple(history[2:])


def test_window_drops_orphan_tool_results(tmp_path: Path) -> None:
    orphan = ChatMessage(role="tool", content="lost", tool_call_id="gone", name="exec")
    history = [orphan, _user("hi"), orphan, _assistant("hello")]
    window = _builder(tmp_path).window(history, summary=None)
    assert window.messages == (history[1], history[3])
    assert window.dropped == (orphan,)


def test_window_without_history(tmp_path: Path) -> None:
    assert _builder(tmp_path).window([], summary=None) == Window(messages=(), dropped=())


def test_day_300_window_stays_bounded(tmp_path: Path) -> None:
    history: list[ChatMessage] = []
    for i in range(2500):
        history.append(_user(f"message {i} " * 10))
        history.extend(_tool_group(f"call{i}", f"result {i} " * 15))
        history.append(_assistant(f"answer {i} " * 12))
    assert len(history) == 10_000
    builder = _builder(tmp_path, history_token_budget=2000)
    window = builder.window(history, summary=None)
    assert _tokens(window.messages) <= 2000
    assert window.messages[-1] == history[-1]
    assert len(window.dropped) + len(window.messages) == 10_000

    summary = compact(window.dropped, None, max_chars=4000)
    assert len(summary) <= 4000
    again = builder.window(history, summary=summary)
    assert _tokens(again.messages) + ESTIMATE.count(summary) <= 2000


# -- compaction -------------------------------------------------------------------


def test_compact_one_line_per_message() -> None:
    call = ToolCall(id="c", name="exec", arguments={"command": "ls"})
    dropped = [
        _user("hello\nthere  friend"),
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", content="a.txt\nb.txt", tool_call_id="c", name="exec"),
        _assistant("x" * 300),
    ]
    summary = compact(dropped, "user: before", max_chars=4000)
    lines = summary.splitlines()
    assert lines[:4] == [
        "user: before",
        "user: hello there friend",
        "assistant: [called exec]",
        "tool exec: a.txt b.txt",
    ]
    assert lines[4] == "assistant: " + "x" * 200 + "…"


def test_compact_tool_results_are_short() -> None:
    result = ChatMessage(role="tool", content="y" * 500, tool_call_id="c", name="read_file")
    assert compact([result], None, max_chars=4000) == "tool read_file: " + "y" * 80 + "…"


def test_compact_keeps_newest_within_max_chars() -> None:
    dropped = [_user(f"message number {i}") for i in range(100)]
    summary = compact(dropped, "user: the very first", max_chars=200)
    assert len(summary) <= 200
    assert summary.startswith("…\n")
    assert summary.endswith("user: message number 99")
    assert summary.splitlines()[1].startswith("user: message number")
    assert "the very first" not in summary
    # Folding more in stays bounded and keeps a single elision marker.
    again = compact([_user("newer")], summary, max_chars=200)
    assert len(again) <= 200
    assert again.endswith("user: newer")
    assert again.count("…\n") == 1


def test_compact_is_deterministic_and_handles_tiny_limits() -> None:
    dropped = [_user("alpha"), _assistant("beta")]
    assert compact(dropped, None, max_chars=100) == compact(dropped, None, max_chars=100)
    assert compact(dropped, None, max_chars=0) == ""
    assert len(compact([_user("z" * 50)], None, max_chars=10)) <= 10
    assert compact([], None, max_chars=100) == ""


async def test_files_are_rechecked_at_most_once_per_interval(tmp_path: Path) -> None:
    builder = ContextBuilder(
        workspace=tmp_path, config=ContextConfig(), clock=lambda: FIXED, recheck_seconds=3600
    )
    _write(tmp_path, "AGENTS.md", "first version")
    prompts = await asyncio.gather(
        *(builder.system_prompt(session_key=f"k{i}", channel="c", tools=[]) for i in range(50))
    )
    assert all("first version" in p for p in prompts)
    _write(tmp_path, "AGENTS.md", "second version, longer")
    # Within the interval the cached sections are served without touching the disk.
    assert "first version" in await builder.system_prompt(session_key="k", channel="c", tools=[])
