"""What the config models say about themselves: defaults, descriptions, TOML forms.

`familiar init`'s commented config.toml and the generated configuration reference both
read every default and description from here, so each is written once, beside the
setting it describes.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import re
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

__all__ = ["class_summary", "defaults", "field_docs", "toml_key", "toml_value"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ATTRIBUTE = re.compile(r"(\w+)(?:\s*\(.*?\))?:\s*(.*)")
_INLINE_MAX = 60


def defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Field name -> its default value (default factories called)."""
    return {
        name: field.get_default(call_default_factory=True)
        for name, field in model.model_fields.items()
    }


def class_summary(cls: type[BaseModel]) -> str:
    """The class's own docstring up to its ``Attributes:`` section (a plugin's config
    without a docstring must not show its base class's)."""
    return inspect.cleandoc(cls.__dict__.get("__doc__") or "").split("Attributes:", 1)[0].strip()


def toml_key(name: str) -> str:
    """``name`` as a TOML key (quoted unless bare)."""
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)


def toml_value(value: Any) -> str:
    """``value`` as TOML (lists that do not fit on a line get one item per line)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        text = str(value)
        if "'" not in text and not any(ord(c) < 32 or ord(c) == 127 for c in text):
            return f"'{text}'"
        return json.dumps(text, ensure_ascii=False)
    if isinstance(value, SecretStr):  # a default, not a user's secret (usually empty)
        return toml_value(value.get_secret_value())
    if isinstance(value, BaseModel):
        return toml_value(value.model_dump(mode="json", exclude_none=True))
    if isinstance(value, dict):
        items = ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, list | tuple | set | frozenset):
        parts = [toml_value(v) for v in value]
        inline = "[" + ", ".join(parts) + "]"
        if len(inline) <= _INLINE_MAX and "\n" not in inline:
            return inline
        return "[\n" + "".join(f"    {p},\n" for p in parts) + "]"
    raise TypeError(f"no TOML form for a default of type {type(value).__name__}")


def field_docs(cls: type[BaseModel]) -> dict[str, str]:
    """Descriptions of ``cls``'s fields: ``Attributes:`` docs, attribute docstrings,
    ``Field(description=...)``, later ones winning, base classes first."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        docs.update(_attributes_section(klass.__doc__ or ""))
        docs.update(_attribute_docstrings(klass))
    for name, field in cls.model_fields.items():
        if field.description:
            docs[name] = field.description
    return docs


def _attributes_section(docstring: str) -> dict[str, str]:
    docs: dict[str, str] = {}
    lines = inspect.cleandoc(docstring).splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return docs
    current: str | None = None
    for line in lines[start + 1 :]:
        if not line.strip():
            current = None
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            break
        match = _ATTRIBUTE.fullmatch(line.strip())
        if indent <= 4 and match:
            current = match.group(1)
            docs[current] = match.group(2)
        elif current is not None:
            docs[current] += " " + line.strip()
    return docs


def _attribute_docstrings(klass: type) -> dict[str, str]:
    """``x: int = 1`` followed by a string literal: that literal documents ``x``."""
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):
        return {}
    tree = ast.parse(source)
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs
