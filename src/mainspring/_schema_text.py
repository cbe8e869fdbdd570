"""Readable problems for :mod:`jsonschema` validation errors (see :mod:`mainspring.json_schema`).

Each error becomes one or more :class:`Problem` values: where (a path into the value) and
why, in words a model can act on (``expected integer, got string ("x")``,
``must be >= 1, got 0``, ``unexpected property (allowed: name, age)``). Type and constant
mismatches keep what was expected and what was got, so failed alternatives
(``anyOf``/``oneOf``) merge into one message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote

from jsonschema import ValidationError
from jsonschema.protocols import Validator

__all__ = [
    "MISSING",
    "Problem",
    "Rendering",
    "describe",
    "plural",
    "render",
    "render_path",
    "resolve",
    "show",
]

_SHOW_LIMIT: Final = 60
_LIST_LIMIT: Final = 10
_MAP_KEYWORDS: Final = ("properties", "patternProperties", "$defs", "definitions")

_Path = tuple[str | int, ...]
Explain = Callable[[list[ValidationError], Validator], "list[Problem]"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One failure. ``expected`` and ``got`` are set when the value has the wrong type
    (``kind="type"``) or is not an allowed constant (``kind="value"``); combinators use
    them to merge alternatives into one message."""

    path: _Path
    message: str
    kind: str = "other"
    expected: str | None = None
    got: str = ""


def _mismatch(path: _Path, kind: str, expected: str, got: str) -> Problem:
    return Problem(path, f"expected {expected}, got {got}", kind, expected, got)


def render_path(path: _Path) -> str:
    """``items.2.name``, or ``(root)`` for the empty path."""
    return ".".join(str(part) for part in path) if path else "(root)"


def render(problem: Problem) -> str:
    """``"<path>: <why>"``."""
    return f"{render_path(problem.path)}: {problem.message}"


def show(value: Any) -> str:
    """``value`` as compact JSON, shortened to a readable length."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > _SHOW_LIMIT:
        text = text[: _SHOW_LIMIT - 3] + "..."
    return text


def _json_type(value: Any) -> str:
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


def describe(value: Any) -> str:
    """``integer (5)``: the JSON type and the value."""
    return f"{_json_type(value)} ({show(value)})"


def plural(count: int, word: str) -> str:
    """``1 item``, ``2 items``, ``2 properties``."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word[:-1]}ies" if word.endswith("y") else f"{count} {word}s"


def _canonical(value: Any) -> Any:
    """A hashable key such that equal keys mean values JSON considers equal."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list | tuple):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, Mapping):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("unhashable", id(value))
    return (_json_type(value), value)


MISSING: Final = object()


def resolve(root: Any, ref: str) -> Any:
    """The subschema the ``#...`` pointer ``ref`` names inside ``root``, or ``MISSING``."""
    if not ref.startswith("#"):
        return MISSING
    pointer = unquote(ref[1:])
    if pointer and not pointer.startswith("/"):
        return MISSING
    node = root
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return MISSING
    return node if isinstance(node, Mapping | bool) else MISSING


def _alternatives(phrases: Sequence[str]) -> str:
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


_COMPARISONS: Final = {
    "minimum": ">=",
    "maximum": "<=",
    "exclusiveMinimum": ">",
    "exclusiveMaximum": "<",
}

_EXCLUSIVE: Final = {"minimum": "exclusiveMinimum", "maximum": "exclusiveMaximum"}


