"""`gateway.commands.coercion` coerces parameter values as typer's pydantic adapters do.

Each case coerces one value of one parameter both ways, `PlainParam` and typer's own
`build_runtime_param`, and expects the same value (of the same type) or the same usage
error, plus that the plain cases really are handled without typer.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer._click.core import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.core import _TyperParameter

from gateway.commands.coercion import Left, PlainParam, runtime_param


class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


def _probe(
    text: str = "",
    number: float = 1.0,
    count: int = 1,
    flag: bool = False,
    where: Path | None = None,
    existing: Annotated[Path | None, typer.Option(exists=True, dir_okay=False)] = None,
    color: Color = Color.RED,
    loud: Annotated[Color, typer.Option(case_sensitive=False)] = Color.RED,
    ranged: Annotated[int, typer.Option(min=1)] = 1,
    many: Annotated[list[str] | None, typer.Option()] = None,
) -> None:
    pass


def _params() -> tuple[Context, dict[str, _TyperParameter]]:
    holder = typer.Typer()
    holder.command()(_probe)
    command = typer.main.get_command(holder)
    params = {p.name: p for p in command.params if isinstance(p, _TyperParameter)}
    return Context(command), params


def _outcome(coerce: Any, value: Any) -> tuple[str, str]:
    try:
        result = coerce(value)
    except BadParameter as exc:
        return "error", exc.format_message()
    return type(result).__name__, repr(result)


FILE = Path(__file__)
CASES = {
    "text": ["default", "", "ü", "a\udcff", "-"],
    "number": [
        *["300", "0.5", ".5", "5.", "007", "1e3", "-1", "+1", " 1", "1_0", "inf", "nan"],
        *["", "abc", "1.2.3", ".", "١٢", "9" * 30, 300.0, 300],
    ],
    "count": ["8080", "007", "0", "-1", "1.0", "", "x", "9" * 18, "9" * 19, 5, True],
    "flag": [True, False, "true", "0", ""],
    "where": ["/tmp", "rel/x", "a//b/", "", "~", "-", ".", "/tmp/", Path("/tmp"), str(FILE)],
    "existing": [str(FILE), str(FILE.parent), "/no/such/file", "/no//such", FILE],
    "color": ["red", "blue", "RED", "green", "", Color.BLUE],
    "loud": ["red", "BLUE", "Green", Color.BLUE],
}


@pytest.mark.parametrize(
    ("name", "value"), [(name, value) for name, values in CASES.items() for value in values]
)
def test_plain_coercion_is_typers(name: str, value: Any) -> None:
    ctx, params = _params()
    param = params[name]
    plain = PlainParam.of(param.type_descriptor)
    assert plain is not None
    typers = build_runtime_param(param.type_descriptor)
    assert _outcome(lambda v: plain.coerce(v, param, ctx), value) == _outcome(
        lambda v: typers.coerce(v, param, ctx), value
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("text", "default"),
        ("number", "300"),
        ("number", "0.5"),
        ("count", "8080"),
        ("flag", True),
        ("where", "/tmp/x"),
        ("where", str(FILE)),
        ("existing", str(FILE)),
        ("color", "blue"),
        ("loud", "BLUE"),
    ],
)
def test_common_values_need_not_typers_coercion(name: str, value: Any) -> None:
    ctx, params = _params()
    plain = PlainParam.of(params[name].type_descriptor)
    assert plain is not None
    assert plain.plain(value, params[name], ctx) is not Left.TO_TYPER


@pytest.mark.parametrize("name", ["ranged", "many"])
def test_other_parameters_are_left_to_typer(name: str) -> None:
    _, params = _params()
    descriptor = params[name].type_descriptor
    assert PlainParam.of(descriptor) is None
    assert not isinstance(runtime_param(descriptor), PlainParam)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_path_is_refused_as_typer_does(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("x")
    secret.chmod(0)
    ctx, params = _params()
    param = params["where"]
    plain, typers = PlainParam.of(param.type_descriptor), build_runtime_param(param.type_descriptor)
    assert plain is not None
    outcome = _outcome(lambda v: plain.coerce(v, param, ctx), str(secret))
    assert outcome[0] == "error"
    assert outcome == _outcome(lambda v: typers.coerce(v, param, ctx), str(secret))
