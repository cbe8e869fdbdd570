"""``@tool``: build a :class:`~mainspring.tools.Tool` from a typed function.

::

    @tool
    async def read_file(path: str, limit: int = 200, ctx: ToolContext | None = None) -> str:
        \"\"\"Read a text file.

        Args:
            path: The file to read.
            limit: At most this many lines.
        \"\"\"

gives a tool named ``read_file`` whose description is the docstring without its
argument section, and whose parameters are a pydantic model ``ReadFileArgs`` built from
the signature:

- Each parameter becomes a field with its type hint (``Any`` when there is none), its
  default (required when there is none) and any ``Annotated[..., Field(...)]`` or
  ``= Field(...)`` settings. A description documented in the docstring is used unless
  the ``Field`` gives its own.
- The model forbids extra keys (``extra="forbid"``), so a misspelt argument is reported
  to the model instead of silently dropped. Values are otherwise validated in pydantic's
  lax mode (``"5"`` becomes ``5`` for an ``int``).
- A parameter annotated :class:`~mainspring.tools.ToolContext` (or ``ToolContext |
  None``), or an unannotated parameter named ``ctx``, is not part of the schema: the
  running call's context is passed to it.
- ``*args`` and ``**kwargs`` are rejected (``TypeError``), as are generator functions.
- ``Annotated[..., Role("path")]`` gives a parameter its role (see
  :mod:`mainspring.effects`); ``@tool(effects=(...))`` says what the tool does. An
  unknown word is a ``TypeError`` naming the function and the word.

An ``async def`` function is awaited on the event loop; a plain function runs in a
worker thread. Whatever the function returns is the tool's result (the kernel accepts a
:class:`~mainspring.tools.ToolResult`, a ``str``, or any value it serialises to JSON).
The original function stays reachable as ``tool.execute.__wrapped__``.

Docstring argument sections understood: Google (``Args:``, ``Arguments:``,
``Parameters:``, ``Params:``, ``Keyword Args:``, ``Other Parameters:`` with entries
``name: text`` or ``name (type): text`` and indented continuation lines), reST
(``:param name: text`` / ``:param type name: text``, ``:type name:`` lines dropped) and
NumPy (``Parameters`` underlined with dashes, ``name : type`` entries with indented
descriptions).
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Final, Union, overload

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.errors import PydanticUserError
from pydantic.fields import FieldInfo

from .effects import Role
from .logs import get_logger
from .tool_docstrings import parse_docstring
from .tools import Tool, ToolContext

__all__ = ["parse_docstring", "tool"]


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    sequential: bool = False,
    timeout_s: float | None = None,
    label: str | None = None,
    idempotent: bool = False,
    prepare_arguments: Callable[[dict[str, Any]], Any] | None = None,
    effects: Iterable[str] | str | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    sequential: bool = False,
    timeout_s: float | None = None,
    label: str | None = None,
    idempotent: bool = False,
    prepare_arguments: Callable[[dict[str, Any]], Any] | None = None,
    effects: Iterable[str] | str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a :class:`~mainspring.tools.Tool` (see the module docs).

    Use bare (``@tool``) or with options (``@tool(name=..., description=...,
    sequential=..., timeout_s=..., label=..., idempotent=..., prepare_arguments=...,
    effects=...)``). ``name`` defaults to the function's name and ``description`` to its
    docstring without the argument section; the other options are passed to
    :class:`~mainspring.tools.Tool` unchanged. Raises
    ``TypeError`` when the function cannot become a tool, naming the function and why.

    Supported annotations are those pydantic validates (``str``, numbers, ``bool``,
    ``Literal``, ``Enum``, ``X | None``, lists, dicts, nested models, ``Annotated`` with
    ``Field``); the schema is one object with a property per parameter,
    ``additionalProperties: false`` and nested types under ``$defs`` (the table in
    ``docs/first-plugin.md``). The function is called with the validated values;
    ``before_tool_call`` gates see the same values as a :class:`~mainspring.ToolArgs`.
    """

    def build(func: Callable[..., Any]) -> Tool:
        return _build(
            func,
            name=name,
            description=description,
            sequential=sequential,
            timeout_s=timeout_s,
            label=label,
            idempotent=idempotent,
            prepare_arguments=prepare_arguments,
            effects=effects,
        )

    if fn is None:
        return build
    if not callable(fn):
        raise TypeError(
            f"@tool expects a function, got {fn!r}; pass options by keyword: @tool(name=...)"
        )
    return build(fn)


