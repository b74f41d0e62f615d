"""Typer's parameter coercion, without pydantic for the plain values the commands take.

typer 0.29 coerces each parameter's value with a pydantic ``TypeAdapter`` it builds the
first time the parameter is processed, even when the value is None (an option not given,
``--help`` itself): importing pydantic is ~60 ms of ``familiar send``'s 0.2 s (issue 15).
`install` makes typer build `PlainParam` instead wherever it can: None, a value of the
annotation's exact type, digits for an ``int`` or ``float``, a path for a ``Path``, one
of the choices of an ``Enum`` or ``Literal``. Anything else (a bad value, ``1e3``,
``a//b``) goes to typer's own coercion, so every value and error message stays typer's
(tests/unit/test_cli_coercion.py compares the two).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer.core
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_choice, coerce_cli_path

if TYPE_CHECKING:
    from typer._click.core import Context
    from typer.core import _TyperParameter

__all__ = ["Left", "PlainParam", "install", "runtime_param"]

_EXACT = (str, bool, int, float)


class Left(enum.Enum):
    """Returned by `PlainParam.plain` for a value it leaves to typer's coercion."""

    TO_TYPER = enum.auto()


@dataclass(frozen=True)
class PlainParam(RuntimeParam):
    """A parameter's coercion: the plain cases here, the rest by typer's own.

    Attributes:
        descriptor: what typer resolved for the parameter (annotation and options).
    """

    descriptor: TypeDescriptor

    @classmethod
    def of(cls, descriptor: TypeDescriptor) -> PlainParam | None:
        """The plain coercion of ``descriptor``; None when it has no plain cases."""
        info, annotation = descriptor.parameter_info, descriptor.annotation
        if descriptor.is_file or descriptor.is_list or descriptor.is_tuple or info.parser:
            return None
        plain = (
            annotation in _EXACT
            or (annotation is Path and descriptor.is_path and info.path_type is None)
            or descriptor.is_choice
        )
        if not plain or descriptor.is_ranged or info.clamp:
            return None
        return cls(parameter_info=info, annotation=annotation, descriptor=descriptor)

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        result = self.plain(value, param, ctx)
        if result is Left.TO_TYPER:
            return build_runtime_param(self.descriptor)._coerce_value(value, param, ctx)
        return result

    def plain(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        """``value`` coerced as typer's pydantic adapter would, or `Left.TO_TYPER`."""
        annotation = self.annotation
        if self.descriptor.is_choice:
            try:
                return coerce_cli_choice(
                    value,
                    choices=self.descriptor.choices or (),
                    case_sensitive=self.descriptor.case_sensitive,
                    ctx=ctx,
                )
            except ValueError:  # not a choice: typer says so, in its words
                return Left.TO_TYPER
        if annotation is Path:
            return self._path(value, param, ctx)
        if type(value) is annotation:
            return value
        if not (type(value) is str and value.isascii() and 0 < len(value) < 19):
            return Left.TO_TYPER
        # pydantic parses plain digits as int() and float() do; signs, exponents,
        # underscores, blanks, inf and nan are left to it.
        if annotation is int and value.isdigit():
            return int(value)
        if annotation is float and value.replace(".", "", 1).isdigit():
            return float(value)
        return Left.TO_TYPER

    def _path(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        if type(value) is str and str(path := Path(value)) == value:
            # pydantic makes the text a Path(value); typer's messages name the text,
            # which is the path's own unless Path normalised it ("a//b/", "").
            value = path
        if not isinstance(value, Path):
            return Left.TO_TYPER
        return coerce_cli_path(value, self.parameter_info, path_type=Path, param=param, ctx=ctx)


def runtime_param(descriptor: TypeDescriptor) -> RuntimeParam:
    """typer's `build_runtime_param`, with `PlainParam` where it applies."""
    return PlainParam.of(descriptor) or build_runtime_param(descriptor)


def install() -> None:
    """Make typer build its parameters' coercion with `runtime_param` from now on."""
    # typer.core calls the name it imported; tests/unit/test_cli_imports.py fails if a
    # typer upgrade moves it (send would import pydantic again).
    typer.core.build_runtime_param = runtime_param  # type: ignore[attr-defined]
