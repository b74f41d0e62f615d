"""ToolsConfig: the ``[tools]`` section (exec limits and approvals, tool policy, file cap)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .danger import DEFAULT_DANGER_PATTERNS
from .subagents_config import SubagentsConfig

__all__ = [
    "DEFAULT_DANGER_PATTERNS",
    "ApprovalMode",
    "ExecConfig",
    "PolicyRule",
    "ToolPolicyConfig",
    "ToolsConfig",
]

ApprovalMode = Literal["never", "dangerous", "always"]
"""Which ``exec`` commands wait for the user's ``/approve``."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ExecConfig(BaseModel):
    """The ``[tools.exec]`` section: the ``exec`` shell tool.

    Attributes:
        enabled: offer the ``exec`` tool at all.
        timeout: seconds a command may run when the call does not ask for another limit.
        max_timeout: the largest timeout a call may ask for, in seconds.
        max_output: characters of combined stdout+stderr kept (head and tail, with a
            ``[... N chars truncated ...]`` marker between them).
        deny_patterns: regexes searched in the normalised command line (see
            ``core.tools.danger``); a match refuses the command outright, no approval
            asked. Empty by default.
        danger_patterns: regexes searched the same way, and in each simple command as
            the shell would run it (``core.tools.shell_checks``); a match needs the user's
            approval (``approval = "dangerous"``) or is logged (``"never"``). The
            defaults catch deleting / or home, piping into a shell, eval/sh -c of
            dynamic text, writes to /etc and /boot, disk formatting, fork bombs and
            shutdowns.
        approval: ``dangerous`` (default): commands matching a danger pattern wait for
            ``/approve <id>``; ``always``: every command does; ``never``: nothing waits
            (danger matches are only logged).
        approval_timeout: seconds an approval stays open; unanswered, it is denied.
        sandbox: where commands run. ``auto``: under the units ``familiar service
            install`` writes, in the exec unit beside the daemon's (``systemd``);
            elsewhere in bubblewrap when ``bwrap ... true`` works (probed once), else on
            the host with a logged warning, and then only for conversations started in
            the local CLI (others are refused); ``bwrap``: always in bubblewrap, every
            command fails when it does not work (as under the units); ``systemd``:
            always in the exec unit, every command fails outside the units; ``none``:
            on the host, for every channel. Either way the environment is the
            allow-list below.
        network: commands may use the network (``false`` gives the bubblewrap sandbox
            its own network namespace with only a loopback, and the exec unit
            ``PrivateNetwork=yes``; no effect without a sandbox).
        env_passthrough: names of the daemon's environment variables handed to
            commands, beside ``PATH``, ``LANG``, ``TERM`` (and ``HOME`` = the
            workspace). ``FAMILIAR_*`` names are refused: they hold the daemon's secrets.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    timeout: float = Field(default=60.0, gt=0)
    max_timeout: float = Field(default=600.0, gt=0)
    max_output: int = Field(default=16_000, ge=100)
    deny_patterns: list[str] = Field(default_factory=list)
    danger_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_DANGER_PATTERNS))
    approval: ApprovalMode = "dangerous"
    approval_timeout: float = Field(default=3600.0, gt=0)
    sandbox: Literal["auto", "bwrap", "systemd", "none"] = "auto"
    network: bool = True
    env_passthrough: list[str] = Field(default_factory=list)

    @field_validator("env_passthrough")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name.upper().startswith("FAMILIAR_"):
                raise ValueError(f"{name!r}: FAMILIAR_* variables are never passed to commands")
        return value

    @field_validator("deny_patterns", "danger_patterns")
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
        subagents: ``sessions_spawn`` and friends (``[tools.subagents]``).
        parallel_tools: tools (names or fnmatch patterns) whose calls in one model
            response run at the same time; other calls run alone, in order. Results
            always go back to the model in the calls' order.
    """

    model_config = ConfigDict(extra="forbid")

    exec: ExecConfig = Field(default_factory=ExecConfig)
    policy: ToolPolicyConfig = Field(default_factory=ToolPolicyConfig)
    max_file_bytes: int = Field(default=256 * 1024, gt=0)
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    parallel_tools: list[str] = Field(
        default_factory=lambda: [
            "sessions_spawn",
            "subagents",
            "agents_list",
            "read_file",
            "list_dir",
            "resolve_path",
            "recall",
        ]
    )
