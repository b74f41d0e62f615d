"""Answers to MCP servers' questions: read against the requested schema, or refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.mcp.answers import parse_answer, render_fields

ROOT = Path(__file__).resolve().parents[2]
CHOICE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "interpretation": {
            "type": "string",
            "title": "Clarification",
            "oneOf": [
                {"const": "programming", "title": "Python programming language"},
                {"const": "snake", "title": "Python snake species"},
            ],
        }
    },
    "required": ["interpretation"],
}
FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2},
        "age": {"type": "integer", "minimum": 0},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
        "size": {"type": "string", "enum": ["S", "M"], "enumNames": ["Small", "Medium"]},
    },
    "required": ["name", "age"],
}


@pytest.mark.parametrize("text", ["snake", "2", "Python snake species", "python SNAKE species"])
def test_a_choice_by_value_number_or_title(text: str) -> None:
    assert parse_answer(CHOICE, text) == {"interpretation": "snake"}


def test_several_fields_are_name_value_words_typed_by_the_schema() -> None:
    answer = parse_answer(FORM, 'name="Ada L" age=36 ok=yes tags=a,c size=Medium')
    assert answer == {"name": "Ada L", "age": 36, "ok": True, "tags": ["a", "c"], "size": "M"}


@pytest.mark.parametrize(
    ("schema", "text", "why"),
    [
        (CHOICE, "lizard", "not one of the choices"),
        (CHOICE, "", "'interpretation' is a required property"),
        (FORM, "name=Ada", "'age' is a required property"),
        (FORM, "name=A age=3", "name: 'A' is too short"),
        (FORM, "name=Ada age=-1", "age: -1 is less than the minimum of 0"),
        (FORM, "name=Ada age=1.5", "not a whole number"),
        (FORM, "name=Ada age=x", "not a number"),
        (FORM, "name=Ada age=3 ok=maybe", "say yes or no"),
        (FORM, "Ada", "say name=value for each field"),
        (FORM, "name=Ada colour=red", "say name=value for each field"),
    ],
)
def test_an_answer_that_does_not_fit_is_refused_with_the_reason(
    schema: dict[str, Any], text: str, why: str
) -> None:
    with pytest.raises(ValueError) as refused:
        parse_answer(schema, text)
    assert why in str(refused.value)


def test_fields_are_shown_with_their_type_and_choices() -> None:
    shown = render_fields(CHOICE)
    assert "- interpretation (Clarification) [string, required]" in shown
    assert "1. programming — Python programming language" in shown
    assert "2. snake — Python snake species" in shown
    assert "3. Small" not in render_fields(FORM) and "1. S — Small" in render_fields(FORM)


def test_the_core_runtime_loads_no_mcp_sdk_without_servers() -> None:
    """The questions and commands are always there; the SDK's types only with servers."""
    probe = (
        "import sys, core.app; print(sorted(m for m in ('mcp', 'mcp_types') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "field",
    [
        {"type": "strng"},  # not a type
        {"$ref": "http://127.0.0.1:9/field.json"},  # never fetched
        {"type": "string", "pattern": "("},  # not a regular expression
    ],
)
def test_a_form_that_cannot_be_checked_is_a_clear_refusal(field: dict[str, Any]) -> None:
    """A server's broken schema: the person hears so (and can /decline), never a crash."""
    schema = {"type": "object", "properties": {"name": field}}
    with pytest.raises(ValueError, match="cannot be checked"):
        parse_answer(schema, "Ada")
