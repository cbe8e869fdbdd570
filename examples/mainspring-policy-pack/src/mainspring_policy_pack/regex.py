"""Compiling the policy's regular expressions with RE2, which matches in linear time.

Every deny rule and redaction pattern runs on text a model can choose (a command, a tool's
output), so none may backtrack: a pattern is compiled with RE2 (the ``google-re2``
binding, module ``re2``), whose matching time is linear in the input whatever the pattern.

Patterns are written in RE2 syntax, which is Python ``re`` syntax less the constructs that
need backtracking. :func:`compile_pattern` translates the Python spellings that have an
RE2 equivalent:

- the verbose flag ``(?x)`` (leading, alone or with other flags): whitespace and ``#``
  comments outside character classes are removed, ``\\ `` and ``\\#`` kept as characters;
- ``\\Z`` (end of text) becomes RE2's ``\\z``;
- possessive quantifiers (``*+``, ``++``, ``?+``, ``{m,n}+``) and atomic groups
  (``(?>...)``) become ordinary ones: without backtracking they mean nothing more.

and refuses, with a :class:`PatternError` naming the construct, what RE2 cannot express:
lookahead and lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), backreferences (``\\1``,
``(?P=name)``) and conditionals (``(?(name)...)``).
"""

from __future__ import annotations

import re
from typing import Any

import re2

__all__ = ["Pattern", "PatternError", "compile_pattern", "translate"]

Pattern = Any
"""A compiled RE2 pattern (``re2._Regexp``): ``search``, ``finditer``, ``groupindex``."""


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message says which construct and why."""


_UNSUPPORTED = (
    ("(?=", "a lookahead (?=...)"),
    ("(?!", "a negative lookahead (?!...)"),
    ("(?<=", "a lookbehind (?<=...)"),
    ("(?<!", "a negative lookbehind (?<!...)"),
    ("(?P=", "a backreference (?P=name)"),
    ("(?(", "a conditional group (?(...)...)"),
)
_LEADING_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20  # room for the DFA on large inputs before the slower NFA
    return options


_OPTIONS = _options()


def translate(pattern: str) -> str:
    """``pattern`` rewritten in RE2 syntax (see the module docs); raises
    :class:`PatternError` for a construct RE2 cannot express."""
    verbose = False
    flags = _LEADING_FLAGS.match(pattern)
    if flags and "x" in flags.group(1):
        verbose = True
        rest = flags.group(1).replace("x", "")
        pattern = (f"(?{rest})" if rest else "") + pattern[flags.end() :]
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            following = pattern[i + 1]
            if following.isdigit() and following != "0" and not in_class:
                raise PatternError(f"a backreference \\{following} is not supported by RE2")
            if following == "Z" and not in_class:
                out.append("\\z")
            elif verbose and following in " #":
                out.append("\\x20" if following == " " else "\\x23")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            out.append(char)
            i += 1
            continue
        if char == "[":
            in_class = True
            out.append(char)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":  # a leading ] is a literal
                out.append("]")
                i += 1
            continue
        if verbose and char.isspace():
            i += 1
            continue
        if verbose and char == "#":
            while i < n and pattern[i] != "\n":
                i += 1
            continue
        if char == "(":
            for opener, what in _UNSUPPORTED:
                if pattern.startswith(opener, i):
                    raise PatternError(f"{what} is not supported by RE2 (linear-time matching)")
            if pattern.startswith("(?>", i):
                out.append("(?:")
                i += 3
                continue
        if char == "+" and out and out[-1] in ("*", "+", "?", "}") and not _escaped(out):
            i += 1  # possessive: a linear engine has nothing to give back
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _escaped(out: list[str]) -> bool:
    """Whether the last emitted quantifier character was itself a possessive ``+``'s
    target escaped (``\\*`` etc. are emitted as one two-character token, so no)."""
    return len(out[-1]) != 1


def compile_pattern(pattern: str) -> Pattern:
    """``pattern`` translated (:func:`translate`) and compiled with RE2; raises
    :class:`PatternError` with RE2's reason when it does not compile."""
    translated = translate(pattern)
    try:
        return re2.compile(translated, _OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(f"RE2 cannot compile it: {reason}") from None
