"""Transcript entries as JSON data and back: the form session files and durable runs keep.

:func:`encode_message` turns any transcript entry (the built-in messages, a custom-role
message, a plain object) into JSON-able data and never raises; :func:`decode_message`
reads that data back, as the built-in message types where the role is known and as a
:class:`CustomMessage` (fields kept as they were) where it is not. Both are public from
``mainspring``: a plugin or embedder keeping history elsewhere (a database, a queue) uses
them to write and read transcripts the way session files do.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

from .messages import (
    AssistantMessage,
    CompactionSummary,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["MAX_DEPTH", "CustomMessage", "decode_message", "encode_message"]

MAX_DEPTH = 160
"""Past this nesting, :func:`encode_message` writes a description instead of the value.

Counted from the message: it leaves room above the deepest values the kernel accepts
(tool-call arguments up to ``tools.max_argument_depth``, at most 128; details normalised to
64 levels), so what the kernel kept is written whole."""


class CustomMessage(BaseModel):
    """A custom-role message read back from a session file (its fields kept as they were)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    role: str


@cache
def _adapters() -> dict[str, TypeAdapter[Any]]:
    """The validators of the known roles, built on first use (not at ``import mainspring``)."""
    return {
        "user": TypeAdapter(UserMessage),
        "assistant": TypeAdapter(AssistantMessage),
        "tool_result": TypeAdapter(ToolResultMessage),
        "compaction": TypeAdapter(CompactionSummary),
    }


@cache
def _any_adapter() -> TypeAdapter[Any]:
    return TypeAdapter(Any)


def encode_message(message: Any) -> dict[str, Any]:
    """The JSON form of a transcript entry. Total: it never raises.

    For what pydantic can dump, this is ``model_dump(mode="json")``, less a ``labels``
    field that is ``None`` (labels, where set, are kept; see :mod:`mainspring.effects`).
    A value it cannot
    (an ``object()``, a lock, a generator, non-UTF-8 bytes, a circular or too deeply nested
    structure, in ``ToolResult.details`` say) is written as a short description naming its
    type, such as ``"<unserializable: _thread.lock>"``, never its ``repr``; the rest of the
    entry is kept. A generator or iterator is never iterated. Floats that are not finite
    are written as ``null``. A non-pydantic entry is written as its public attributes.
    """
    plain = not isinstance(message, BaseModel) and hasattr(message, "__dict__")
    data = _walk(_public_fields(message) if plain else message, 0, set())
    assert isinstance(data, dict)
    data.setdefault("role", _walk(getattr(message, "role", None), 0, set()))
    return data


def _walk(value: Any, depth: int, above: set[int]) -> Any:
    """``value`` as JSON-able data; ``above`` holds the ids of the containers above it."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind not in _CONTAINERS:
        if isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                return f"<bytes: {len(data)} bytes, not UTF-8>"
        if not isinstance(value, dict | list | tuple | set | frozenset | BaseModel) and not (
            is_dataclass(value) and not isinstance(value, type)
        ):
            if isinstance(value, Iterator):  # never iterated: endless, or with side effects
                return f"<unserializable: {_type_name(value)}>"
            try:  # dates, enums, UUIDs, paths, decimals...
                return _any_adapter().dump_python(value, mode="json")
            except Exception:
                return f"<unserializable: {_type_name(value)}>"
    if depth >= MAX_DEPTH:
        return f"<nested deeper than {MAX_DEPTH}: {_type_name(value)}>"
    if id(value) in above:
        return f"<circular reference: {_type_name(value)}>"
    above.add(id(value))
    depth += 1
    try:
        if isinstance(value, list | tuple | set | frozenset):
            return [item if type(item) in _PLAIN else _walk(item, depth, above) for item in value]
        items = value if isinstance(value, dict) else _public_fields(value)
        return {
            key if type(key) is str else _key(key): (
                item if type(item) in _PLAIN else _walk(item, depth, above)
            )
            for key, item in items.items()
        }
    finally:
        above.discard(id(value))


_PLAIN = frozenset({str, int, bool, type(None)})
_CONTAINERS = frozenset({dict, list, tuple})


def _public_fields(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        # an unset ``labels`` is left out: an unlabelled entry is written as it always was
        found = {
            name: getattr(value, name)
            for name in type(value).model_fields
            if name != "labels" or getattr(value, name) is not None
        }
        found.update(value.model_extra or {})
        return found
    names = (
        [f.name for f in fields(value)]
        if is_dataclass(value)
        else [*getattr(value, "__dict__", ())]
    )
    return {name: getattr(value, name) for name in names if not name.startswith("_")}


def _type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return f"<{_type_name(key)}>"


def decode_message(data: Any) -> Any:
    """A transcript entry from its JSON form (unknown roles become :class:`CustomMessage`)."""
    if not isinstance(data, dict) or not isinstance(data.get("role"), str):
        raise ValueError("a message needs a string 'role'")
    adapter = _adapters().get(data["role"])
    if adapter is None:
        return CustomMessage.model_validate(data)
    return adapter.validate_python(data)
