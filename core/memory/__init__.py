"""Memory: remember / recall / forget scoped by session key, memory files, compaction."""

from __future__ import annotations

from .compaction import CompactionWorker
from .config import MemoryConfig
from .files import MemoryFileIndexer, chunk_markdown
from .service import GLOBAL, Caller, MemoryEntry, MemoryService

__all__ = [
    "GLOBAL",
    "Caller",
    "CompactionWorker",
    "MemoryConfig",
    "MemoryEntry",
    "MemoryFileIndexer",
    "MemoryService",
    "chunk_markdown",
]
