"""Configuration of memory: entry limits, scopes, workspace file indexing, compaction."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

__all__ = ["EmbeddingsConfig", "MemoryConfig"]


class EmbeddingsConfig(BaseModel):
    """``[memory.embeddings]``: optional semantic recall through an OpenAI-compatible
    ``/v1/embeddings`` endpoint, blended with the full-text rank. Off by default."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    """Embed memory entries and blend vector similarity into recall."""
    base_url: str = "http://127.0.0.1:11434/v1"
    """Up to and including ``/v1``; ``/embeddings`` is appended."""
    api_key: SecretStr | None = None
    """Sent as a bearer token when set."""
    model: str = "nomic-embed-text"
    """The embedding model the endpoint serves."""
    dimensions: int | None = Field(default=None, ge=1, le=8192)
    """Asked of the endpoint when set (models that can shorten their vectors)."""
    weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """Share of the score from vector similarity; the rest is the full-text rank."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds per embeddings request."""
    batch: int = Field(default=32, ge=1, le=2048)
    """Entries embedded per request by the background pass."""
    poll_seconds: float = Field(default=5.0, gt=0)
    """How often entries without a vector are looked for (also woken by remember)."""
    retry_seconds: float = Field(default=30.0, ge=0)
    """After a failed request, recall uses the full-text rank alone for this long."""
    scan_limit: int = Field(default=5000, ge=0)
    """Without sqlite-vec / pgvector: most vectors (newest first) compared in Python per
    recall; 0 leaves recall to the full-text path alone."""


class MemoryConfig(BaseModel):
    """The ``[memory]`` section: what the agent may remember and how history is compacted."""

    model_config = ConfigDict(extra="forbid")

    allow_global_writes: bool = True
    """Top-level sessions may write the ``global`` scope (subagents never may)."""
    max_entry_chars: int = Field(default=4000, ge=1, le=100_000)
    """Longest text one entry may hold."""
    max_tags: int = Field(default=20, ge=0, le=100)
    """Most tags one entry may carry."""
    recency_half_life_days: float = Field(default=30.0, gt=0)
    """Recall ranks by relevance, then weighs recency: an entry this old counts a bit less."""
    files_poll_seconds: float = Field(default=3.0, gt=0)
    """How often ``workspace/memory/*.md`` is checked for changes (re-indexed into global)."""
    file_chunk_chars: int = Field(default=1500, ge=200, le=20_000)
    """Longest chunk of a memory file; files are split by heading, then by paragraph."""
    compaction: Literal["model", "extractive"] = "model"
    """Who writes the summary of history that left the window: the model (a job after
    the reply, extractive fold as fallback) or the extractive fold alone."""
    compaction_target: float = Field(default=0.75, gt=0.1, le=1.0)
    """A compaction folds history until the rest fits this share of the budget, so the
    next one is due only after that much new conversation."""
    compaction_poll_seconds: float = Field(default=5.0, gt=0)
    """How often pending compaction jobs (other processes', crashed ones) are looked for."""
    consolidate_after_idle: float = Field(default=0.0, ge=0)
    """Seconds a conversation must be idle before rem-agent consolidates its memory by
    itself (at most once per this period, only after new activity); 0: off."""
    consolidate_global_channels: list[str] = Field(default_factory=list)
    """Channels (``slack``, ``cli``...) whose conversations rem-agent may consolidate
    into the ``global`` scope too; elsewhere it writes only the conversation's own."""
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
