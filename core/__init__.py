"""The core: agent, bus, store, tools, providers; it imports nothing of channels or gateway."""

import sys

# httpx imports its command-line client (httpx._main) whenever rich, click and pygments are
# installed, as they are here for familiar's CLI: ~80 modules and ~4 MiB in every process,
# each role included. familiar never runs that client; with the module marked absent,
# ``import httpx`` falls back to its stub ``httpx.main``.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
