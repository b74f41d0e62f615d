"""A core with a real OpenAI-compatible fake whose answers are scripted per session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from core.app import CoreApp
from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.tasks.records import TaskRecord
from core.tools.config import ToolsConfig
from tests.fakes.fake_openai import FakeOpenAI, Responder
from tests.integration.harness import Replies, running_core

__all__ = ["last_text", "last_user", "loads", "only_task", "rig", "spawn_call", "tool_results"]


def last_user(messages: list[dict[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""


def last_text(messages: list[dict[str, Any]]) -> str | None:
    """The last message's content if it is a tool result, else None."""
    last = messages[-1] if messages else {}
    return str(last.get("content") or "") if last.get("role") == "tool" else None


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The tool results after the last assistant message, in order."""
    found: list[str] = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        found.append(str(m.get("content") or ""))
    return list(reversed(found))


def spawn_call(prompt: str, **args: Any) -> tuple[str, dict[str, Any]]:
    return ("sessions_spawn", {"agent_type": "general-purpose", "prompt": prompt, **args})


@asynccontextmanager
async def rig(
    tmp_path: Path,
    store_url: str,
    responder: Responder,
    *,
    tools: ToolsConfig | None = None,
    **core: Any,
) -> AsyncIterator[tuple[CoreApp, Replies, FakeOpenAI]]:
    async with FakeOpenAI(responder=responder) as fake:
        provider = OpenAIProvider(
            config=ProviderConfig(kind="openai", base_url=fake.base_url, model="fake")
        )
        async with running_core(
            store_url=store_url,
            workspace=tmp_path / "ws",
            provider=provider,
            tools=tools,
            **core,
        ) as (app, replies):
            yield app, replies, fake


async def only_task(app: CoreApp, owner: str) -> TaskRecord:
    (task,) = await app.tasks.repo.list(owner_key=owner)
    return task


def loads(text: str) -> Any:
    return json.loads(text)
