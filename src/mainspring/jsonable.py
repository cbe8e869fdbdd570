"""Values that cross into events and session files are always serialisable.

A tool's ``ToolResult.details`` and its progress reports may be anything a plugin built:
an ``object()``, a lock, bytes, a circular dict. The kernel passes them through
:func:`to_jsonable` at the tool boundary, so every event can be turned into JSON and every
session line written, whatever a tool returned.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

__all__ = ["MAX_DEPTH", "describe", "jsonable", "to_jsonable"]

MAX_DEPTH: Final = 64
"""Nesting deeper than this is replaced by a description."""

_SCALARS: Final = (str, int, float, bool)


def describe(value: object) -> str:
    """A short description of a value that cannot be serialised: its type, never its repr."""
    kind = type(value)
    return f"<unserialisable {kind.__module__}.{kind.__qualname__}>"


def to_jsonable(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` itself when pydantic can serialise it as is, else a JSON-able copy.

    JSON types, pydantic models, dataclasses, enums, dates and the like pass unchanged
    (the common case costs one serialisation check). Otherwise the copy keeps everything
    that can be serialised and replaces the rest: a value of an unknown type by
    :func:`describe`, a cycle by ``"<cycle>"``, nesting past ``max_depth`` by
    ``"<nested too deep>"``. Never raises.
    """
    if value is None or type(value) in _SCALARS:
        return value
    try:
        to_jsonable_python(value)
    except Exception:
        pass
    else:
        if not _deeper_than(value, max_depth):
            return value
    return _walk(value, 0, max_depth, set())


def jsonable(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """Plain JSON data (dicts, lists, strings, numbers, booleans, ``None``) for ``value``.

    Pydantic models and dataclasses become dicts as pydantic serialises them; what cannot
    be serialised is replaced as in :func:`to_jsonable`. Never raises.
    """
    if value is None or type(value) in _SCALARS:
        return value
    try:
        data = to_jsonable_python(value)
    except Exception:
        pass
    else:
        if not _deeper_than(data, max_depth):
            return data
    return _walk(value, 0, max_depth, set())


def _walk(value: Any, depth: int, max_depth: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, _SCALARS):
        return value
    if depth >= max_depth:
        return "<nested too deep>"
    if id(value) in seen:
        return "<cycle>"
    seen.add(id(value))
    try:
        return _walk_container(value, depth + 1, max_depth, seen)
    finally:
        seen.discard(id(value))


def _walk_container(value: Any, depth: int, max_depth: int, seen: set[int]) -> Any:
    if isinstance(value, dict):
        return {_key(key): _walk(item, depth, max_depth, seen) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_walk(item, depth, max_depth, seen) for item in value]
    if isinstance(value, BaseModel):
        fields = {name: getattr(value, name, None) for name in type(value).model_fields}
        return _walk_container(fields, depth, max_depth, seen)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {item.name: getattr(value, item.name) for item in dataclasses.fields(value)}
        return _walk_container(fields, depth, max_depth, seen)
    if isinstance(value, bytes | bytearray):
        return describe(value)
    try:
        return to_jsonable_python(value)
    except Exception:
        return describe(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, _SCALARS):
        return str(key)
    return describe(key)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest past ``limit`` (iterative; cheap for flat values)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values() if not _flat(child))
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend((child, depth + 1) for child in item if not _flat(child))
    return False


def _flat(value: Any) -> bool:
    return value is None or isinstance(value, _SCALARS)
