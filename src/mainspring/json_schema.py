"""JSON-Schema validation for tools whose parameters are a plain schema dict.

:func:`schema_problems` checks a JSON value against a schema and returns one readable
problem per failure, each naming where (a dotted path such as ``items.2.name``, or
``(root)`` for the value itself) and why (``expected string, got integer (5)``). An
empty list means the value is valid. :func:`check_schema` rejects a schema that cannot
be used at all, so a broken tool fails when it is built rather than when it is called.

Supported (draft 2020-12, plus the older spellings tool schemas still use):

- ``type`` (a name or a list of names; ``integer`` also matches floats without a
  fractional part; booleans are never numbers), ``enum``, ``const`` (JSON equality:
  ``1 == 1.0`` but ``true != 1``);
- ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` (numbers, or the
  draft-4 booleans), ``multipleOf``;
- ``minLength``, ``maxLength`` (in code points), ``pattern`` (``re.search``, unanchored);
- ``items``, ``prefixItems`` (and the draft-7 array form of ``items`` with
  ``additionalItems``), ``minItems``, ``maxItems``, ``uniqueItems``, ``contains`` with
  ``minContains``/``maxContains``;
- ``properties``, ``required``, ``additionalProperties`` (boolean or schema),
  ``patternProperties``, ``propertyNames``, ``minProperties``, ``maxProperties``;
- ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``;
- ``$ref`` to a JSON pointer inside the same document (``#``, ``#/$defs/...``,
  ``#/definitions/...``), applied alongside its sibling keywords.

Every other keyword (``format``, ``default``, ``title``, ``description``,
``discriminator``, ...) is ignored, as is a known keyword whose value is malformed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final
from urllib.parse import unquote

__all__ = ["JSON_TYPES", "check_schema", "schema_problems"]

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

_SHOW_LIMIT: Final = 60
_LIST_LIMIT: Final = 10

_Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _Problem:
    """One failure. ``expected`` and ``got`` are set when the value has the wrong type
    (``kind="type"``) or is not an allowed constant (``kind="value"``); combinators use
    them to merge alternatives into one message."""

    path: _Path
    message: str
    kind: str = "other"
    expected: str | None = None
    got: str = ""


def _mismatch(path: _Path, kind: str, expected: str, got: str) -> _Problem:
    return _Problem(path, f"expected {expected}, got {got}", kind, expected, got)


def _render_path(path: _Path) -> str:
    return ".".join(str(part) for part in path) if path else "(root)"


def _render(problem: _Problem) -> str:
    return f"{_render_path(problem.path)}: {problem.message}"


def _show(value: Any) -> str:
    """``value`` as compact JSON, shortened to a readable length."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > _SHOW_LIMIT:
        text = text[: _SHOW_LIMIT - 3] + "..."
    return text


def _json_type(value: Any) -> str:
    """The JSON type name of ``value`` (for messages), or its Python type name."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _describe(value: Any) -> str:
    return f"{_json_type(value)} ({_show(value)})"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_array(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _has_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return _is_number(value)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return _is_array(value)
    if name == "object":
        return isinstance(value, Mapping)
    return False


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: numbers by value, booleans apart from numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if _is_array(a) and _is_array(b):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[key], b[key]) for key in a)
    if _is_number(a) or _is_number(b) or _is_array(a) or _is_array(b):
        return False
    return bool(a == b) and _json_type(a) == _json_type(b)


def _canonical(value: Any) -> Any:
    """A hashable key such that equal keys mean :func:`_json_equal` values."""
    if isinstance(value, bool):
        return ("boolean", value)
    if _is_number(value):
        return ("number", value)
    if _is_array(value):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, Mapping):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("unhashable", id(value))
    return (_json_type(value), value)


def _number(schema: Mapping[str, Any], key: str) -> int | float | None:
    found = schema.get(key)
    return found if _is_number(found) else None


def _count(schema: Mapping[str, Any], key: str) -> int | None:
    found = schema.get(key)
    if isinstance(found, int) and not isinstance(found, bool) and found >= 0:
        return found
    return None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` matches somewhere in ``text``; ``None`` if it does not compile."""
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return None


def _is_multiple(value: int | float, step: int | float) -> bool:
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    try:
        return Decimal(str(value)) % Decimal(str(step)) == 0
    except InvalidOperation:
        quotient = value / step
        return quotient == quotient and (abs(quotient) == float("inf") or quotient.is_integer())


_MISSING: Final = object()


