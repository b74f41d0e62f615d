"""Lineage: the chain of sessions above a subagent, down from the one that started it.

A subagent's turns run in a ``subagent:<id>`` session on the ``subagent`` channel; what
its tools may do must still follow the session a person (or a webhook caller) talks to.
The lineage names that root session and its channel, and every agent between it and
the subagent, so the tool policy and the sandbox can ask about the whole chain.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LOCAL_CLI_CHANNEL", "Ancestor", "Lineage"]

LOCAL_CLI_CHANNEL = "cli"
"""The channel of ``familiar chat`` / ``familiar send``: the operator on this host."""


@dataclass(frozen=True, slots=True)
class Ancestor:
    """One agent above a subagent: its agent type and its own tool list.

    Attributes:
        agent_type: ``main`` for the root session's agent, else the subagent type.
        tools: its tool list (names or fnmatch patterns); None: every tool.
    """

    agent_type: str
    tools: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a subagent's chain of delegation started, and who is in it.

    Attributes:
        root_key: the session key of the session that started the chain.
        root_channel: that session's channel (``cli``, ``slack``, ``webhook``...).
        ancestors: every agent above the subagent, the root's agent first and its
            direct parent last.
    """

    root_key: str
    root_channel: str
    ancestors: tuple[Ancestor, ...] = ()

    @property
    def root_is_local_cli(self) -> bool:
        """Whether the chain was started by the operator on this host: a ``cli:`` session
        on the CLI channel (not a heartbeat pointed at one, nor an unknown subagent)."""
        return self.root_channel == LOCAL_CLI_CHANNEL and self.root_key.startswith(
            LOCAL_CLI_CHANNEL + ":"
        )
