"""A server's requested fields shown to the person, and their typed answer read back.

Elicitation schemas are flat objects of primitive fields (string, number, integer,
boolean, and enums of them or arrays of enum strings). One field is answered with the
bare value; several with ``name=value`` words (quoted where they hold spaces). A choice
may be given by its value, its title or its number in the list. The result is checked
against the schema (``jsonschema``) before it goes back.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

__all__ = ["choices", "parse_answer", "render_fields"]

_TRUE = ("true", "yes", "y", "1", "on")
_FALSE = ("false", "no", "n", "0", "off")


def choices(field: dict[str, Any]) -> list[tuple[Any, str]]:
    """A field's choices as ``(value, title)``: ``enum`` (with ``enumNames``), or
    ``oneOf``/``anyOf`` of ``const``; for an array, those of its ``items``."""
    if field.get("type") == "array" and isinstance(field.get("items"), dict):
        return choices(field["items"])
    if isinstance(field.get("enum"), list):
        names = field.get("enumNames") or []
        return [
            (value, str(names[i]) if i < len(names) else str(value))
            for i, value in enumerate(field["enum"])
        ]
    options = field.get("oneOf") or field.get("anyOf") or []
    return [
        (o["const"], str(o.get("title") or o["const"]))
        for o in options
        if isinstance(o, dict) and "const" in o
    ]


def render_fields(schema: dict[str, Any]) -> str:
    """The fields of ``schema``, one per line, with type, whether required, choices."""
    required = set(schema.get("required") or [])
    lines = []
    for name, field in (schema.get("properties") or {}).items():
        title = field.get("title")
        kind = field.get("type", "string")
        what = f"{name}" + (f" ({title})" if title and title != name else "")
        flags = ", ".join([kind, *(["required"] if name in required else [])])
        line = f"- {what} [{flags}]"
        if description := field.get("description"):
            line += f": {description}"
        listed = choices(field)
        if listed:
            line += "\n" + "\n".join(
                f"    {i}. {value}" + (f" — {t}" if t != str(value) else "")
                for i, (value, t) in enumerate(listed, 1)
            )
        lines.append(line)
    return "\n".join(lines) or "(no fields: answer with /answer <id> to accept)"


def _coerce(name: str, field: dict[str, Any], text: str) -> Any:
    listed = choices(field)
    kind = field.get("type", "string")
    if kind == "array":
        return [_choice(name, listed, part.strip()) for part in text.split(",") if part.strip()]
    if listed:
        return _choice(name, listed, text)
    if kind == "boolean":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"{name}: say yes or no, not {text!r}")
    if kind in ("number", "integer"):
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{name}: {text!r} is not a number") from None
        if kind == "integer":
            if not number.is_integer():
                raise ValueError(f"{name}: {text!r} is not a whole number")
            return int(number)
        return number
    return text


def _choice(name: str, listed: list[tuple[Any, str]], text: str) -> Any:
    for value, title in listed:
        if text == str(value) or text.lower() == title.lower():
            return value
    if text.isdigit() and 1 <= int(text) <= len(listed):
        return listed[int(text) - 1][0]
    shown = ", ".join(str(v) for v, _ in listed)
    raise ValueError(f"{name}: {text!r} is not one of the choices ({shown})")


def parse_answer(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """The content of an answer ``text`` to ``schema``, checked against it.

    Raises:
        ValueError: the answer does not fit (names the field and why).
    """
    properties: dict[str, Any] = schema.get("properties") or {}
    content: dict[str, Any] = {}
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot read the answer: {exc}") from None
    pairs = [w.partition("=") for w in words]
    if len(properties) == 1 and not (pairs and all(p[1] and p[0] in properties for p in pairs)):
        ((name, field),) = properties.items()
        if text:
            content[name] = _coerce(name, field, text)
    else:
        for key, equals, value in pairs:
            if not equals or key not in properties:
                names = ", ".join(properties) or "none"
                raise ValueError(f"say name=value for each field (fields: {names})")
            content[key] = _coerce(key, properties[key], value)
    # jsonschema costs a quarter second to import: only when someone answers.
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError, UnknownType  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable

    try:
        Draft202012Validator.check_schema(schema)
        found = list(Draft202012Validator(schema).iter_errors(content))
    except (SchemaError, UnknownType, Unresolvable, re.error) as exc:
        # The server's form is broken: say so (the person can /decline), never crash.
        what = getattr(exc, "message", None) or str(exc).splitlines()[0]
        raise ValueError(f"the server's form cannot be checked ({what})") from None
    errors = sorted(found, key=lambda e: e.path)
    if errors:
        where = "/".join(str(p) for p in errors[0].path)
        raise ValueError(f"{where + ': ' if where else ''}{errors[0].message}")
    return content
