"""The ``@tool`` decorator: a Tool from an async function's type hints and docstring."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import Annotated, Any, TypeVar, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from core.errors import ToolFailed, ToolRetry

from .base import ToolContext

__all__ = ["Dep", "FunctionTool", "tool"]

ToolFunction = Callable[..., Awaitable[Any]]
T = TypeVar("T")


class _Injected:
    """Marks a tool parameter filled from ``ToolContext.deps`` instead of by the model."""


Dep = Annotated[T, _Injected()]
"""``schedules: Dep[ScheduleService]``: injected by type, hidden from the model."""


def _injected_type(annotation: Any) -> type[Any] | None:
    if typing.get_origin(annotation) is not Annotated:
        return None
    base, *metadata = typing.get_args(annotation)
    return base if any(isinstance(m, _Injected) for m in metadata) else None


_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_SECTIONS = {"Args", "Arguments", "Parameters"}
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (first paragraph, {arg: description})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line):
            break
        summary.append(line.strip())
    args: dict[str, str] = {}
    in_args, entry_indent, current = False, -1, ""
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            section = _SECTION.match(line)
            in_args = section is not None and section[1] in _ARG_SECTIONS
            entry_indent, current = -1, ""
            continue
        if not in_args:
            continue
        entry = _ARG_LINE.match(line.strip())
        if entry is not None and (entry_indent < 0 or indent <= entry_indent):
            entry_indent, current = indent, entry[1].lstrip("*")
            args[current] = entry[2].strip()
        elif current:
            args[current] = f"{args[current]} {line.strip()}".strip()
    return " ".join(summary), args


def validation_message(name: str, exc: ValidationError) -> str:
    """A concise one-line account of what was wrong with the arguments of ``name``."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{where}: {error['msg']}")
    return f"invalid arguments for {name}: " + "; ".join(problems)


def _strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


class FunctionTool:
    """A Tool backed by an async function; see :func:`tool`.

    Attributes:
        name: the tool name the model calls.
        description: what the tool does, for the model.
        parameters: JSON schema of the arguments object.
        fn: the wrapped function.
    """

    def __init__(
        self, *, fn: ToolFunction, name: str | None = None, description: str | None = None
    ) -> None:
        """Inspect ``fn`` (its argument model is built at first use).

        Args:
            fn: an ``async def``; a leading ``ctx: ToolContext`` parameter is injected.
            name: the tool name; defaults to the function name.
            description: overrides the docstring's first paragraph.

        Raises:
            TypeError: ``fn`` is not async, or has parameters a model cannot fill.
        """
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {fn.__qualname__} must be an async function")
        self.fn = fn
        self.name = name or fn.__name__
        summary, arg_docs = _parse_docstring(fn.__doc__)
        self.description = description or summary
        self._deps: dict[str, type[Any]] = {}
        self._wants_ctx, self._params, self._fields = self._arguments(fn, arg_docs)

    @cached_property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments object."""
        return _strip_titles(self._model.model_json_schema())

    @cached_property
    def _model(self) -> type[BaseModel]:
        # Built at first use, not with the tool: pydantic's model and schema cost every
        # process that builds the tools ~1-2 MiB, and only an agent ever runs them.
        return create_model(
            f"{self.name}_arguments",
            __config__=ConfigDict(extra="forbid", validate_by_name=False),
            **self._fields,
        )

    def _arguments(
        self, fn: ToolFunction, arg_docs: dict[str, str]
    ) -> tuple[bool, list[str], dict[str, Any]]:
        """Whether ``fn`` takes the context, its argument names, and their model fields."""
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except NameError as exc:
            raise TypeError(f"tool {self.name}: cannot resolve type hints: {exc}") from exc
        params = list(inspect.signature(fn).parameters.values())
        wants_ctx = bool(params) and hints.get(params[0].name) is ToolContext
        if wants_ctx:
            params = params[1:]
        fields: dict[str, Any] = {}
        names: list[str] = []
        for param in params:
            if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                raise TypeError(f"tool {self.name}: unsupported parameter {param.name!r}")
            annotation = hints.get(param.name, Any)
            if annotation is ToolContext:
                raise TypeError(f"tool {self.name}: ctx: ToolContext must come first")
            injected = _injected_type(annotation)
            if injected is not None:
                self._deps[param.name] = injected
                continue
            default = ... if param.default is param.empty else param.default
            # Internal field names avoid clashes with BaseModel attributes ("schema", "copy").
            fields[f"p{len(names)}"] = (
                annotation,
                Field(default, alias=param.name, description=arg_docs.get(param.name)),
            )
            names.append(param.name)
        return wants_ctx, names, fields

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> str:
        """Validate ``arguments``, call the function and render its result.

        Raises:
            ToolRetry: the arguments do not match the schema (names each field).
        """
        try:
            parsed = self._model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolRetry(validation_message(self.name, exc)) from None
        kwargs: dict[str, Any] = {
            name: getattr(parsed, f"p{i}") for i, name in enumerate(self._params)
        }
        for name, kind in self._deps.items():
            service = ctx.deps.get(kind)
            if service is None:
                raise ToolFailed(f"{self.name} is not available here (no {kind.__name__})")
            kwargs[name] = service
        result = await (self.fn(ctx, **kwargs) if self._wants_ctx else self.fn(**kwargs))
        if isinstance(result, str):
            return result
        return pydantic_core.to_json(result).decode()

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r})"


@overload
def tool(fn: ToolFunction, /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[ToolFunction], FunctionTool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[ToolFunction], FunctionTool]:
    """Turn an async function into a Tool.

    The JSON schema and validation come from the type hints; the description is the
    docstring's first paragraph, and each argument's description comes from its
    ``Args:`` section. A leading ``ctx: ToolContext`` parameter is injected at run
    time and hidden from the model, and so is every ``Dep[T]`` parameter, filled with the
    service of type ``T`` from ``ctx.deps``. A ``str`` result is returned as is; anything else
    is rendered as JSON.

    Examples:
        ``@tool`` or ``@tool(name="exec")`` above ``async def f(ctx: ToolContext, x: int)``.

    Args:
        fn: the function, when used as a bare ``@tool``.
        name: the tool name; defaults to the function name.
        description: overrides the docstring's first paragraph.
    """
    if fn is not None:
        return FunctionTool(fn=fn, name=name, description=description)

    def wrap(f: ToolFunction) -> FunctionTool:
        return FunctionTool(fn=f, name=name, description=description)

    return wrap