_log = get_logger("mainspring.tools")

# -- building ---------------------------------------------------------------------------

_CONFIG: Final = ConfigDict(extra="forbid", protected_namespaces=())


def _build(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    sequential: bool,
    timeout_s: float | None,
    label: str | None,
    idempotent: bool = False,
    prepare_arguments: Callable[[dict[str, Any]], Any] | None = None,
    effects: Iterable[str] | str | None = None,
) -> Tool:
    where = f"@tool {getattr(fn, '__qualname__', None) or repr(fn)}"
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"{where}: generator functions cannot be tools; return a value")
    tool_name = name or getattr(fn, "__name__", "")
    if not tool_name or not isinstance(tool_name, str) or tool_name == "<lambda>":
        raise TypeError(f"{where}: cannot name this tool; pass @tool(name=...)")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{where}: cannot read its signature: {error}") from error
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as error:
        raise TypeError(f"{where}: cannot resolve its type hints: {error}") from error
    summary, documented = parse_docstring(inspect.getdoc(fn) or "")
    if not (description or summary):
        _log.warning(
            "tool_without_description",
            tool=tool_name,
            hint="give the function a docstring: the model sees only the tool's name",
        )

    fields: dict[str, Any] = {}
    # (parameter name, model field name or None for the context, positional-only)
    plan: list[tuple[str, str | None, bool]] = []
    context_parameter: str | None = None
    roles: dict[str, str] = {}
    taken = set(signature.parameters)
    for index, parameter in enumerate(signature.parameters.values()):
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"{where}: *{parameter.name} is not supported; declare each argument by name"
            )
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(
                f"{where}: **{parameter.name} is not supported; declare each argument by name"
            )
        positional_only = parameter.kind is inspect.Parameter.POSITIONAL_ONLY
        hint = hints.get(parameter.name, Any)
        if parameter.name not in hints and parameter.name != "ctx":
            _log.warning(
                "tool_parameter_untyped",
                tool=tool_name,
                parameter=parameter.name,
                hint="annotate it: the model is told it may pass any JSON value",
            )
        if _is_context(hint) or (parameter.name == "ctx" and parameter.name not in hints):
            if context_parameter is not None:
                raise TypeError(
                    f"{where}: two context parameters ({context_parameter!r} and "
                    f"{parameter.name!r}); take the ToolContext once"
                )
            context_parameter = parameter.name
            plan.append((parameter.name, None, positional_only))
            continue
        role = _role(hint)
        if role is not None:
            roles[parameter.name] = role
        field_name = _field_name(parameter.name, index, taken)
        taken.add(field_name)
        extra: list[FieldInfo] = []
        if field_name != parameter.name:
            extra.append(Field(alias=parameter.name))
        doc = documented.get(parameter.name)
        if doc:
            extra.append(Field(description=doc))
        annotation = _annotate(strict(hint), extra)
        if parameter.default is inspect.Parameter.empty:
            fields[field_name] = annotation
        else:
            fields[field_name] = (annotation, parameter.default)
        plan.append((parameter.name, field_name, positional_only))

    try:
        model: type[BaseModel] = create_model(
            _model_name(tool_name),
            __config__=_CONFIG,
            __module__=getattr(fn, "__module__", None) or __name__,
            **fields,
        )
    except (PydanticUserError, TypeError, ValueError, NameError) as error:
        raise TypeError(f"{where}: cannot build its argument model: {error}") from error

    def arguments(args: Any, ctx: ToolContext) -> tuple[list[Any], dict[str, Any]]:
        if not isinstance(args, model):
            args = built.validate(args)
        positional: list[Any] = []
        keyword: dict[str, Any] = {}
        for parameter_name, field_name, positional_only in plan:
            value = ctx if field_name is None else getattr(args, field_name)
            if positional_only:
                positional.append(value)
            else:
                keyword[parameter_name] = value
        return positional, keyword

    execute: Callable[[Any, ToolContext], Any]
    if _is_async(fn):

        @functools.wraps(fn)
        async def execute_async(args: Any, ctx: ToolContext) -> Any:
            positional, keyword = arguments(args, ctx)
            return await fn(*positional, **keyword)

        execute = execute_async
    else:

        @functools.wraps(fn)
        def execute_sync(args: Any, ctx: ToolContext) -> Any:
            positional, keyword = arguments(args, ctx)
            return fn(*positional, **keyword)

        execute = execute_sync

    try:
        built = Tool(
            tool_name,
            summary if description is None else description,
            model,
            execute,
            sequential=sequential,
            timeout_s=timeout_s,
            label=label,
            idempotent=idempotent,
            prepare_arguments=prepare_arguments,
            effects=effects,
            roles=roles,
        )
    except (PydanticUserError, TypeError, ValueError) as error:
        raise TypeError(f"{where}: cannot describe its parameters: {error}") from error
    return built


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )


