"""Lifecycle hooks: command hooks from Copilot CLI and Claude Code files, run around turns.

See conventions.md §2 for both file formats; `Hooks` loads and fires them, `TurnHooks`
and `HookedTools` are where an agent turn calls them.
"""

from __future__ import annotations

from .config import HooksConfig
from .dialects import Facts
from .loader import HookFileProblem, HookSet, HookSource, default_sources, load_hooks
from .names import HookEvent
from .points import HookedTools, TurnHooks, session_end_on_new
from .service import HookOutcome, Hooks, facts_of

__all__ = [
    "Facts",
    "HookEvent",
    "HookFileProblem",
    "HookOutcome",
    "HookSet",
    "HookSource",
    "HookedTools",
    "Hooks",
    "HooksConfig",
    "TurnHooks",
    "default_sources",
    "facts_of",
    "load_hooks",
    "session_end_on_new",
]
