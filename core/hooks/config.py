"""HooksConfig: the ``[hooks]`` section (lifecycle hooks in Copilot CLI / Claude Code files)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["HooksConfig"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class HooksConfig(BaseModel):
    """The ``[hooks]`` section.

    Hook files are the operator's own (``<workspace>/.github/hooks/*.json``,
    ``$FAMILIAR_HOME/hooks/*.json``, ``<workspace>/.claude/settings.json`` and
    ``settings.local.json``); this section only says how they run.

    Attributes:
        enabled: run hooks at all (false: the files are not even read).
        max_consecutive_blocks: ``agentStop`` blocks in a row (each one another turn)
            before the stop stands.
        default_timeout: seconds a hook may run when its entry sets no ``timeoutSec`` /
            ``timeout``; on expiry its whole process group is killed.
        max_output: bytes of stdout (and of stderr) read from one hook; a hook writing
            more is killed and counts as failed.
        max_context_chars: characters of ``additionalContext`` (or a block reason) kept
            from one hook; longer text is cut with a marker.
        env_passthrough: variables copied from the daemon's environment into the hooks'
            (besides ``PATH``, ``LANG``, ``TERM``); ``FAMILIAR_*`` names are refused.
        reload_interval: seconds between checks whether hook files changed.
        transcript_max_events: events of a session (newest first) rendered into the
            transcript a hook's ``transcript_path`` points to.
        transcript_max_bytes: the most a transcript file holds (its oldest lines go).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_consecutive_blocks: int = Field(default=8, ge=0, le=1000)
    default_timeout: float = Field(default=30.0, gt=0, le=3600)
    max_output: int = Field(default=1_048_576, ge=1024, le=10 * 1_048_576)
    max_context_chars: int = Field(default=10_000, ge=100, le=1_000_000)
    env_passthrough: list[str] = Field(default_factory=list)
    reload_interval: float = Field(default=1.0, ge=0, le=3600)
    transcript_max_events: int = Field(default=2000, ge=10, le=100_000)
    transcript_max_bytes: int = Field(default=4 * 1_048_576, ge=65536, le=256 * 1_048_576)

    @field_validator("env_passthrough")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        bad = [n for n in names if not _ENV_NAME.fullmatch(n)]
        if bad:
            raise ValueError(f"not environment variable names: {', '.join(bad)}")
        secret = [n for n in names if n.upper().startswith("FAMILIAR_")]
        if secret:
            raise ValueError(f"FAMILIAR_* variables hold the daemon's secrets: {', '.join(secret)}")
        return names
