"""A bare core runtime process for crash tests: ``python -m ... STORE_URL WS BASE_URL``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from core.agent.config import AgentConfig
from core.app import build_core
from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tools.config import ToolsConfig


async def main(store_url: str, workspace: str, base_url: str) -> None:
    provider = OpenAIProvider(config=ProviderConfig(kind="openai", base_url=base_url, model="fake"))
    app = await build_core(
        store_url=store_url,
        workspace=Path(workspace),
        agent=AgentConfig(lease_seconds=300),
        tools=ToolsConfig(),
        provider=provider,
    )
    await app.start()
    print("READY", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
