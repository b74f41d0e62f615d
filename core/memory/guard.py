"""MemoryFilesGuard: ``workspace/memory/`` is global memory, written only by those allowed.

Every file there is indexed into the ``global`` scope that every session reads. So the
agent's file tools may change it only in a session that may write global memory (the
rule of ``remember scope=global``: a top-level session, with ``[memory]
allow_global_writes``); a subagent, or any session when global writes are off, is
refused and pointed at ``remember``, which writes its own scope. In the bubblewrap
sandbox the directory is read-only for those sessions' commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from core.errors import ToolFailed
from core.memory.files import MEMORY_DIR
from core.memory.service import MemoryService
from core.memory.tools import caller_of
from core.tools.base import ToolContext

__all__ = ["MemoryFilesGuard"]


class MemoryFilesGuard:
    """The file tools' and sandbox's `WriteGuard` for ``workspace/memory/``."""

    def __init__(self, *, memory: MemoryService, workspace: Path) -> None:
        self._memory = memory
        self._workspace = workspace

    def _refusal(self, ctx: ToolContext) -> str | None:
        return self._memory.global_write_refusal(caller_of(ctx))

    def refuse_write(self, ctx: ToolContext, target: Path, path: str) -> None:
        base = ctx.workspace.resolve() / MEMORY_DIR
        if target != base and not target.is_relative_to(base):
            return
        refusal = self._refusal(ctx)
        if refusal is not None:
            raise ToolFailed(
                f"{path} is under {MEMORY_DIR}/, whose files are global memory that every "
                f"session reads, and this session may not write global memory: {refusal}. "
                "Use remember to keep a note in this session's own scope."
            )

    def readonly_dirs(self, ctx: ToolContext) -> Sequence[Path]:
        if self._refusal(ctx) is None:
            return ()
        return (ctx.workspace.resolve() / MEMORY_DIR,)
