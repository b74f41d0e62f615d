"""Secrets masked wherever config is shown: logs, ``config show``, ``/v1/config``, doctor.

One rule for all of them: ``SecretStr`` fields are masked, credentials inside URLs
are masked (a password in the user info; query values such as ``api-key=``, ``key=``,
``token=``, ``sig=``), and values of keys no model declares (the table of a channel
that is not installed) are masked, since nothing says which of them are secrets.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretBytes, SecretStr
from pydantic_core import to_jsonable_python

from gateway.config import FamiliarConfig

__all__ = ["MASK", "mask_url", "masked", "masked_config"]

MASK = "**********"
_SECRET_PARAM = re.compile(r"(?i)key|token|sig|secret|pass|auth|credential")


def mask_url(url: str) -> str:
    """``url`` with its password and credential-like query values replaced by ``MASK``.

    The user name, host, path and other query parameters are kept as they are, so
    the URL still says where it points.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    masked_url = url
    user, at, host = parts.netloc.rpartition("@")
    if at and ":" in user:
        name = user.split(":", 1)[0]
        masked_url = masked_url.replace(parts.netloc, f"{name}:{MASK}@{host}", 1)
    if parts.query:
        query = "&".join(_mask_param(param) for param in parts.query.split("&"))
        masked_url = masked_url.replace(f"?{parts.query}", f"?{query}", 1)
    return masked_url


def _mask_param(param: str) -> str:
    name, eq, value = param.partition("=")
    return f"{name}={MASK}" if eq and value and _SECRET_PARAM.search(name) else param


def masked(value: Any) -> Any:
    """A JSON-able copy of ``value`` (a config model, or part of one), secrets masked."""
    if isinstance(value, SecretStr | SecretBytes):
        return MASK
    if isinstance(value, BaseModel):
        fields = {
            field.alias or name: masked(getattr(value, name))
            for name, field in type(value).model_fields.items()
        }
        keep = masked if _typed_extra(type(value)) else _undeclared
        extra = {str(k): keep(v) for k, v in (value.model_extra or {}).items()}
        return fields | extra
    if isinstance(value, Mapping):
        return {str(k): masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [masked(v) for v in value]
    if isinstance(value, str):
        return mask_url(value) if "://" in value else value
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return to_jsonable_python(value)


def _typed_extra(cls: type[BaseModel]) -> bool:
    """Whether the model declares what its extra keys hold (``[models]``: model ids):
    then they are shown like declared fields."""
    return any("__pydantic_extra__" in inspect.get_annotations(k) for k in cls.__mro__)


def _undeclared(value: Any) -> Any:
    """A value under a key no model declares: every string in it may be a secret."""
    if isinstance(value, BaseModel):
        return masked(value)
    if isinstance(value, Mapping):
        return {str(k): _undeclared(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_undeclared(v) for v in value]
    if isinstance(value, str) and value:
        return MASK
    return masked(value)


def masked_config(
    config: FamiliarConfig, *, store_url: str | None = None, workspace: Path | None = None
) -> dict[str, Any]:
    """The effective config as JSON with every secret replaced by ``MASK``.

    Args:
        config: the loaded config.
        store_url: the store URL in use, when it is not the configured one (default).
        workspace: the workspace in use, when it is not the configured one (default).
    """
    data: dict[str, Any] = masked(config)
    if workspace is not None:
        data["workspace"] = str(workspace)
    if store_url is not None:
        data["store"]["url"] = mask_url(store_url)
    return data
