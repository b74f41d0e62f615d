"""ToolsConfig: the ``[tools]`` section (exec limits, tool policy, file read cap)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "DEFAULT_DENY_PATTERNS",
    "ExecConfig",
    "PolicyRule",
    "ToolPolicyConfig",
    "ToolsConfig",
]

DEFAULT_DENY_PATTERNS: dict[str, str] = {
    r"\brm\s+(?:-\S+\s+)*(?:/|/\*|~/?|\$HOME/?)(?=\s|[;&|)]|$)": "deletes / or the home directory",
    r"--no-preserve-root": "deletes /",
    r"\bmkfs(?:\.\w+)?\b": "formats a filesystem",
    r"\bdd\b[^;&|]*\bof=/dev/(?!null\b|zero\b|stdout\b|stderr\b)": "writes to a device",
    r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*": "writes to a block device",
    r"\b(?:wipefs|fdisk|sfdisk|parted)\b": "repartitions or wipes a disk",
    r"(?:^|[;&|(]\s*|\bsudo\s+)(?:shutdown|reboot|halt|poweroff)\b": "shuts the machine down",
    r"\bsystemctl\s+(?:poweroff|reboot|halt|kexec)\b": "shuts the machine down",
    r"\binit\s+[06]\b": "shuts the machine down",
    r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:": "is a fork bomb",
    r"\bch(?:mod|own)\s+(?:-\S+\s+)*\S+\s+(?:-\S+\s+)*/(?=\s|[;&|)]|$)": "changes / recursively",
}
"""Default ``exec.deny_patterns`` (regex -> the reason given to the model).

A speed bump against accidents, not a sandbox: run the daemon under systemd's sandboxing
(see ``systemd/``) for real confinement.
"""


class ExecConfig(BaseModel):
    """The ``[tools.exec]`` section: the ``exec`` shell tool.

    Attributes:
        enabled: offer the ``exec`` tool at all.
        timeout: seconds a command may run when the call does not ask for another limit.
        max_timeout: the largest timeout a call may ask for, in seconds.
        max_output: characters of combined stdout+stderr kept (head and tail, with a
            ``[... N chars truncated ...]`` marker between them).
        deny_patterns: regexes searched in the command line; a match refuses the command.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    timeout: float = Field(default=60.0, gt=0)
    max_timeout: float = Field(default=600.0, gt=0)
    max_output: int = Field(default=16_000, ge=100)
    deny_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY_PATTERNS))

    @field_validator("deny_patterns")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regex {pattern!r}: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _timeout_within_max(self) -> ExecConfig:
        if self.timeout > self.max_timeout:
            raise ValueError("timeout must not exceed max_timeout")
        return self


class PolicyRule(BaseModel):
    """Which tools are offered; names may be fnmatch patterns (``mcp_*``).

    Attributes:
        allow: tools allowed; ``None`` means every tool.
        deny: tools refused; deny wins over allow.
    """

    model_config = ConfigDict(extra="forbid")

    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class ToolPolicyConfig(PolicyRule):
    """The ``[tools.policy]`` section: the global rule plus narrower ones.

    A tool is allowed only if the global rule, the rule of the channel and the rule of
    the agent type all allow it: channel and agent rules can only narrow.

    Attributes:
        per_channel: rules by channel name (``cli``, ``slack``, ...).
        per_agent: rules by agent type (``main`` or a subagent type).
        subagent_deny: tools refused to every subagent (depth > 0). Empty by default:
            ``sessions_spawn`` stays available so subagents can spawn down to
            ``tools.subagents.max_depth``, which the spawn tool enforces itself.
        max_depth_tools: tool pattern -> deepest depth at which it is allowed
            (0 = the main agent only).
    """

    per_channel: dict[str, PolicyRule] = Field(default_factory=dict)
    per_agent: dict[str, PolicyRule] = Field(default_factory=dict)
    subagent_deny: list[str] = Field(default_factory=list)
    max_depth_tools: dict[str, int] = Field(default_factory=dict)


class ToolsConfig(BaseModel):
    """The ``[tools]`` section.

    Attributes:
        exec: the ``exec`` shell tool.
        policy: which tools are offered where.
        max_file_bytes: bytes ``read_file`` returns before truncating with a marker.
    """

    model_config = ConfigDict(extra="forbid")

    exec: ExecConfig = Field(default_factory=ExecConfig)
    policy: ToolPolicyConfig = Field(default_factory=ToolPolicyConfig)
    max_file_bytes: int = Field(default=256 * 1024, gt=0)
