"""Hook and MCP definition files in the workspace are read-only to the agent.

Whoever writes them makes the gateway run commands outside the exec sandbox, and the
agent can be talked to by other people (Slack, webhooks). Real tools, real processes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.providers.base import ToolCall
from core.tools import ToolContext, ToolRegistry, ToolResult, ToolsConfig, exec_tools
from core.tools.control_files import CONTROL_DIRS
from core.tools.fs import fs_tools
from tests.unit.test_exec_sandbox import require_bwrap

HOOK = json.dumps({"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "id"}]}})
TARGETS = [
    ".github/hooks/pwn.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
    ".github/mcp.json",
    ".vscode/mcp.json",
    "./.claude/../.mcp.json",
    ".github",
    ".vscode",
]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return ToolContext(workspace=workspace, session_key="slack:T1:C1", channel="slack")


async def call(reg: ToolRegistry, ctx: ToolContext, name: str, **args: object) -> ToolResult:
    return await reg.execute(ToolCall(id="c", name=name, arguments=dict(args)), ctx)


@pytest.mark.parametrize("path", TARGETS)
async def test_write_file_refuses_control_files(ctx: ToolContext, path: str) -> None:
    reg = ToolRegistry(tools=fs_tools(ToolsConfig()))
    result = await call(reg, ctx, "write_file", path=path, content=HOOK)
    assert result.is_error, result.content
    assert "may not change it" in result.content
    assert not (ctx.workspace / path).exists()


async def test_edit_file_refuses_an_existing_hook_file(ctx: ToolContext) -> None:
    hooks = ctx.workspace / ".github" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "policy.json").write_text(HOOK)
    reg = ToolRegistry(tools=fs_tools(ToolsConfig()))
    result = await call(
        reg, ctx, "edit_file", path=".github/hooks/policy.json", old_text="id", new_text="sh"
    )
    assert result.is_error and "may not change it" in result.content
    assert (hooks / "policy.json").read_text() == HOOK


async def test_other_workspace_files_stay_writable(ctx: ToolContext) -> None:
    reg = ToolRegistry(tools=fs_tools(ToolsConfig()))
    for path in (".github/workflows/ci.yml", ".claude-notes.md", "mcp.json", "notes/.mcp.json"):
        result = await call(reg, ctx, "write_file", path=path, content="x")
        assert not result.is_error, (path, result.content)


async def test_read_file_still_reads_control_files(ctx: ToolContext) -> None:
    (ctx.workspace / ".mcp.json").write_text('{"mcpServers": {}}')
    reg = ToolRegistry(tools=fs_tools(ToolsConfig()))
    result = await call(reg, ctx, "read_file", path=".mcp.json")
    assert not result.is_error and "mcpServers" in result.content


async def test_bwrap_command_cannot_write_control_files(ctx: ToolContext) -> None:
    await require_bwrap()
    (ctx.workspace / ".mcp.json").write_text('{"mcpServers": {}}')
    reg = ToolRegistry(tools=exec_tools(ToolsConfig.model_validate({"exec": {"sandbox": "bwrap"}})))
    writes = "; ".join(
        [
            "echo '{}' > .github/hooks/pwn.json",
            "echo '{}' > .claude/settings.json",
            "echo pwned > .mcp.json",
            "rm -rf .github/hooks .claude",
            "mv .claude gone",
            "echo ok > notes.txt",
        ]
    )
    result = await call(reg, ctx, "exec", command=writes)
    assert (ctx.workspace / "notes.txt").read_text() == "ok\n"  # the workspace is writable
    assert (ctx.workspace / ".mcp.json").read_text() == '{"mcpServers": {}}'
    for entry in CONTROL_DIRS:
        assert (ctx.workspace / entry).is_dir() and list((ctx.workspace / entry).iterdir()) == []
    assert not (ctx.workspace / "gone").exists(), result.content


async def test_exec_reads_existing_control_files(ctx: ToolContext) -> None:
    (ctx.workspace / ".mcp.json").write_text('{"mcpServers": {}}')
    reg = ToolRegistry(tools=exec_tools(ToolsConfig.model_validate({"exec": {"sandbox": "none"}})))
    result = await call(reg, ctx, "exec", command="cat .mcp.json")
    assert "mcpServers" in result.content
    assert (ctx.workspace / ".mcp.json").exists()


async def test_bwrap_command_cannot_move_a_control_directory_s_parent_away(
    ctx: ToolContext,
) -> None:
    """``.github/hooks`` is a mount point, but ``.github`` was not: renaming it and
    making a fresh ``.github/hooks/`` planted a hook on the host (same for ``.vscode``)."""
    await require_bwrap()
    (ctx.workspace / ".vscode").mkdir()
    (ctx.workspace / ".vscode" / "mcp.json").write_text('{"servers": {}}')
    reg = ToolRegistry(tools=exec_tools(ToolsConfig.model_validate({"exec": {"sandbox": "bwrap"}})))
    plant = "; ".join(
        [
            "mv .github gh-away && mkdir -p .github/hooks && echo '{}' > .github/hooks/pwn.json",
            "mv .vscode vs-away && mkdir .vscode && echo pwned > .vscode/mcp.json",
            "echo ok > notes.txt",
        ]
    )
    result = await call(reg, ctx, "exec", command=plant)
    assert (ctx.workspace / "notes.txt").read_text() == "ok\n", result.content
    assert not (ctx.workspace / ".github" / "hooks" / "pwn.json").exists(), result.content
    assert not (ctx.workspace / "gh-away").exists(), result.content
    assert (ctx.workspace / ".vscode" / "mcp.json").read_text() == '{"servers": {}}'
    assert not (ctx.workspace / "vs-away").exists(), result.content


async def test_a_file_in_the_way_of_a_control_directory_cannot_break_exec(
    ctx: ToolContext,
) -> None:
    """A file named ``.github`` (written by the agent) made every exec fail: the
    sandbox could not create and mount ``.github/hooks``."""
    await require_bwrap()
    tools = [*fs_tools(ToolsConfig()), *exec_tools(ToolsConfig.model_validate({"exec": {}}))]
    reg = ToolRegistry(tools=tools)
    written = await call(reg, ctx, "write_file", path=".github", content="x")
    assert written.is_error and "may not change it" in written.content
    result = await call(reg, ctx, "exec", command="echo still-works")
    assert not result.is_error and "still-works" in result.content, result.content


async def test_a_link_planted_at_a_control_directory_does_not_break_exec(
    ctx: ToolContext,
) -> None:
    await require_bwrap()
    reg = ToolRegistry(tools=exec_tools(ToolsConfig.model_validate({"exec": {"sandbox": "bwrap"}})))
    planted = await call(reg, ctx, "exec", command="mkdir x && ln -s / .vscode && echo planted")
    assert "planted" in planted.content, planted.content
    result = await call(reg, ctx, "exec", command="echo still-works > x/out; cat x/out")
    assert not result.is_error and "still-works" in result.content, result.content
    # A control file behind a link is not removed: like any file a command made, it is
    # not trusted, so the gateway ignores it (tests/integration/test_workspace_trust.py).
    made = await call(reg, ctx, "exec", command="rm .vscode; ln -s x .vscode; echo {} > x/mcp.json")
    assert not made.is_error and (ctx.workspace / ".vscode" / "mcp.json").exists(), made.content
