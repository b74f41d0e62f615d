"""ToolPolicy: which tools a caller may use, by channel, agent type and depth.

A subagent is bound by its own channel and agent type and by those of its whole chain
(`core.tools.lineage`): the root session's channel rules and every ancestor's agent rules
hold at any depth, so delegating never widens what the root session could do.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from core.errors import PolicyDenied

from .config import PolicyRule, ToolPolicyConfig
from .lineage import Lineage

__all__ = ["ToolPolicy"]

_MAX_REMEMBERED = 10_000


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def _rule_denial(name: str, rule: PolicyRule, scope: str) -> str | None:
    if _matches(name, rule.deny):
        return f"denied by the {scope} policy"
    if rule.allow is not None and not _matches(name, rule.allow):
        return f"not in the {scope} allow list"
    return None


class ToolPolicy:
    """Decides which tools are offered and may run.

    Deny wins over allow; channel and agent-type rules narrow the global rule; at
    depth > 0 ``subagent_deny`` applies too, and ``max_depth_tools`` caps the depth at
    which a tool is allowed. With a ``lineage`` (a subagent), the rules of the root
    session's channel and of every ancestor's agent type apply as well.
    """

    def __init__(self, *, config: ToolPolicyConfig | None = None) -> None:
        """Build the policy.

        Args:
            config: the rules; ``None`` allows everything.
        """
        self._config = config or ToolPolicyConfig()
        self._allowed: dict[tuple[str, str, str, int, Lineage | None], bool] = {}
        """Answers of `allowed` (the rules never change; every turn asks the same)."""

    def denial(
        self,
        name: str,
        *,
        channel: str,
        agent_type: str,
        depth: int,
        lineage: Lineage | None = None,
    ) -> str | None:
        """Why ``name`` is refused for this caller, or ``None`` when it is allowed.

        Args:
            name: the tool name.
            channel: the channel of the session (``cli``, ``slack``...).
            agent_type: ``main`` or the subagent type.
            depth: 0 for the main agent, n for a subagent n levels down.
            lineage: a subagent's chain (root channel, ancestors' agent types).
        """
        cfg = self._config
        scoped: list[tuple[PolicyRule | None, str, str]] = [
            (cfg, "global", ""),
            (cfg.per_channel.get(channel), f"channel {channel!r}", ""),
            (cfg.per_agent.get(agent_type), f"agent {agent_type!r}", ""),
        ]
        if lineage is not None:
            root = lineage.root_channel
            if root != channel:
                note = f" (of {lineage.root_key}, which started this subagent)"
                scoped.append((cfg.per_channel.get(root), f"channel {root!r}", note))
            for above in dict.fromkeys(a.agent_type for a in lineage.ancestors):
                if above != agent_type:
                    note = " (an agent above this subagent)"
                    scoped.append((cfg.per_agent.get(above), f"agent {above!r}", note))
        for rule, scope, note in scoped:
            reason = None if rule is None else _rule_denial(name, rule, scope)
            if reason is not None:
                return reason + note
        if depth > 0 and _matches(name, cfg.subagent_deny):
            return "not available to subagents"
        for pattern, max_depth in cfg.max_depth_tools.items():
            if depth > max_depth and fnmatchcase(name, pattern):
                return f"only available up to depth {max_depth}"
        return None

    def allowed(
        self,
        name: str,
        *,
        channel: str,
        agent_type: str,
        depth: int,
        lineage: Lineage | None = None,
    ) -> bool:
        """Whether ``name`` may be offered to and run by this caller."""
        key = (name, channel, agent_type, depth, lineage)
        allowed = self._allowed.get(key)
        if allowed is None:
            if len(self._allowed) >= _MAX_REMEMBERED:
                self._allowed.clear()
            reason = self.denial(
                name, channel=channel, agent_type=agent_type, depth=depth, lineage=lineage
            )
            allowed = self._allowed[key] = reason is None
        return allowed

    def filter(
        self,
        names: Iterable[str],
        *,
        channel: str,
        agent_type: str,
        depth: int,
        lineage: Lineage | None = None,
    ) -> list[str]:
        """The allowed ``names``, in their order."""
        return [
            n
            for n in names
            if self.allowed(n, channel=channel, agent_type=agent_type, depth=depth, lineage=lineage)
        ]

    def check(
        self,
        name: str,
        *,
        channel: str,
        agent_type: str,
        depth: int,
        lineage: Lineage | None = None,
    ) -> None:
        """Raise if ``name`` is refused.

        Raises:
            PolicyDenied: naming the tool and the reason.
        """
        reason = self.denial(
            name, channel=channel, agent_type=agent_type, depth=depth, lineage=lineage
        )
        if reason is not None:
            raise PolicyDenied(f"tool {name!r} is not allowed here: {reason}")
