"""The model a new subagent's turns use: asked for, its agent's, else its parent's."""

from __future__ import annotations

import logging

from core.providers.aliases import ModelAliases
from core.tasks.profiles import SUBAGENT_PREFIX
from core.tasks.repository import TaskRepository
from core.tasks.spec import AgentSpec

__all__ = ["spawn_model"]

log = logging.getLogger(__name__)


async def spawn_model(
    asked: str | None,
    spec: AgentSpec,
    *,
    owner_key: str,
    aliases: ModelAliases,
    repo: TaskRepository,
) -> str | None:
    """The provider model id for a child of ``owner_key`` of type ``spec``.

    ``asked`` (``sessions_spawn``'s ``model``) goes through ``[models]``; else the
    agent file's model (resolved when the file was read); else the parent's: a
    subagent parent's recorded model, or None (the provider's model) for a session.
    A name ``[models]`` does not know is logged and the parent's model used.
    """
    model = spec.model
    if asked is not None and asked.strip():
        choice = aliases.resolve(asked)
        if choice.warning:
            log.warning("sessions_spawn agent=%s: %s", spec.name, choice.warning)
        model = choice.model
    if model is None and owner_key.startswith(SUBAGENT_PREFIX):
        parent = await repo.by_child_key(owner_key)
        model = parent.model if parent is not None else None
    return model
