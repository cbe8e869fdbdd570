"""JSON-Schema validation for tools whose parameters are a plain schema dict.

Validation is done by :mod:`jsonschema` (``Draft202012Validator``, or the draft a
schema's ``$schema`` names); this module compiles each schema once and turns the
validator's errors into readable problems. :func:`schema_problems` checks a JSON value
against a schema and returns one problem per failure, each naming where (a dotted path
such as ``items.2.name``, or ``(root)`` for the value itself) and why
(``expected string, got integer (5)``). An empty list means the value is valid.
:func:`check_schema` rejects a schema that cannot be used at all, so a broken tool fails
when it is built rather than when it is called.

Beyond the standard:

- schemas without ``$schema`` are draft 2020-12, but the older spellings tool schemas
  still use are read as their authors meant: the draft-4 boolean
  ``exclusiveMinimum``/``exclusiveMaximum``, the draft-7 array form of ``items`` with
  ``additionalItems``, and draft-3 ``"required": true`` (ignored);
- ``multipleOf`` is decided in decimal arithmetic, so ``0.3`` is a multiple of ``0.1``;
- ``format`` is not asserted (it is an annotation in draft 2020-12);
- ``$ref`` must point inside the document (``#``, ``#/$defs/...``, ``#/definitions/...``);
- with ``linear_regex=True`` (for schemas from untrusted sources), ``pattern`` and
  ``patternProperties`` are matched by RE2 (``google-re2``), whose time is linear in the
  input, and a schema whose patterns RE2 cannot compile is unusable.

Alternatives that all fail (``anyOf``/``oneOf``) are explained by the ones that got
furthest: ``expected integer or null``, or the closest option's own problems. A schema
is treated as immutable once it has been used: compiled validators are cached by
identity.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from ._schema_check import (
    JSON_TYPES,
    SCHEMA_KEYWORDS,
    SCHEMA_LIST_KEYWORDS,
    SCHEMA_MAP_KEYWORDS,
    Path,
    check_structure,
    structure_problem,
)
from ._schema_text import (
    Problem,
    Rendering,
    describe,
    render,
)

__all__ = ["JSON_TYPES", "check_schema", "schema_problems"]

# keywords whose ``false`` has a message of its own
_CLOSING_KEYWORDS: Final = frozenset(
    {"additionalItems", "additionalProperties", "unevaluatedItems", "unevaluatedProperties"}
)
# the keyword order errors are reported in: the value's type first, then what is missing
_FIRST: Final = {"type": 0, "required": 1}


def _multiple_of(validator: Validator, step: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "number") or isinstance(step, bool):
        return
    if isinstance(instance, int) and isinstance(step, int):
        fits = instance % step == 0
    else:
        try:
            fits = Decimal(str(instance)) % Decimal(str(step)) == 0
        except InvalidOperation:
            quotient = instance / step
            fits = quotient != quotient or quotient in (float("inf"), float("-inf"))
            fits = fits or float(quotient).is_integer()
    if not fits:
        yield ValidationError(f"{instance!r} is not a multiple of {step}")


def _is_array(_checker: Any, value: Any) -> bool:
    return isinstance(value, list | tuple)


def _upgrade(schema: Any, modern: bool) -> Any:
    """A copy of ``schema`` with keys in reporting order and old spellings rewritten."""
    if not isinstance(schema, Mapping):
        return schema
    out = dict(sorted(schema.items(), key=lambda item: _FIRST.get(item[0], 2)))
    for keyword in SCHEMA_KEYWORDS:
        if keyword in out:
            keep = keyword in _CLOSING_KEYWORDS
            out[keyword] = _upgrade(out[keyword], modern) if keep else _sub(out[keyword], modern)
    for keyword in SCHEMA_MAP_KEYWORDS:
        if isinstance(out.get(keyword), Mapping):
            out[keyword] = {k: _sub(v, modern) for k, v in out[keyword].items()}
    for keyword in SCHEMA_LIST_KEYWORDS:
        if isinstance(out.get(keyword), list):
            out[keyword] = [_sub(v, modern) for v in out[keyword]]
    items = out.get("items")
    if modern and isinstance(items, list):
        out["prefixItems"] = [_sub(v, modern) for v in items]
        rest = out.pop("additionalItems", None)
        if rest is None:
            del out["items"]
        else:
            out["items"] = rest
    elif "items" in out:
        out["items"] = _upgrade(items, modern)
    if modern:
        for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if isinstance(out.get(exclusive), bool) and out.pop(exclusive) and bound in out:
                out[exclusive] = out.pop(bound)
        if isinstance(out.get("required"), bool):
            del out["required"]
    return out


def _sub(schema: Any, modern: bool) -> Any:
    # jsonschema reports a ``false`` subschema without the path to it; ``not: {}`` says
    # the same and keeps the path
    return {"not": {}} if schema is False else _upgrade(schema, modern)


def _linear(pattern: str) -> Any:
    """``pattern`` compiled by RE2; ``ValueError`` if RE2 cannot compile it."""
    import re2  # type: ignore[import-untyped]

    found = _LINEAR.get(pattern)
    if found is None:
        options = re2.Options()
        options.log_errors = False
        try:
            found = re2.compile(pattern, options)
        except re2.error as error:
            why = error.args[0] if error.args else error
            why = why.decode(errors="replace") if isinstance(why, bytes) else why
            raise ValueError(f"RE2 cannot compile the pattern {pattern!r}: {why}") from None
        if len(_LINEAR) >= _CACHE_SIZE:
            _LINEAR.clear()
        _LINEAR[pattern] = found
    return found


def _linear_pattern(
    validator: Validator, pattern: str, instance: Any, schema: Any
) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _linear(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _linear_pattern_properties(
    validator: Validator, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = _linear(pattern)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(  # type: ignore[attr-defined]
                    value, subschema, path=key, schema_path=pattern
                )


def _patterns(schema: Any) -> Iterator[str]:
    """Every ``pattern`` and ``patternProperties`` key of ``schema`` (values left out)."""
    if isinstance(schema, Mapping):
        if isinstance(schema.get("pattern"), str):
            yield schema["pattern"]
        for key, value in schema.items():
            if key == "patternProperties" and isinstance(value, Mapping):
                yield from (name for name in value if isinstance(name, str))
            if key not in ("enum", "const", "default", "examples"):
                yield from _patterns(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _patterns(value)


class _Compiled:
    """One schema, compiled: a validator and what to report if it cannot be used."""

    __slots__ = ("broken", "schema", "validator")

    def __init__(self, schema: Mapping[str, Any] | bool, linear_regex: bool) -> None:
        self.schema = schema  # kept so the cache key (its id) stays valid
        self.broken: str | None = None
        base = validators.validator_for(schema, default=Draft202012Validator)
        modern = base is Draft202012Validator or base.__name__ == "Draft201909Validator"
        checker = base.TYPE_CHECKER.redefine("array", _is_array)
        keywords: dict[str, Any] = {"multipleOf": _multiple_of}
        if linear_regex:
            keywords["pattern"] = _linear_pattern
            keywords["patternProperties"] = _linear_pattern_properties
        cls = validators.extend(  # type: ignore[no-untyped-call]
            base, keywords, type_checker=checker
        )
        upgraded = _upgrade(schema, modern)
        self.validator: Validator = cls(upgraded)
        if isinstance(schema, Mapping):
            self.broken = structure_problem(schema)
            if self.broken is None and linear_regex:
                try:
                    for pattern in _patterns(schema):
                        _linear(pattern)
                except ValueError as error:
                    self.broken = str(error)
            if self.broken is None:
                try:
                    base.check_schema(upgraded)
                except SchemaError as error:
                    self.broken = f"invalid JSON schema: {_schema_error(error)}"

    def problems(self, value: Any) -> list[str]:
        if self.broken is not None:
            return [f"(root): schema error: {self.broken}"]
        try:
            errors = list(self.validator.iter_errors(value))
        except Unresolvable as error:
            return [f"(root): schema error: cannot resolve $ref: {error}"]
        except RecursionError:
            return ["(root): schema error: the schema refers to itself without end"]
        return [render(problem) for problem in _explain(errors, self.validator)]


_CACHE: OrderedDict[tuple[int, bool], _Compiled] = OrderedDict()
_CACHE_SIZE: Final = 512
_LINEAR: dict[str, Any] = {}


def _compiled(schema: Mapping[str, Any] | bool, linear_regex: bool = False) -> _Compiled:
    key = (id(schema), linear_regex)
    found = _CACHE.get(key)
    if found is not None and found.schema is schema:
        _CACHE.move_to_end(key)
        return found
    found = _Compiled(schema, linear_regex)
    _CACHE[key] = found
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return found


def schema_problems(
    schema: Mapping[str, Any] | bool, value: Any, *, linear_regex: bool = False
) -> list[str]:
    """Check ``value`` against the JSON Schema ``schema``.

    Returns one message per problem, ``"<path>: <why>"``; ``[]`` means ``value`` is
    valid. Never raises for a bad value; a schema that cannot be used (a ``$ref`` that
    does not resolve, a malformed keyword) is reported as one ``(root): schema error:``
    problem (call :func:`check_schema` first to catch it). The schema is compiled on
    first use and the compiled form reused while the same object is passed. Raises
    ``TypeError`` if ``schema`` is neither a mapping nor a boolean. ``linear_regex``: see
    the module docs.
    """
    if not isinstance(schema, Mapping | bool):
        raise TypeError(f"a JSON schema must be an object or a boolean, got {describe(schema)}")
    return _compiled(schema, linear_regex).problems(value)


def check_schema(schema: Any, *, linear_regex: bool = False) -> None:
    """Raise ``ValueError`` if ``schema`` cannot serve as a tool's parameter schema.

    The root must be a dict. Every place that holds a subschema must hold an object or a
    boolean; ``type`` must be a known type name (with a hint for ``str``, ``int``...) or a
    non-empty list of distinct ones; ``pattern`` and ``patternProperties`` keys must
    compile; a ``$ref`` must point inside the document and resolve, and a chain of
    ``$ref`` must not loop; every other keyword must be well formed for its draft (the
    draft's meta-schema). ``linear_regex``: see the module docs.
    """
    check_structure(schema)
    broken = _compiled(schema, linear_regex).broken
    if broken is not None:
        raise ValueError(broken)


def _schema_error(error: SchemaError) -> str:
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"


def _explain(errors: list[ValidationError], validator: Validator) -> list[Problem]:
    """Readable problems for the errors of one validation, in reporting order."""
    typed = {(id(e.schema), tuple(e.absolute_path)) for e in errors if e.validator == "type"}
    problems: list[Problem] = []
    required_done: set[int] = set()
    for error in errors:
        where = (id(error.schema), tuple(error.absolute_path))
        if error.validator != "type" and where in typed:
            continue  # the value's type is wrong: nothing else about it is worth saying
        if error.validator == "required":
            if id(error.schema) not in required_done:
                required_done.add(id(error.schema))
                problems += _missing(error)
            continue
        problems += Rendering(error, validator, _explain).problems()
    return problems


def _missing(error: ValidationError) -> list[Problem]:
    path: Path = tuple(error.absolute_path)
    names = error.validator_value if isinstance(error.validator_value, list) else []
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    return [
        Problem((*path, name), "missing required property")
        for name in names
        if isinstance(name, str) and name not in instance
    ]
