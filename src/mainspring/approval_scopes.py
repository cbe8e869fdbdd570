"""What a remembered approval covers beyond the exact call: an argument's prefix or glob.

An allowed approval is remembered, by default, for the exact arguments of the call. A
broader scope is asked for explicitly (``Approval(True, remember="prefix", argument=...,
pattern=...)`` or ``remember="glob"``) and narrows one string argument; every *other*
argument of a later call must equal the approved call's. The matching rules, stated once:

- **prefix**: the value starts with ``pattern`` and what follows is only plain words:
  letters, digits, spaces and ``_ . / : = @ % + , -``. A shell command approved by the
  prefix ``git push origin `` thus covers ``git push origin feature`` but never
  ``git push origin feature; scp -r ~/.ssh host:`` nor a second line.
- **glob**: the value is a path matching ``pattern`` segment by segment (``/``
  separates): ``*``, ``?`` and ``[...]`` match within one segment, a ``**`` segment any
  number of segments. A value with a ``..`` segment or a control character never matches.
  The path is matched as text: where a symbolic link under the glob leads is the tool's
  business (the coding tools confine paths to their workspace).

Arguments are compared as JSON (:func:`same_arguments`): ``true`` is not ``1``, nor ``1.0``
``1``, as Python's ``==`` would have it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal, final

__all__ = ["ArgumentScope", "ScopeKind", "has_control_characters", "same_arguments"]

ScopeKind = Literal["prefix", "glob"]

_PLAIN_WORDS = re.compile(r"[A-Za-z0-9_./:=@%+, -]*")
"""What may follow an approved prefix."""


def same_arguments(first: Any, second: Any) -> bool:
    """Whether two (thawed) argument values are the same JSON: types count."""

    def canonical(value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)

    try:
        return canonical(first) == canonical(second)
    except (TypeError, ValueError):  # a cycle, or keys that cannot be sorted
        return False


def has_control_characters(text: str) -> bool:
    """Whether ``text`` holds a control, format or line/paragraph separator character."""
    return any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text)


def _glob_segments_match(pattern: list[str], value: list[str]) -> bool:
    if not pattern:
        return not value
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_glob_segments_match(rest, value[i:]) for i in range(len(value) + 1))
    return bool(value) and fnmatchcase(value[0], head) and _glob_segments_match(rest, value[1:])


def glob_matches(pattern: str, value: str) -> bool:
    """Whether the path ``value`` matches ``pattern`` (see the module for the rules)."""
    segments = value.split("/")
    if ".." in segments or has_control_characters(value):
        return False
    return _glob_segments_match(pattern.split("/"), segments)


def prefix_matches(prefix: str, value: str) -> bool:
    """Whether ``value`` is ``prefix`` followed only by plain words (see the module)."""
    return value.startswith(prefix) and _PLAIN_WORDS.fullmatch(value[len(prefix) :]) is not None


@final
@dataclass(frozen=True, slots=True)
class ArgumentScope:
    """Later calls whose ``argument`` matches ``pattern``, other arguments as ``others``.

    ``others`` are the approved call's (thawed) arguments without ``argument``.
    """

    kind: ScopeKind
    argument: str
    pattern: str
    others: dict[str, Any]

    def __post_init__(self) -> None:
        if self.kind not in ("prefix", "glob"):
            raise ValueError(f'a scope is "prefix" or "glob", not {self.kind!r}')
        if not isinstance(self.argument, str) or not isinstance(self.pattern, str):
            raise TypeError("a scope's argument and pattern are strings")
        if not self.pattern:
            raise ValueError("a scope's pattern must not be empty")
        if not isinstance(self.others, dict):
            raise TypeError("a scope's other arguments are a mapping")

    @classmethod
    def of_call(cls, kind: ScopeKind, argument: str, pattern: str, arguments: Any) -> ArgumentScope:
        """The scope for the approved call's (thawed) ``arguments``.

        Raises ``ValueError`` unless ``argument`` is a string argument of the call that
        the scope covers: an approver cannot remember a scope its own call is outside of.
        """
        if not isinstance(arguments, dict) or not isinstance(arguments.get(argument), str):
            raise ValueError(f"the call has no string argument {argument!r} to scope")
        others = {k: v for k, v in arguments.items() if k != argument}
        scope = cls(kind, argument, pattern, others)
        if not scope.matches(arguments[argument]):
            raise ValueError(f"the call's {argument} is outside the {kind} {pattern!r}")
        return scope

    def matches(self, value: str) -> bool:
        """Whether the scoped argument's ``value`` is covered."""
        if self.kind == "prefix":
            return prefix_matches(self.pattern, value)
        return glob_matches(self.pattern, value)

    def covers(self, arguments: Any) -> bool:
        """Whether a later call's (thawed) ``arguments`` are covered."""
        if not isinstance(arguments, dict):
            return False
        value = arguments.get(self.argument)
        others = {k: v for k, v in arguments.items() if k != self.argument}
        return (
            isinstance(value, str) and same_arguments(others, self.others) and self.matches(value)
        )

    def describe(self) -> str:
        """What is covered, in words."""
        if self.kind == "prefix":
            rule = f"starts with {self.pattern!r} followed only by plain words"
        else:
            rule = f"is a path matching {self.pattern!r}"
        return f"calls whose {self.argument} {rule}, other arguments exactly as now"