def _role(hint: Any) -> str | None:
    """The word of the last :class:`~mainspring.effects.Role` in ``hint``'s
    ``Annotated`` metadata, or ``None``."""
    if typing.get_origin(hint) is not Annotated:
        return None
    found = [item.name for item in typing.get_args(hint)[1:] if isinstance(item, Role)]
    return found[-1] if found else None


def _is_context(hint: Any) -> bool:
    """``ToolContext``, ``ToolContext | None`` or either inside ``Annotated``."""
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if hint is ToolContext:
        return True
    if typing.get_origin(hint) in (Union, types.UnionType):
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return len(members) == 1 and members[0] is ToolContext
    return False


def _field_name(parameter: str, index: int, taken: set[str]) -> str:
    """A model field name for ``parameter``: itself unless pydantic cannot use it (a
    leading underscore, or a ``BaseModel`` attribute such as ``json``), in which case a
    stand-in is returned and the parameter name becomes the field's alias."""
    if not parameter.startswith("_") and not hasattr(BaseModel, parameter):
        return parameter
    candidate = f"arg{index}_{parameter.lstrip('_')}"
    while candidate in taken or hasattr(BaseModel, candidate):
        candidate += "_"
    return candidate


def strict(hint: Any) -> Any:
    """``hint`` with every pydantic model in it refusing unknown keys, however nested.

    A model whose author set ``extra`` keeps its setting; any other is replaced by a
    subclass (same name, same fields) with ``extra="forbid"``, so the model's schema says
    ``additionalProperties: false`` and a key it does not know is a validation error, as
    at the top level. Lists, tuples, dicts, unions and ``Annotated`` are looked into.
    """
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return _strict_model(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if not args:
        return hint
    if origin is Annotated:
        return Annotated[(strict(args[0]), *args[1:])]
    inner = tuple(strict(arg) for arg in args)
    if inner == args:
        return hint
    if origin is Union:
        return Union[inner]  # noqa: UP007 - rebuilt from typing's own parts
    if origin is types.UnionType:
        return functools.reduce(lambda left, right: left | right, inner)
    if origin in (list, tuple, set, frozenset, dict):
        return origin[inner]
    return hint


@functools.cache
def _strict_model(model: type[BaseModel]) -> type[BaseModel]:
    if model.model_config.get("extra") is not None:
        return model
    fields: dict[str, Any] = {
        name: (strict(info.annotation), info) for name, info in model.model_fields.items()
    }
    derived: type[BaseModel] = create_model(
        model.__name__, __base__=model, __module__=model.__module__, **fields
    )
    derived.model_config["extra"] = "forbid"
    derived.model_rebuild(force=True)
    return derived


def _annotate(hint: Any, extra: list[FieldInfo]) -> Any:
    """``hint`` with ``extra`` field settings placed before its own ``Annotated``
    metadata, so that the function's own ``Field(...)`` wins over the docstring."""
    if not extra:
        return hint
    if typing.get_origin(hint) is Annotated:
        base, *metadata = typing.get_args(hint)
    else:
        base, metadata = hint, []
    return Annotated.__class_getitem__((base, *extra, *metadata))  # type: ignore[attr-defined]


def _model_name(tool_name: str) -> str:
    """``read_file`` → ``ReadFileArgs``."""
    parts = [part for part in re.split(r"[^0-9A-Za-z]+", tool_name) if part]
    stem = "".join(part[:1].upper() + part[1:] for part in parts) or "Tool"
    if not stem[0].isalpha():
        stem = "Tool" + stem
    return stem + "Args"
