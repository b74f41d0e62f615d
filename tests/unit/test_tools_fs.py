"""File tools on a real filesystem: confinement to the workspace, reads, writes, edits."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from core.errors import ToolRetry
from core.providers.base import ToolCall
from core.tools import ToolContext, ToolRegistry, ToolResult, ToolsConfig, fs_tools
from core.tools.workspace_paths import resolve_in_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("top secret")
    return out


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace, session_key="cli:test", channel="cli")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(tools=fs_tools(ToolsConfig(max_file_bytes=64)))


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def run(registry: ToolRegistry, ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    return await registry.execute(ToolCall(id="c", name=name, arguments=args), ctx)


def test_public_names_and_arguments(registry: ToolRegistry) -> None:
    params = {s.name: list(s.parameters["properties"]) for s in registry.specs()}
    assert params == {
        "edit_file": ["path", "old_text", "new_text"],
        "list_dir": ["path"],
        "read_file": ["path"],
        "resolve_path": ["path"],
        "write_file": ["path", "content"],
    }


# --- resolve_in_workspace -------------------------------------------------------------


def test_resolve_relative_and_absolute_inside(workspace: Path) -> None:
    root = workspace.resolve()
    assert resolve_in_workspace(workspace, "a/b.txt") == root / "a" / "b.txt"
    assert resolve_in_workspace(workspace, "a/../b.txt") == root / "b.txt"
    assert resolve_in_workspace(workspace, str(root / "c.txt")) == root / "c.txt"
    assert resolve_in_workspace(workspace, ".") == root


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", ""])
def test_resolve_refuses_escapes(workspace: Path, path: str) -> None:
    with pytest.raises(ToolRetry):
        resolve_in_workspace(workspace, path)


def test_resolve_refuses_symlinks_out(workspace: Path, outside: Path) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "dangling").symlink_to(outside / "not-yet.txt")
    (workspace / "out_dir").symlink_to(outside, target_is_directory=True)
    for path in ["link.txt", "dangling", "out_dir/secret.txt", "out_dir/new.txt"]:
        with pytest.raises(ToolRetry, match="outside the workspace"):
            resolve_in_workspace(workspace, path)


def test_resolve_allows_symlinks_within(workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to(workspace / "real", target_is_directory=True)
    assert resolve_in_workspace(workspace, "alias/f") == workspace.resolve() / "real" / "f"


async def test_resolve_path_tool(registry: ToolRegistry, ctx: ToolContext) -> None:
    ok = await run(registry, ctx, "resolve_path", path="notes/a.md")
    assert not ok.is_error
    assert ok.content == str(ctx.workspace.resolve() / "notes" / "a.md")
    bad = await run(registry, ctx, "resolve_path", path="../a.md")
    assert bad.is_error
    assert "outside the workspace" in bad.content


# --- escapes through the tools write nothing outside -----------------------------------


@pytest.mark.parametrize(
    "path", ["../outside/evil.txt", "link.txt", "dangling", "out_dir/evil.txt", "ABSOLUTE"]
)
async def test_writes_never_escape(
    registry: ToolRegistry, ctx: ToolContext, workspace: Path, outside: Path, path: str
) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "dangling").symlink_to(outside / "dangling.txt")
    (workspace / "out_dir").symlink_to(outside, target_is_directory=True)
    path = str(outside / "evil.txt") if path == "ABSOLUTE" else path
    before = listing(outside)

    write = await run(registry, ctx, "write_file", path=path, content="pwned")
    edit = await run(registry, ctx, "edit_file", path=path, old_text="top", new_text="pwned")
    read = await run(registry, ctx, "read_file", path=path)

    for result in (write, edit, read):
        assert result.is_error
        assert "outside the workspace" in result.content
    assert listing(outside) == before
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_list_dir_outside_is_refused(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "list_dir", path="..")
    assert result.is_error
    assert "outside the workspace" in result.content


# --- read / write / list ----------------------------------------------------------------


async def test_write_creates_parents_then_read(
    registry: ToolRegistry, ctx: ToolContext, workspace: Path
) -> None:
    written = await run(registry, ctx, "write_file", path="a/b/c.txt", content="héllo\r\nworld")
    assert not written.is_error
    assert written.content == "wrote 13 bytes to a/b/c.txt"
    assert (workspace / "a/b/c.txt").read_bytes() == "héllo\r\nworld".encode()
    read = await run(registry, ctx, "read_file", path="a/b/c.txt")
    assert read.content == "héllo\r\nworld"


async def test_read_truncates_at_max_file_bytes(
    registry: ToolRegistry, ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "big.txt").write_text("x" * 100)
    result = await run(registry, ctx, "read_file", path="big.txt")
    assert not result.is_error
    assert result.content.startswith("x" * 64 + "\n[... truncated")
    assert "100 bytes" in result.content


async def test_read_errors(registry: ToolRegistry, ctx: ToolContext, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "bin").write_bytes(b"\x00\x01\x02")
    os.mkfifo(workspace / "fifo")
    missing = await run(registry, ctx, "read_file", path="missing.txt")
    assert missing.is_error
    assert "not found" in missing.content
    assert "is a directory" in (await run(registry, ctx, "read_file", path="d")).content
    assert "binary" in (await run(registry, ctx, "read_file", path="bin")).content
    assert "not a regular file" in (await run(registry, ctx, "read_file", path="fifo")).content


async def test_list_dir(registry: ToolRegistry, ctx: ToolContext, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "b.txt").write_text("12345")
    (workspace / "a.txt").write_text("")
    result = await run(registry, ctx, "list_dir")
    assert result.content.splitlines() == ["sub/", "a.txt  (0 bytes)", "b.txt  (5 bytes)"]
    empty = await run(registry, ctx, "list_dir", path="sub")
    assert empty.content == "sub: (empty directory)"
    not_dir = await run(registry, ctx, "list_dir", path="a.txt")
    assert not_dir.is_error


# --- edit ---------------------------------------------------------------------------------


async def test_edit_exact_match(registry: ToolRegistry, ctx: ToolContext, workspace: Path) -> None:
    (workspace / "f.py").write_bytes(b"def f():\r\n    return 1\r\n")
    result = await run(
        registry, ctx, "edit_file", path="f.py", old_text="return 1", new_text="return 2"
    )
    assert not result.is_error
    assert (workspace / "f.py").read_bytes() == b"def f():\r\n    return 2\r\n"


async def test_edit_not_found(registry: ToolRegistry, ctx: ToolContext, workspace: Path) -> None:
    (workspace / "f.txt").write_text("alpha beta")
    result = await run(registry, ctx, "edit_file", path="f.txt", old_text="gamma", new_text="x")
    assert result.is_error
    assert "old_text not found" in result.content
    assert (workspace / "f.txt").read_text() == "alpha beta"


async def test_edit_multiple(registry: ToolRegistry, ctx: ToolContext, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a a a")
    result = await run(registry, ctx, "edit_file", path="f.txt", old_text="a", new_text="b")
    assert result.is_error
    assert "occurs 3 times" in result.content
    assert (workspace / "f.txt").read_text() == "a a a"


async def test_edit_missing_file(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "edit_file", path="nope.txt", old_text="a", new_text="b")
    assert result.is_error
    assert "not found" in result.content


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {"path": "d/secret.txt"}),
        ("write_file", {"path": "d/secret.txt", "content": "overwritten"}),
        ("write_file", {"path": "d/new/planted.json", "content": "{}"}),
        ("edit_file", {"path": "d/secret.txt", "old_text": "top", "new_text": "no"}),
    ],
)
async def test_a_directory_swapped_for_a_link_after_the_check_leads_nowhere(
    registry: ToolRegistry,
    ctx: ToolContext,
    workspace: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    args: dict[str, Any],
) -> None:
    """Another session's exec can swap ``d`` for a link between the path check and the
    open (a race, made certain here): the tool must fail, not follow it outside."""
    import core.tools.fs as fs

    (workspace / "d").mkdir()
    (workspace / "d" / "secret.txt").write_text("top secret")

    def resolve_then_swap(root: Path, path: str) -> Path:
        resolved = resolve_in_workspace(root, path)
        (workspace / "d" / "secret.txt").unlink()
        (workspace / "d").rmdir()
        (workspace / "d").symlink_to(outside)
        return resolved

    monkeypatch.setattr(fs, "resolve_in_workspace", resolve_then_swap)
    result = await run(registry, ctx, name, **args)
    assert result.is_error, result.content
    assert "top secret" not in result.content
    assert (outside / "secret.txt").read_text() == "top secret"
    assert listing(outside) == ["secret.txt"]