def _resolve(root: Any, ref: str) -> Any:
    """The subschema ``ref`` points to inside ``root``, or ``_MISSING``."""
    if not ref.startswith("#"):
        return _MISSING
    pointer = unquote(ref[1:])
    if pointer and not pointer.startswith("/"):
        return _MISSING
    node = root
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    if isinstance(node, Mapping | bool):
        return node
    return _MISSING


class _Validator:
    """Validates values against subschemas of one root document."""

    def __init__(self, root: Mapping[str, Any] | bool) -> None:
        self.root = root
        self._active_refs: set[tuple[str, _Path]] = set()

    def validate(self, schema: Any, value: Any, path: _Path) -> list[_Problem]:
        if schema is False:
            return [_Problem(path, f"no value is allowed here, got {_describe(value)}")]
        if not isinstance(schema, Mapping):
            return []
        return self._keywords(schema, value, path)

    def _keywords(self, schema: Mapping[str, Any], value: Any, path: _Path) -> list[_Problem]:
        type_problem = self._type(schema, value, path)
        if type_problem is not None:
            return [type_problem]
        problems: list[_Problem] = []
        problems += self._ref(schema, value, path)
        problems += self._constants(schema, value, path)
        if _is_number(value):
            problems += self._numeric(schema, value, path)
        elif isinstance(value, str):
            problems += self._string(schema, value, path)
        elif _is_array(value):
            problems += self._array(schema, value, path)
        elif isinstance(value, Mapping):
            problems += self._object(schema, value, path)
        problems += self._combinators(schema, value, path)
        return problems

    def is_valid(self, schema: Any, value: Any, path: _Path) -> bool:
        return not self.validate(schema, value, path)

    # -- keywords -------------------------------------------------------------------

    def _type(self, schema: Mapping[str, Any], value: Any, path: _Path) -> _Problem | None:
        declared = schema.get("type")
        if isinstance(declared, str):
            names = [declared]
        elif isinstance(declared, list) and all(isinstance(name, str) for name in declared):
            names = list(declared)
        else:
            return None
        if any(_has_type(value, name) for name in names):
            return None
        expected = _alternatives(names)
        return _mismatch(path, "type", expected, _describe(value))

    def _ref(self, schema: Mapping[str, Any], value: Any, path: _Path) -> list[_Problem]:
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return []
        key = (ref, path)
        if key in self._active_refs:
            return [_Problem(path, f"schema error: $ref {ref!r} refers to itself")]
        target = _resolve(self.root, ref)
        if target is _MISSING:
            return [_Problem(path, f"schema error: cannot resolve $ref {ref!r}")]
        self._active_refs.add(key)
        try:
            return self.validate(target, value, path)
        finally:
            self._active_refs.discard(key)

    def _constants(self, schema: Mapping[str, Any], value: Any, path: _Path) -> list[_Problem]:
        problems = []
        if "const" in schema and not _json_equal(schema["const"], value):
            expected = _show(schema["const"])
            problems.append(_mismatch(path, "value", expected, _describe(value)))
        options = schema.get("enum")
        if isinstance(options, list) and not any(_json_equal(o, value) for o in options):
            shown = [_show(option) for option in options[:_LIST_LIMIT]]
            if len(options) > _LIST_LIMIT:
                shown.append("...")
            expected = shown[0] if len(options) == 1 else "one of " + ", ".join(shown)
            problems.append(_mismatch(path, "value", expected, _describe(value)))
        return problems

    def _numeric(
        self, schema: Mapping[str, Any], value: int | float, path: _Path
    ) -> list[_Problem]:
        problems = []
        bounds: list[tuple[str, int | float, bool]] = []
        minimum, maximum = _number(schema, "minimum"), _number(schema, "maximum")
        # Draft 4 spells exclusive bounds as booleans modifying minimum/maximum.
        if minimum is not None:
            bounds.append((">", minimum, schema.get("exclusiveMinimum") is True))
        if maximum is not None:
            bounds.append(("<", maximum, schema.get("exclusiveMaximum") is True))
        exclusive_min = _number(schema, "exclusiveMinimum")
        exclusive_max = _number(schema, "exclusiveMaximum")
        if exclusive_min is not None:
            bounds.append((">", exclusive_min, True))
        if exclusive_max is not None:
            bounds.append(("<", exclusive_max, True))
        for direction, limit, exclusive in bounds:
            if direction == ">":
                ok = value > limit if exclusive else value >= limit
            else:
                ok = value < limit if exclusive else value <= limit
            if not ok:
                operator = direction if exclusive else direction + "="
                problems.append(
                    _Problem(path, f"must be {operator} {_show(limit)}, got {_show(value)}")
                )
        step = _number(schema, "multipleOf")
        if step is not None and step > 0 and not _is_multiple(value, step):
            problems.append(
                _Problem(path, f"must be a multiple of {_show(step)}, got {_show(value)}")
            )
        return problems

    def _string(self, schema: Mapping[str, Any], value: str, path: _Path) -> list[_Problem]:
        problems = []
        shortest, longest = _count(schema, "minLength"), _count(schema, "maxLength")
        if shortest is not None and len(value) < shortest:
            problems.append(
                _Problem(
                    path,
                    f"must be at least {_plural(shortest, 'character')} long, got {len(value)}",
                )
            )
        if longest is not None and len(value) > longest:
            problems.append(
                _Problem(
                    path, f"must be at most {_plural(longest, 'character')} long, got {len(value)}"
                )
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and _search(pattern, value) is False:
            problems.append(
                _Problem(path, f"must match pattern {_show(pattern)}, got {_show(value)}")
            )
        return problems

    def _array(
        self, schema: Mapping[str, Any], value: Sequence[Any], path: _Path
    ) -> list[_Problem]:
        problems: list[_Problem] = []
        fewest, most = _count(schema, "minItems"), _count(schema, "maxItems")
        if fewest is not None and len(value) < fewest:
            problems.append(
                _Problem(path, f"must have at least {_plural(fewest, 'item')}, got {len(value)}")
            )
        if most is not None and len(value) > most:
            problems.append(
                _Problem(path, f"must have at most {_plural(most, 'item')}, got {len(value)}")
            )
        items = schema.get("items")
        if isinstance(items, list):
            prefix, rest = items, schema.get("additionalItems", True)
        else:
            declared = schema.get("prefixItems")
            prefix, rest = (declared if isinstance(declared, list) else []), items
        for index, (subschema, item) in enumerate(zip(prefix, value, strict=False)):
            problems += self.validate(subschema, item, (*path, index))
        if len(value) > len(prefix):
            if rest is False:
                problems.append(
                    _Problem(
                        path,
                        f"must have at most {_plural(len(prefix), 'item')}, got {len(value)}",
                    )
                )
            elif isinstance(rest, Mapping):
                for index in range(len(prefix), len(value)):
                    problems += self.validate(rest, value[index], (*path, index))
        if schema.get("uniqueItems") is True:
            seen: dict[Any, int] = {}
            for index, item in enumerate(value):
                key = _canonical(item)
                if key in seen:
                    problems.append(
                        _Problem(
                            path,
                            f"items must be unique, but items {seen[key]} and {index} are equal "
                            f"({_show(item)})",
                        )
                    )
                    break
                seen[key] = index
        problems += self._contains(schema, value, path)
        return problems

    def _contains(
        self, schema: Mapping[str, Any], value: Sequence[Any], path: _Path
    ) -> list[_Problem]:
        contains = schema.get("contains")
        if not isinstance(contains, Mapping | bool):
            return []
        matches = sum(self.is_valid(contains, item, (*path, i)) for i, item in enumerate(value))
        fewest = _count(schema, "minContains")
        fewest = 1 if fewest is None else fewest
        most = _count(schema, "maxContains")
        if matches < fewest:
            return [
                _Problem(
                    path,
                    f"must contain at least {_plural(fewest, 'item')} matching 'contains', "
                    f"got {matches}",
                )
            ]
        if most is not None and matches > most:
            return [
                _Problem(
                    path,
                    f"must contain at most {_plural(most, 'item')} matching 'contains', "
                    f"got {matches}",
                )
            ]
        return []

    def _object(
        self, schema: Mapping[str, Any], value: Mapping[Any, Any], path: _Path
    ) -> list[_Problem]:
        problems: list[_Problem] = []
        required = schema.get("required")
        if isinstance(required, list):
            for name in required:
                if isinstance(name, str) and name not in value:
                    problems.append(_Problem((*path, name), "missing required property"))
        fewest, most = _count(schema, "minProperties"), _count(schema, "maxProperties")
        if fewest is not None and len(value) < fewest:
            problems.append(
                _Problem(
                    path, f"must have at least {_plural(fewest, 'property')}, got {len(value)}"
                )
            )
        if most is not None and len(value) > most:
            problems.append(
                _Problem(path, f"must have at most {_plural(most, 'property')}, got {len(value)}")
            )
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        patterns = schema.get("patternProperties")
        patterns = patterns if isinstance(patterns, Mapping) else {}
        additional = schema.get("additionalProperties", True)
        names = schema.get("propertyNames")
        for key, item in value.items():
            where = (*path, key)
            known = key in properties
            if known:
                problems += self.validate(properties[key], item, where)
            for pattern, subschema in patterns.items():
                if isinstance(pattern, str) and _search(pattern, str(key)):
                    known = True
                    problems += self.validate(subschema, item, where)
            if not known:
                if additional is False:
                    problems.append(_Problem(where, _unexpected(properties)))
                else:
                    problems += self.validate(additional, item, where)
            if isinstance(names, Mapping | bool):
                for problem in self.validate(names, key, path):
                    problems.append(
                        _Problem(path, f"invalid property name {_show(key)}: {problem.message}")
                    )
        return problems

    def _combinators(self, schema: Mapping[str, Any], value: Any, path: _Path) -> list[_Problem]:
        problems: list[_Problem] = []
        every = schema.get("allOf")
        if isinstance(every, list):
            for subschema in every:
                problems += self.validate(subschema, value, path)
        for keyword in ("anyOf", "oneOf"):
            options = schema.get(keyword)
            if not isinstance(options, list) or not options:
                continue
            outcomes = [self.validate(option, value, path) for option in options]
            passed = [index for index, found in enumerate(outcomes) if not found]
            if not passed:
                problems += _none_matched(keyword, outcomes, path)
            elif keyword == "oneOf" and len(passed) > 1:
                listed = ", ".join(str(index) for index in passed)
                problems.append(
                    _Problem(
                        path,
                        f"must match exactly one oneOf option, but matches options {listed} "
                        f"(got {_show(value)})",
                    )
                )
        negated = schema.get("not")
        if isinstance(negated, Mapping | bool) and self.is_valid(negated, value, path):
            problems.append(
                _Problem(path, f"must not match the 'not' schema, got {_describe(value)}")
            )
        condition = schema.get("if")
        if isinstance(condition, Mapping | bool):
            branch = "then" if self.is_valid(condition, value, path) else "else"
            problems += self.validate(schema.get(branch, True), value, path)
        return problems


def _alternatives(phrases: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    unique = list(dict.fromkeys(phrases))
    if len(unique) == 1:
        return unique[0]
    return ", ".join(unique[:-1]) + " or " + unique[-1]


def _unexpected(properties: Mapping[str, Any]) -> str:
    if not properties:
        return "unexpected property (no properties are allowed)"
    names = [str(name) for name in list(properties)[:20]]
    if len(properties) > 20:
        names.append("...")
    return f"unexpected property (allowed: {', '.join(names)})"


def _rejection(problems: list[_Problem], path: _Path) -> tuple[int, _Problem | None]:
    """How early an alternative gave up on the value at ``path``.

    ``(0, None)``: it accepted the value's shape and failed somewhere inside it.
    ``(1, p)``: a property it needs to be a constant (a discriminator) is not.
    ``(2, p)``: the value itself has the wrong type or is not an allowed constant.
    """
    at_child = None
    for problem in problems:
        if problem.expected is None:
            continue
        if problem.path == path:
            return 2, problem
        if (
            at_child is None
            and problem.kind == "value"
            and len(problem.path) == len(path) + 1
            and problem.path[:-1] == path
        ):
            at_child = problem
    return (0, None) if at_child is None else (1, at_child)


def _none_matched(keyword: str, outcomes: list[list[_Problem]], path: _Path) -> list[_Problem]:
    """Explain why no alternative of ``anyOf``/``oneOf`` accepted the value.

    Only the alternatives that got furthest are considered (see :func:`_rejection`). If
    one is left, its own problems are the explanation; if all were rejected at the same
    place, their expectations merge (``expected integer or null``); otherwise each
    alternative's problems are listed.
    """
    rejections = [_rejection(found, path) for found in outcomes]
    best = min(rank for rank, _ in rejections)
    closest = [index for index, (rank, _) in enumerate(rejections) if rank == best]
    if len(closest) == 1:
        return outcomes[closest[0]]
    if best > 0:
        causes = [problem for index in closest if (problem := rejections[index][1]) is not None]
        if len({problem.path for problem in causes}) == 1:
            first = causes[0]
            kind = "type" if any(problem.kind == "type" for problem in causes) else "value"
            expected = _alternatives([problem.expected or "" for problem in causes])
            return [_mismatch(first.path, kind, expected, first.got)]
    details = " | ".join(
        f"option {index}: " + "; ".join(_render(problem) for problem in outcomes[index])
        for index in closest
    )
    return [_Problem(path, f"does not match any {keyword} option: {details}")]


def schema_problems(schema: Mapping[str, Any] | bool, value: Any) -> list[str]:
    """Check ``value`` against the JSON Schema ``schema``.

    Returns one message per problem, ``"<path>: <why>"``, in document order; ``[]``
    means ``value`` is valid. Never raises for a bad value; a ``$ref`` that cannot be
    resolved is reported as a problem (call :func:`check_schema` first to catch it).
    Raises ``TypeError`` if ``schema`` is neither a mapping nor a boolean.
    """
    if not isinstance(schema, Mapping | bool):
        raise TypeError(f"a JSON schema must be an object or a boolean, got {_describe(schema)}")
    return [_render(problem) for problem in _Validator(schema).validate(schema, value, ())]


_SCHEMA_KEYWORDS: Final = (
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
_SCHEMA_MAP_KEYWORDS: Final = (
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
)
_SCHEMA_LIST_KEYWORDS: Final = ("allOf", "anyOf", "oneOf", "prefixItems")


def check_schema(schema: Any) -> None:
    """Raise ``ValueError`` if ``schema`` cannot serve as a tool's parameter schema.

    The root must be a dict. Throughout the document: every place that holds a subschema
    (``properties`` values, ``items``, ``anyOf`` entries, ...) must hold an object or a
    boolean; ``type`` must be a known type name or a non-empty list of distinct ones;
    ``pattern`` and ``patternProperties`` keys must compile; a ``$ref`` must point inside
    the document and resolve. Other keywords are not checked (``schema_problems`` ignores
    a malformed value), so schemas written for older drafts keep working.
    """
    if not isinstance(schema, dict):
        raise ValueError(f"a tool's JSON schema must be a dict, got {_describe(schema)}")
    _check(schema, schema, (), set())


def _fail(path: _Path, why: str) -> ValueError:
    where = "/".join(str(part) for part in path) or "(root)"
    return ValueError(f"invalid JSON schema at {where}: {why}")


def _check(root: Mapping[str, Any], schema: Any, path: _Path, seen: set[int]) -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise _fail(path, f"expected a schema (object or boolean), got {_describe(schema)}")
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
            raise _fail((*path, "$ref"), f"expected a string, got {_describe(ref)}")
        if _resolve(root, ref) is _MISSING:
            raise _fail(
                (*path, "$ref"), f"cannot resolve {ref!r} (only '#/...' pointers are supported)"
            )
    for keyword in _SCHEMA_KEYWORDS:
        if keyword in schema:
            _check(root, schema[keyword], (*path, keyword), seen)
    items = schema.get("items")
    if isinstance(items, list):
        for index, subschema in enumerate(items):
            _check(root, subschema, (*path, "items", index), seen)
    elif "items" in schema:
        _check(root, items, (*path, "items"), seen)
    for keyword in _SCHEMA_MAP_KEYWORDS:
        if keyword not in schema:
            continue
        mapping = schema[keyword]
        if not isinstance(mapping, Mapping):
            raise _fail((*path, keyword), f"expected an object, got {_describe(mapping)}")
        for name, subschema in mapping.items():
            if keyword == "patternProperties":
                _check_pattern(name, (*path, keyword, name))
            _check(root, subschema, (*path, keyword, name), seen)
    for keyword in _SCHEMA_LIST_KEYWORDS:
        if keyword not in schema:
            continue
        options = schema[keyword]
        if not isinstance(options, list) or (not options and keyword != "prefixItems"):
            raise _fail((*path, keyword), f"expected a non-empty array of schemas, got {options!r}")
        for index, subschema in enumerate(options):
            _check(root, subschema, (*path, keyword, index), seen)


def _check_type(declared: Any, path: _Path) -> None:
    names = declared if isinstance(declared, list) else [declared]
    if not names:
        raise _fail(path, "expected a type name or a non-empty list of them, got []")
    for name in names:
        if not isinstance(name, str):
            raise _fail(path, f"expected a type name, got {_describe(name)}")
        if name not in JSON_TYPES:
            hint = _TYPE_HINTS.get(name.lower())
            suggestion = f" (did you mean {hint!r}?)" if hint else ""
            raise _fail(
                path,
                f"unknown type {name!r}{suggestion}; expected one of {', '.join(JSON_TYPES)}",
            )
    if len(set(names)) != len(names):
        raise _fail(path, f"type names must be distinct, got {declared!r}")


def _check_pattern(pattern: Any, path: _Path) -> None:
    if not isinstance(pattern, str):
        raise _fail(path, f"expected a regular expression string, got {_describe(pattern)}")
    try:
        re.compile(pattern)
    except re.error as error:
        raise _fail(path, f"invalid regular expression {pattern!r}: {error}") from None
