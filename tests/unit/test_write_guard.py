"""The sandbox's read-only mounts of a guarded directory (``memory/``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ToolFailed
from core.tools.write_guard import readonly_binds


def test_a_missing_directory_is_created_and_mounted_read_only(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    assert readonly_binds([memory]) == ["--ro-bind", str(memory), str(memory)]
    assert memory.is_dir()


@pytest.mark.parametrize("kind", ["link", "file"])
def test_a_directory_that_cannot_be_mounted_refuses_the_command(tmp_path: Path, kind: str) -> None:
    memory = tmp_path / "memory"
    if kind == "link":
        (tmp_path / "elsewhere").mkdir()
        memory.symlink_to(tmp_path / "elsewhere")
    else:
        memory.write_text("not a directory")
    with pytest.raises(ToolFailed, match="memory in the workspace is not a plain directory"):
        readonly_binds([memory])
