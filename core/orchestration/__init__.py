"""Orchestration on top of the delegation core: the /review, /research, /fleet,
/autopilot and /subconscious commands, fleet todos, session modes, and memory
consolidation by rem-agent.

Modules are imported from where they live (`core.orchestration.wiring` builds them).
"""

from __future__ import annotations

__all__: list[str] = []
