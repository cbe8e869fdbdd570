"""Values that cross into events and session files are always serialisable.

A tool's ``ToolResult.details`` and its progress reports may be anything a plugin built:
an ``object()``, a lock, bytes, a circular dict, an endless generator. The kernel passes
them through :func:`to_jsonable` at the tool boundary, so every event can be turned into
JSON and every session line written, whatever a tool returned.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
from typing import Any, Final

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

__all__ = ["MAX_DEPTH", "describe", "to_jsonable"]

MAX_DEPTH: Final = 64
"""Nesting deeper than this is replaced by a description."""

_SCALARS: Final = (str, int, float, bool)
_LEAVES: Final = (
    datetime.date,
    datetime.time,
    datetime.timedelta,
    decimal.Decimal,
    uuid.UUID,
    enum.Enum,
    pathlib.PurePath,
)
"""Types pydantic serialises to a scalar without running any code of the value's own."""


def describe(value: object) -> str:
    """A short description of a value that cannot be serialised: its type, never its repr."""
    kind = type(value)
    return f"<unserialisable {kind.__module__}.{kind.__qualname__}>"


def to_jsonable(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` itself when it is safe to serialise as is, else a JSON-able copy.

    Safe: JSON scalars, dicts, lists and tuples of safe values, pydantic models and
    dataclasses whose fields are safe, and plain leaf types (dates, enums, UUIDs, paths,
    decimals), nested at most ``max_depth`` deep, without cycles; they pass unchanged
    (one walk over the value). Otherwise the copy keeps what is safe and replaces the
    rest: a value of any other type (a lock, bytes, a generator, which is never
    iterated) by :func:`describe`, a cycle by ``"<cycle>"``, nesting past ``max_depth``
    by ``"<nested too deep>"``. Models and dataclasses become dicts of their fields in
    the copy. Never raises.
    """
    if value is None or (type(value) in _SCALARS and not _huge(value)):
        return value
    if _safe(value, max_depth):
        return value
    return _copy(value, 0, max_depth, set())


def _children(value: Any) -> list[Any] | None:
    """The values inside a container, model or dataclass; ``None`` for anything else."""
    if isinstance(value, dict):
        if not all(key is None or isinstance(key, _SCALARS) for key in value):
            return None
        return list(value.values())
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, BaseModel):
        return [getattr(value, name, None) for name in type(value).model_fields]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, item.name) for item in dataclasses.fields(value)]
    return None


def _safe(value: Any, max_depth: int) -> bool:
    """Whether ``value`` may pass unchanged (iterative: no recursion on its depth)."""
    stack: list[tuple[Any, int, frozenset[int]]] = [(value, 0, frozenset())]
    while stack:
        item, depth, above = stack.pop()
        if item is None or isinstance(item, _SCALARS + _LEAVES):
            if _huge(item):
                return False
            continue
        if depth >= max_depth or id(item) in above:
            return False
        children = _children(item)
        if children is None:
            return False
        path = above | {id(item)}
        stack.extend((child, depth + 1, path) for child in children)
    return True


def _copy(value: Any, depth: int, max_depth: int, seen: set[int]) -> Any:
    if _huge(value):
        return f"<int of {value.bit_length()} bits>"
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, _LEAVES):
        try:
            return to_jsonable_python(value)
        except Exception:
            return describe(value)
    if depth >= max_depth:
        return "<nested too deep>"
    if id(value) in seen:
        return "<cycle>"
    seen.add(id(value))
    try:
        return _copy_container(value, depth + 1, max_depth, seen)
    finally:
        seen.discard(id(value))


def _copy_container(value: Any, depth: int, max_depth: int, seen: set[int]) -> Any:
    if isinstance(value, dict):
        return {_key(key): _copy(item, depth, max_depth, seen) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_copy(item, depth, max_depth, seen) for item in value]
    if isinstance(value, BaseModel):
        fields = {name: getattr(value, name, None) for name in type(value).model_fields}
        return _copy_container(fields, depth, max_depth, seen)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {item.name: getattr(value, item.name) for item in dataclasses.fields(value)}
        return _copy_container(fields, depth, max_depth, seen)
    return describe(value)


_MAX_INT_BITS: Final = 13_000
"""Larger ints have more digits than Python turns into text by default (4,300)."""


def _huge(value: Any) -> bool:
    return type(value) is int and value.bit_length() > _MAX_INT_BITS


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or (isinstance(key, _SCALARS) and not _huge(key)):
        return str(key)
    return describe(key)
