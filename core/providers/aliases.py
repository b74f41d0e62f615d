"""ModelAliases: the ``[models]`` table, names people write for models -> provider model ids.

Agent files name models the way their tools do: Claude Code's ``sonnet``, ``opus``,
``haiku``; Copilot and VS Code's display names (``Claude Sonnet 4.5``, ``GPT-5.4
(copilot)``). A provider answers 400/404 to those, so each is looked up here
(case-insensitively, spacing ignored) and replaced by the id the table gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import RootModel, field_validator

__all__ = ["ModelAliases", "ModelChoice"]

INHERIT = "inherit"
_CLAUDE_ALIASES = frozenset({"sonnet", "opus", "haiku", "default", "opusplan", "best"})
"""Claude Code's model aliases: names of a model family, never an API id."""
_DISPLAY = re.compile(r"[\s()\[\]]")
"""A display name has spaces or brackets; no provider's model id does."""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What a requested model name became.

    Attributes:
        model: the provider model id to send; None: the parent's model.
        warning: set when the name was not understood (and the parent's model is used).
    """

    model: str | None
    warning: str | None = None


def _key(name: str) -> str:
    return " ".join(name.lower().split())


class ModelAliases(RootModel[dict[str, str]]):
    """The ``[models]`` table: ``alias = "provider model id"``.

    Keys may be short aliases (``sonnet = "claude-sonnet-4-5"``) or display names
    (``"Claude Sonnet 4.6" = "claude-sonnet-4-6"``); they match case-insensitively.
    """

    root: dict[str, str] = {}

    @field_validator("root")
    @classmethod
    def _check(cls, table: dict[str, str]) -> dict[str, str]:
        seen: dict[str, str] = {}
        for alias, model in table.items():
            if not _key(alias):
                raise ValueError("an alias must not be empty")
            if not model.strip() or _DISPLAY.search(model.strip()):
                raise ValueError(
                    f"models.{alias}: {model!r} is not a model id (no spaces or brackets)"
                )
            if _key(alias) in seen:
                raise ValueError(
                    f"models: {alias!r} and {seen[_key(alias)]!r} are the same alias "
                    "(aliases match case-insensitively)"
                )
            seen[_key(alias)] = alias
        return {alias: model.strip() for alias, model in table.items()}

    def resolve(self, name: str | None) -> ModelChoice:
        """The provider model id for ``name`` (an alias, a display name or an id).

        ``None``, empty and ``inherit`` mean the parent's model. A name in the table
        becomes its id. A bare Claude alias (``sonnet``) or a display name (with spaces
        or brackets) that is not in the table cannot be sent to a provider: the parent's
        model is used, with a warning. Anything else is taken to be a model id as it is.
        """
        if name is None or not name.strip() or _key(name) == INHERIT:
            return ModelChoice(None)
        wanted = _key(name)
        for alias, model in self.root.items():
            if _key(alias) == wanted:
                return ModelChoice(model)
        for model in self.root.values():
            if model.lower() == wanted:
                return ModelChoice(model)  # an id the table gives, spelt in other case
        text = name.strip()
        if wanted in _CLAUDE_ALIASES or _DISPLAY.search(text):
            return ModelChoice(
                None,
                f"model {text!r} is an alias or display name that the [models] table does not "
                f"list; the parent's model is used (add e.g. {_example(text)} under [models])",
            )
        return ModelChoice(text)


def _example(name: str) -> str:
    key = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else f'"{name}"'
    return f'{key} = "<provider model id>"'
