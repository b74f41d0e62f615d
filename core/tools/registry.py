"""ToolRegistry: the tools by name, their specs, and safe execution of tool calls."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Protocol

from pydantic import ValidationError

from core.errors import ConfigError, PolicyDenied, ToolError, ToolRetry, TurnCancelled
from core.providers.base import ToolCall, ToolSpec

from .base import Tool, ToolContext
from .decorator import validation_message
from .lineage import Lineage
from .policy import ToolPolicy

__all__ = ["ToolExecutor", "ToolRegistry", "ToolResult"]

logger = logging.getLogger(__name__)

_MAX_CALLERS = 1024
_Caller = tuple[str, str, int, tuple[str, ...] | None, Lineage | None, ToolPolicy | None]
"""What `ToolRegistry.specs` answers depend on: channel, agent type, depth, the agent's
own tool list, its lineage, and the policy."""


def _tool_lists(ctx: ToolContext) -> list[tuple[str, tuple[str, ...]]]:
    """The tool lists that bind this caller: its own, then every ancestor's (a subagent
    never gets a tool an agent above it was not given), as ``(whose, patterns)``."""
    found = []
    if ctx.tool_allow is not None:
        found.append((f"agent {ctx.agent_type!r}'s tools", ctx.tool_allow))
    for above in ctx.ancestors:
        if above.tools is not None:
            found.append((f"the tools of agent {above.agent_type!r} above it", above.tools))
    return found


def _listed(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """The outcome of one tool call, as given back to the model."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


class ToolExecutor(Protocol):
    """Runs one tool call: a `ToolRegistry`, or a wrapper around one (hooks)."""

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult: ...

    def parallel_safe(self, name: str) -> bool:
        """Whether calls of ``name`` may run concurrently with other parallel-safe calls."""
        ...


class ToolRegistry:
    """The tools available to an agent, looked up by name and run safely."""

    def __init__(
        self,
        *,
        tools: Iterable[Tool] = (),
        policy: ToolPolicy | None = None,
        parallel: Iterable[str] = (),
    ) -> None:
        """Create a registry.

        Args:
            tools: tools to register now.
            policy: checked before every call; ``None`` allows every registered tool.
            parallel: names or fnmatch patterns of tools that may run at the same time
                as other such calls of one model response (``tools.parallel_tools``).
        """
        self._tools: dict[str, Tool] = {}
        # One spec per tool, made once (at first use): providers cache a spec's JSON by
        # its identity.
        self._specs: dict[str, ToolSpec] = {}
        self._offered: dict[_Caller, list[ToolSpec]] = {}
        """`specs` answers for a caller (every turn asks the same); cleared on a change."""
        self.policy = policy
        self._parallel = tuple(parallel)
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> None:
        """Add ``tool``.

        Raises:
            ConfigError: a tool with the same name is already registered.
        """
        if tool.name in self._tools:
            raise ConfigError(f"duplicate tool name {tool.name!r}", key="tools")
        self._tools[tool.name] = tool
        self._offered.clear()

    def unregister(self, name: str) -> None:
        """Remove the tool called ``name`` if there is one."""
        self._tools.pop(name, None)
        self._specs.pop(name, None)
        self._offered.clear()

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """The registered tool names, sorted."""
        return sorted(self._tools)

    def parallel_safe(self, name: str) -> bool:
        """Whether calls of ``name`` may run concurrently with other parallel-safe calls."""
        return any(fnmatchcase(name, p) for p in self._parallel)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def specs(
        self, names: Iterable[str] | None = None, *, ctx: ToolContext | None = None
    ) -> list[ToolSpec]:
        """The specs offered to the model, sorted by name.

        Args:
            names: only tools matching one of these names or fnmatch patterns.
            ctx: when given and there is a policy, only tools it allows for this caller.
        """
        if names is None and ctx is not None:
            caller = (
                ctx.channel,
                ctx.agent_type,
                ctx.depth,
                ctx.tool_allow,
                ctx.lineage,
                self.policy,
            )
            offered = self._offered.get(caller)
            if offered is None:
                if len(self._offered) >= _MAX_CALLERS:
                    self._offered.clear()
                offered = self._offered[caller] = self._select(None, ctx)
            return list(offered)
        return self._select(names, ctx)

    def _select(self, names: Iterable[str] | None, ctx: ToolContext | None) -> list[ToolSpec]:
        selected = self.names()
        if names is not None:
            patterns = list(names)
            selected = [n for n in selected if any(fnmatchcase(n, p) for p in patterns)]
        if ctx is not None and self.policy is not None:
            selected = self.policy.filter(
                selected,
                channel=ctx.channel,
                agent_type=ctx.agent_type,
                depth=ctx.depth,
                lineage=ctx.lineage,
            )
        if ctx is not None:
            for _whose, allow in _tool_lists(ctx):
                selected = [n for n in selected if _listed(n, allow)]
        return [self._spec(n) for n in selected]

    def _spec(self, name: str) -> ToolSpec:
        """``name``'s spec, made at its first use (only agents offer tools to a model)."""
        spec = self._specs.get(name)
        if spec is None:
            tool = self._tools[name]
            spec = ToolSpec(name=name, description=tool.description, parameters=tool.parameters)
            self._specs[name] = spec
        return spec

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run ``call`` and turn every tool problem into an error result.

        Unknown tools, policy refusals, invalid arguments, ``ToolRetry``/``ToolFailed``
        and unexpected exceptions (logged with a traceback) all come back as
        ``is_error`` results the model can react to.

        Raises:
            asyncio.CancelledError: the call was cancelled (propagated, never swallowed).
            TurnCancelled: the user stopped the turn.
        """
        tool = self._tools.get(call.name)
        if tool is None:
            offered = ", ".join(s.name for s in self.specs(ctx=ctx)) or "none"
            return self._error(call, f"unknown tool {call.name!r}; available tools: {offered}")
        try:
            if self.policy is not None:
                self.policy.check(
                    call.name,
                    channel=ctx.channel,
                    agent_type=ctx.agent_type,
                    depth=ctx.depth,
                    lineage=ctx.lineage,
                )
            for whose, allow in [*_tool_lists(ctx), *ctx.restrictions.lists()]:
                if not _listed(call.name, allow):
                    raise PolicyDenied(f"tool {call.name!r} is not allowed here: not among {whose}")
            content = await tool.run(ctx, call.arguments)
        except TurnCancelled:
            raise
        except PolicyDenied as exc:
            return self._error(call, f"denied: {exc}")
        except ToolRetry as exc:
            return self._error(call, f"{exc}\n(fix the arguments and call {call.name} again)")
        except ToolError as exc:
            return self._error(call, f"{exc}")
        except ValidationError as exc:
            return self._error(call, validation_message(call.name, exc))
        except Exception as exc:
            logger.exception("tool %s crashed (call %s)", call.name, call.id)
            return self._error(call, f"tool {call.name} crashed: {type(exc).__name__}: {exc}")
        return ToolResult(call_id=call.id, name=call.name, content=content)

    @staticmethod
    def _error(call: ToolCall, message: str) -> ToolResult:
        return ToolResult(
            call_id=call.id, name=call.name, content=f"error: {message}", is_error=True
        )
