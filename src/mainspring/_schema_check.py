"""The structural checks of a tool's JSON schema, before any validator is built.

:func:`check_structure` is the first half of :func:`mainspring.json_schema.check_schema`:
it walks every place a subschema may sit and rejects what no draft allows, with the path
and a reason a tool author understands (an unknown ``type`` gets a hint for ``str``,
``int``...). The draft's meta-schema is checked afterwards by the compiled validator.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ._schema_text import MISSING, describe, render_path, resolve

__all__ = [
    "JSON_TYPES",
    "SCHEMA_KEYWORDS",
    "SCHEMA_LIST_KEYWORDS",
    "SCHEMA_MAP_KEYWORDS",
    "Path",
    "check_structure",
    "structure_problem",
]

JSON_TYPES: Final[tuple[str, ...]] = (
    "array",
    "boolean",
    "integer",
    "null",
    "number",
    "object",
    "string",
)
"""The type names JSON Schema knows."""

_TYPE_HINTS: Final[dict[str, str]] = {
    "int": "integer",
    "float": "number",
    "str": "string",
    "bool": "boolean",
    "dict": "object",
    "list": "array",
    "tuple": "array",
    "none": "null",
}

Path = tuple[str | int, ...]
"""Where in a schema or value: keys and indexes from the root."""

SCHEMA_KEYWORDS: Final = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "else",
    "if",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
SCHEMA_MAP_KEYWORDS: Final = (
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
)
SCHEMA_LIST_KEYWORDS: Final = ("allOf", "anyOf", "oneOf", "prefixItems")


def check_structure(schema: Any) -> None:
    """Raise ``ValueError`` naming the place if ``schema`` is not a well-formed tool schema.

    The root must be a dict; every subschema an object or a boolean; ``type`` a known name
    or a non-empty list of distinct ones; patterns must compile; every ``$ref`` must point
    inside the document, resolve, and not loop.
    """
    if not isinstance(schema, dict):
        raise ValueError(f"a tool's JSON schema must be a dict, got {describe(schema)}")
    _check(schema, schema, (), set())
    try:
        _check_refs(schema)
    except _RefProblem as problem:
        raise _fail((), str(problem)) from None


def structure_problem(schema: Mapping[str, Any]) -> str | None:
    """What is wrong with ``schema``'s structure (a looping or dangling ``$ref`` first),
    as one sentence, or ``None``: the same checks as :func:`check_structure`."""
    try:
        _check_refs(schema)
        _check(schema, schema, (), set())
    except _RefProblem as problem:
        return str(problem)
    except ValueError as error:
        return str(error)
    return None


class _RefProblem(Exception):
    pass


def _check_refs(root: Mapping[str, Any]) -> None:
    """Raise :class:`_RefProblem` for a ``$ref`` that loops onto itself."""
    for node in _subschemas(root):
        seen: list[int] = []
        current: Any = node
        while isinstance(current, Mapping) and isinstance(current.get("$ref"), str):
            if id(current) in seen:
                raise _RefProblem(f"$ref {node['$ref']!r} refers to itself")
            seen.append(id(current))
            ref = current["$ref"]
            current = resolve(root, ref)
            if current is MISSING:
                raise _RefProblem(f"cannot resolve $ref {ref!r}")


def _subschemas(schema: Any) -> Iterator[Mapping[str, Any]]:
    if not isinstance(schema, Mapping):
        return
    yield schema
    for keyword in (*SCHEMA_KEYWORDS, "items"):
        value = schema.get(keyword)
        if isinstance(value, list):
            for item in value:
                yield from _subschemas(item)
        else:
            yield from _subschemas(value)
    for keyword in SCHEMA_MAP_KEYWORDS:
        mapping = schema.get(keyword)
        if isinstance(mapping, Mapping):
            for value in mapping.values():
                yield from _subschemas(value)
    for keyword in SCHEMA_LIST_KEYWORDS:
        options = schema.get(keyword)
        if isinstance(options, list):
            for value in options:
                yield from _subschemas(value)


def _fail(path: Path, why: str) -> ValueError:
    where = render_path(path).replace(".", "/") if path else "(root)"
    return ValueError(f"invalid JSON schema at {where}: {why}")


def _check(root: Mapping[str, Any], schema: Any, path: Path, seen: set[int]) -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise _fail(path, f"expected a schema (object or boolean), got {describe(schema)}")
    if id(schema) in seen:
        return
    seen.add(id(schema))
    if "type" in schema:
        _check_type(schema["type"], (*path, "type"))
    if "pattern" in schema:
        _check_pattern(schema["pattern"], (*path, "pattern"))
    if "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str):
            raise _fail((*path, "$ref"), f"expected a string, got {describe(ref)}")
        if resolve(root, ref) is MISSING:
            raise _fail(
                (*path, "$ref"), f"cannot resolve {ref!r} (only '#/...' pointers are supported)"
            )
    for keyword in SCHEMA_KEYWORDS:
        if keyword in schema:
            _check(root, schema[keyword], (*path, keyword), seen)
    items = schema.get("items")
    if isinstance(items, list):
        for index, subschema in enumerate(items):
            _check(root, subschema, (*path, "items", index), seen)
    elif "items" in schema:
        _check(root, items, (*path, "items"), seen)
    for keyword in SCHEMA_MAP_KEYWORDS:
        if keyword not in schema:
            continue
        mapping = schema[keyword]
        if not isinstance(mapping, Mapping):
            raise _fail((*path, keyword), f"expected an object, got {describe(mapping)}")
        for name, subschema in mapping.items():
            if keyword == "patternProperties":
                _check_pattern(name, (*path, keyword, name))
            _check(root, subschema, (*path, keyword, name), seen)
    for keyword in SCHEMA_LIST_KEYWORDS:
        if keyword not in schema:
            continue
        options = schema[keyword]
        if not isinstance(options, list) or (not options and keyword != "prefixItems"):
            raise _fail((*path, keyword), f"expected a non-empty array of schemas, got {options!r}")
        for index, subschema in enumerate(options):
            _check(root, subschema, (*path, keyword, index), seen)


def _check_type(declared: Any, path: Path) -> None:
    names = declared if isinstance(declared, list) else [declared]
    if not names:
        raise _fail(path, "expected a type name or a non-empty list of them, got []")
    for name in names:
        if not isinstance(name, str):
            raise _fail(path, f"expected a type name, got {describe(name)}")
        if name not in JSON_TYPES:
            hint = _TYPE_HINTS.get(name.lower())
            suggestion = f" (did you mean {hint!r}?)" if hint else ""
            raise _fail(
                path,
                f"unknown type {name!r}{suggestion}; expected one of {', '.join(JSON_TYPES)}",
            )
    if len(set(names)) != len(names):
        raise _fail(path, f"type names must be distinct, got {declared!r}")


def _check_pattern(pattern: Any, path: Path) -> None:
    if not isinstance(pattern, str):
        raise _fail(path, f"expected a regular expression string, got {describe(pattern)}")
    try:
        re.compile(pattern)
    except re.error as error:
        raise _fail(path, f"invalid regular expression {pattern!r}: {error}") from None
