"""Model-chosen patterns, matched in linear time: ``grep``'s regex and glob.

Python's ``re`` backtracks: a pattern such as ``(a+)+$`` takes time exponential in the
length of the line, and holds the interpreter lock while it does, so the whole process
(the event loop, ``abort()``) freezes. ``grep`` therefore compiles patterns with RE2
(the ``google-re2`` binding), which matches in time linear in the input and releases the
interpreter lock while it matches.

RE2 syntax is Python's ``re`` syntax without the features that need backtracking. The
Python spellings RE2 lacks are translated (``\\Z`` → ``\\z``, ``{,n}`` → ``{0,n}``, ``(?#…)``
comments dropped); what has no linear-time equivalent is refused with a message saying
what to do instead: backreferences (``\\1``, ``(?P=name)``), lookahead and lookbehind
(``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups (``(?>``), conditionals
(``(?(1)…)``) and possessive quantifiers (``a*+``). Other differences: ``\\d``, ``\\w``,
``\\s`` and ``\\b`` are ASCII-only in RE2.

Globs (``*.py``, ``src/*.py``) are translated to RE2 too (``fnmatch`` compiles them with
``re``): ``*`` is any run of characters (``/`` included), ``?`` one character,
``[abc]``/``[!abc]`` a set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import re2

from .workspace import ToolFailure

__all__ = ["compile_glob", "compile_pattern"]

_MAX_MEMORY: Final = 32 << 20
"""Memory RE2 may use for one compiled pattern; a larger pattern is refused."""

_SYNTAX: Final = (
    "grep uses RE2 syntax, which matches in linear time: Python regex syntax without "
    "backreferences, lookaround, atomic groups, conditionals or possessive quantifiers"
)

_REFUSED_GROUPS: Final = (
    ("(?=", "lookahead (?=...)"),
    ("(?!", "negative lookahead (?!...)"),
    ("(?<=", "lookbehind (?<=...)"),
    ("(?<!", "negative lookbehind (?<!...)"),
    ("(?P=", "a named backreference (?P=name)"),
    ("(?>", "an atomic group (?>...)"),
    ("(?(", "a conditional (?(group)...)"),
)


def _unsupported(pattern: str, feature: str) -> ToolFailure:
    return ToolFailure(
        f"unsupported regular expression {pattern!r}: {feature} is not supported. "
        f"{_SYNTAX}; rewrite the pattern without it (a wider pattern, or several searches)."
    )


def _class_end(pattern: str, start: int) -> int:
    """The index just past the character class opening at ``start`` (or the end)."""
    index = start + 1
    if index < len(pattern) and pattern[index] == "^":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return min(index + 1, len(pattern))


def _translate(pattern: str) -> str:
    """``pattern`` in RE2 spelling; :class:`ToolFailure` for what RE2 cannot do."""
    out: list[str] = []
    index = 0
    size = len(pattern)
    while index < size:
        char = pattern[index]
        if char == "\\" and index + 1 < size:
            following = pattern[index + 1]
            if following in "123456789":
                raise _unsupported(pattern, f"a backreference (\\{following})")
            out.append("\\z" if following == "Z" else pattern[index : index + 2])
            index += 2
        elif char == "[":
            end = _class_end(pattern, index)
            out.append(pattern[index:end])
            index = end
        elif char == "(" and pattern.startswith("(?#", index):
            close = pattern.find(")", index)
            index = size if close == -1 else close + 1
        elif char == "(":
            for opening, feature in _REFUSED_GROUPS:
                if pattern.startswith(opening, index):
                    raise _unsupported(pattern, feature)
            out.append(char)
            index += 1
        elif char in "*+?}" and index + 1 < size and pattern[index + 1] == "+":
            raise _unsupported(pattern, f"a possessive quantifier ({char}+)")
        elif char == "{" and pattern.startswith("{,", index):
            out.append("{0,")
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _options(ignore_case: bool) -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True  # only "does the line match" is asked: the fastest engine
    options.case_sensitive = not ignore_case
    options.max_mem = _MAX_MEMORY
    return options


def compile_pattern(pattern: str, ignore_case: bool) -> Callable[[bytes], bool]:
    """A predicate telling whether a line (raw bytes, read as UTF-8) contains a match.

    :class:`ToolFailure` when the pattern is invalid or uses what RE2 does not support;
    the message names the problem and the syntax expected.
    """
    translated = _translate(pattern)
    try:
        compiled = re2.compile(translated, _options(ignore_case))
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ToolFailure(f"invalid regular expression {pattern!r}: {reason} ({_SYNTAX})") from None

    def matches(line: bytes) -> bool:
        return compiled.search(line) is not None

    return matches


def _glob_class(glob: str, start: int) -> tuple[str, int] | None:
    """The RE2 set for the glob bracket expression at ``start`` and the index past it,
    or ``None`` if the bracket is not closed (it is then a literal ``[``)."""
    index = start + 1
    negate = index < len(glob) and glob[index] in "!^"
    if negate:
        index += 1
    first = index
    while index < len(glob) and (glob[index] != "]" or index == first):
        index += 1
    if index >= len(glob):
        return None
    body = "".join(f"\\{c}" if c in "\\[]^" else c for c in glob[first:index])
    return f"[{'^' if negate else ''}{body}]", index + 1


def compile_glob(glob: str) -> Callable[[str], bool]:
    """A predicate telling whether a ``/``-separated path matches ``glob``: the whole path
    when ``glob`` has a ``/``, else its last component (case-sensitive)."""
    out: list[str] = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if char == "*":
            out.append(".*")
            index += 1
        elif char == "?":
            out.append(".")
            index += 1
        elif char == "[" and (found := _glob_class(glob, index)) is not None:
            out.append(found[0])
            index = found[1]
        else:
            out.append(re2.escape(char))
            index += 1
    options = _options(ignore_case=False)
    options.dot_nl = True
    try:
        compiled = re2.compile(f"(?s:{''.join(out)})", options)
    except re2.error as error:
        raise ToolFailure(f"invalid glob {glob!r}: {error}") from None
    whole_path = "/" in glob

    def matches(relative: str) -> bool:
        subject = relative if whole_path else relative.rsplit("/", 1)[-1]
        return compiled.fullmatch(subject) is not None

    return matches
