"""Configuration of group mode (``[group]``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["MEMBER_NAME", "SHAREABLE", "GroupConfig", "Shareable", "member_name_problem"]

Shareable = Literal["tools", "agents", "skills", "channels"]
SHAREABLE: tuple[Shareable, ...] = ("tools", "agents", "skills", "channels")
MEMBER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
"""A member's name: it appears in ``peer:<name>`` and in session keys, so no ``:``."""


def member_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a member's name (None when it can)."""
    if MEMBER_NAME.fullmatch(name):
        return None
    return (
        f"{name!r} is not a group member name: lowercase letters, digits, - and _, "
        "starting with a letter or digit, at most 63 characters"
    )


class GroupConfig(BaseModel):
    """Group mode: assistants on one shared PostgreSQL database announce themselves in a
    roster and a timeline (schema ``familiar_group``) and can delegate to each other.

    Each assistant needs its own ``store.schema``; with SQLite, ``enabled = true`` is
    an error (a group needs a store that several gateways share).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    """Join the group: announce this assistant, keep its roster entry fresh."""
    name: str | None = None
    """This assistant's name in the group (default ``agent.name``, which must then be a
    valid name): lowercase letters, digits, ``-`` and ``_``."""
    description: str = Field(default="", max_length=500)
    """One line for the other members (shown in their roster and ``agents_list``)."""
    heartbeat: float = Field(default=30.0, ge=0.1, le=3600.0)
    """Seconds between two roster refreshes of this assistant."""
    expire_after: float = Field(default=120.0, gt=0, le=86_400.0)
    """Seconds without a heartbeat before a member is shown as gone."""
    accept_from: list[str] = Field(default_factory=list)
    """Names of the members whose delegated tasks this assistant runs (empty: none)."""
    share: list[Shareable] = Field(default_factory=lambda: list(SHAREABLE))
    """Which capabilities to announce: ``tools``, ``agents``, ``skills``, ``channels``."""
    max_running_per_caller: int = Field(default=4, ge=1, le=1000)
    """The most delegated tasks of one caller this assistant runs at once; the caller's
    other tasks wait queued (other callers' are taken meanwhile), so one busy member
    cannot fill this assistant's workers."""
    retention_days: float = Field(default=30.0, gt=0, le=3650.0)
    """Days the group timeline keeps its entries, and the roster a member that left or
    went silent (older ones are deleted by the members' heartbeats)."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str | None) -> str | None:
        if value is not None and (problem := member_name_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("accept_from")
    @classmethod
    def _valid_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if (problem := member_name_problem(name)) is not None:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _expire_after_heartbeat(self) -> GroupConfig:
        if self.expire_after <= self.heartbeat:
            raise ValueError(
                f"expire_after ({self.expire_after:g} s) must be longer than heartbeat "
                f"({self.heartbeat:g} s): every member would be shown as gone"
            )
        return self

    def member_name(self, agent_name: str) -> str:
        """This assistant's name in the group: ``name``, else ``agent_name``."""
        return self.name if self.name is not None else agent_name