class Rendering:
    """The problems one :class:`jsonschema.ValidationError` stands for."""

    def __init__(self, error: ValidationError, validator: Validator, explain: Explain) -> None:
        self.error = error
        self.validator = validator
        self.explain = explain
        self.path: _Path = tuple(error.absolute_path)
        self.value: Any = error.instance
        self.expected: Any = error.validator_value
        self.schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}

    def problems(self) -> list[Problem]:
        error = self.error
        schema_path = list(error.relative_schema_path)
        for index in range(len(schema_path) - 1, -1, -1):
            if schema_path[index] == "propertyNames" and (
                index == 0 or schema_path[index - 1] not in _MAP_KEYWORDS
            ):
                inner = self._one()
                return [
                    Problem(self.path, f"invalid property name {show(error.instance)}: {p.message}")
                    for p in inner
                ]
        return self._one()

    def _one(self) -> list[Problem]:
        error, path, value = self.error, self.path, self.value
        keyword, expected, schema = error.validator, self.expected, self.schema
        if keyword is None or (keyword == "not" and expected == {}):
            return [Problem(path, f"no value is allowed here, got {describe(value)}")]
        if keyword == "type":
            names = expected if isinstance(expected, list) else [expected]
            return [
                _mismatch(path, "type", _alternatives([str(n) for n in names]), describe(value))
            ]
        if keyword == "const":
            return [_mismatch(path, "value", show(expected), describe(value))]
        if keyword == "enum":
            shown = [show(option) for option in list(expected)[:_LIST_LIMIT]]
            if len(expected) > _LIST_LIMIT:
                shown.append("...")
            wanted = shown[0] if len(shown) == 1 else "one of " + ", ".join(shown)
            return [_mismatch(path, "value", wanted, describe(value))]
        if keyword in ("minimum", "maximum") and schema.get(_EXCLUSIVE[keyword]) is True:
            keyword = _EXCLUSIVE[keyword]  # draft 4: a boolean makes the bound exclusive
        if keyword in _COMPARISONS:
            return [
                Problem(
                    path, f"must be {_COMPARISONS[keyword]} {show(expected)}, got {show(value)}"
                )
            ]
        if keyword == "multipleOf":
            return [Problem(path, f"must be a multiple of {show(expected)}, got {show(value)}")]
        if keyword in ("minLength", "maxLength"):
            bound = "at least" if keyword == "minLength" else "at most"
            length = len(value)
            return [
                Problem(path, f"must be {bound} {plural(expected, 'character')} long, got {length}")
            ]
        if keyword == "pattern":
            return [Problem(path, f"must match pattern {show(expected)}, got {show(value)}")]
        if keyword in ("minItems", "maxItems"):
            bound = "at least" if keyword == "minItems" else "at most"
            return [
                Problem(path, f"must have {bound} {plural(expected, 'item')}, got {len(value)}")
            ]
        if keyword in ("minProperties", "maxProperties"):
            bound = "at least" if keyword == "minProperties" else "at most"
            return [
                Problem(path, f"must have {bound} {plural(expected, 'property')}, got {len(value)}")
            ]
        if keyword in ("items", "additionalItems") and expected is False:
            prefix = schema.get("prefixItems", schema.get("items", []))
            fixed = len(prefix) if isinstance(prefix, list) else 0
            return [Problem(path, f"must have at most {plural(fixed, 'item')}, got {len(value)}")]
        if keyword == "uniqueItems":
            return self._unique()
        if keyword in ("contains", "minContains", "maxContains"):
            return self._contains()
        if keyword == "additionalProperties" and expected is False:
            return self._unexpected()
        if keyword in ("anyOf", "oneOf"):
            return self._alternatives(keyword)
        if keyword == "not":
            return [Problem(path, f"must not match the 'not' schema, got {describe(value)}")]
        return [Problem(path, error.message)]

    def _unique(self) -> list[Problem]:
        seen: dict[Any, int] = {}
        for index, item in enumerate(self.value):
            key = _canonical(item)
            if key in seen:
                return [
                    Problem(
                        self.path,
                        f"items must be unique, but items {seen[key]} and {index} are equal "
                        f"({show(item)})",
                    )
                ]
            seen[key] = index
        return [Problem(self.path, self.error.message)]

    def _contains(self) -> list[Problem]:
        schema = self.schema
        check = self.validator.evolve(schema=schema.get("contains", True))
        matches = sum(1 for item in self.value if check.is_valid(item))
        fewest, most = schema.get("minContains", 1), schema.get("maxContains")
        if matches < fewest:
            bound, count = "at least", fewest
        elif most is not None and matches > most:
            bound, count = "at most", most
        else:
            return [Problem(self.path, self.error.message)]
        return [
            Problem(
                self.path,
                f"must contain {bound} {plural(count, 'item')} matching 'contains', got {matches}",
            )
        ]

    def _unexpected(self) -> list[Problem]:
        schema = self.schema
        properties = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        return [
            Problem((*self.path, key), _unexpected(properties))
            for key in self.value
            if key not in properties and not any(re.search(p, key) for p in patterns)
        ]

    def _alternatives(self, keyword: str) -> list[Problem]:
        error, path = self.error, self.path
        options = self.expected
        if not error.context:
            passed = [
                index
                for index, option in enumerate(options)
                if self.validator.evolve(schema=option).is_valid(self.value)
            ]
            listed = ", ".join(str(index) for index in passed)
            return [
                Problem(
                    path,
                    f"must match exactly one oneOf option, but matches options {listed} "
                    f"(got {show(self.value)})",
                )
            ]
        grouped: list[list[ValidationError]] = [[] for _ in options]
        for sub in error.context:
            grouped[int(sub.relative_schema_path[0])].append(sub)
        outcomes = [self.explain(found, self.validator) for found in grouped]
        return _none_matched(keyword, outcomes, path)


def _rejection(problems: list[Problem], path: _Path) -> tuple[int, Problem | None]:
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


def _none_matched(keyword: str, outcomes: list[list[Problem]], path: _Path) -> list[Problem]:
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
        f"option {index}: " + "; ".join(render(problem) for problem in outcomes[index])
        for index in closest
    )
    return [Problem(path, f"does not match any {keyword} option: {details}")]
