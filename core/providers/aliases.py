"""ModelAliases: the ``[models]`` table, names people write for models -> provider model ids.

Agent files name models the way their tools do: Claude Code's ``sonnet``, ``opus``,
``haiku``; Copilot and VS Code's display names (``Claude Sonnet 4.5``, ``GPT-5.4
(copilot)``). A provider answers 400/404 to those, so each is looked up here
(case-insensitively, spacing ignored) and replaced by the id the table gives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

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


class ModelAliases(BaseModel):
    """The ``[models]`` table: ``alias = "provider model id"``, one line per name.

    Keys may be short aliases (``sonnet = "claude-sonnet-4-5"``) or display names
    (``"Claude Sonnet 4.6" = "claude-sonnet-4-6"``); they match case-insensitively.
    """

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, str] = Field(init=False)

    @classmethod
    def of(cls, table: Mapping[str, str]) -> ModelAliases:
        """The table of ``table`` (checked as the config file's would be)."""
        return cls.model_validate(dict(table))

    @property
    def table(self) -> dict[str, str]:
        """Alias -> provider model id."""
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _check(self) -> ModelAliases:
        seen: dict[str, str] = {}
        for alias, model in self.table.items():
            if not _key(alias):
                raise ValueError("an alias must not be empty")
            if not model.strip() or _DISPLAY.search(model.strip()):
                raise ValueError(f"{alias}: {model!r} is not a model id (no spaces or brackets)")
            if _key(alias) in seen:
                raise ValueError(
                    f"{alias!r} and {seen[_key(alias)]!r} are the same alias "
                    "(aliases match case-insensitively)"
                )
            seen[_key(alias)] = alias
        return self

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
        table = self.table
        for alias, model in table.items():
            if _key(alias) == wanted:
                return ModelChoice(model.strip())
        for model in table.values():
            if model.strip().lower() == wanted:
                return ModelChoice(model.strip())  # an id the table gives, spelt in other case
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
