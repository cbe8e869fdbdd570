"""Redacting text: applying the redaction rules, and the checks a match must pass.

A match of a :class:`~mainspring_policy_pack.config.RedactionRule` becomes
``[REDACTED:<kind>]``. When the pattern has groups named ``secret`` or ``secret_<...>``,
only the first of them that took part in the match is replaced (the rest of the match,
such as the key name, is kept). Rules apply in order, each to the output of the one
before. Every pattern is an RE2 pattern (:mod:`.regex`), so redacting takes time linear
in the text.

A rule's ``check`` filters its matches (the value checked is the secret group, or the
whole match):

- ``"assignment"``: :func:`plausible_value`, which leaves code and placeholders alone;
- ``"random"``: :func:`looks_random`, for shapes (such as a line of base64) that are
  secrets only when their characters are random.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from .config import RedactionRule

__all__ = ["MARKER_PREFIX", "TextRedactor", "looks_random", "plausible_value"]

MARKER_PREFIX = "[REDACTED:"
"""How every replacement starts (``[REDACTED:<kind>]``)."""

_CODE_WORDS = frozenset(
    {
        *("none", "null", "nil", "true", "false", "undefined", "required", "unknown"),
        *("str", "string", "bytes", "int", "integer", "number", "boolean", "bool", "any"),
        *("optional", "secretstr", "secretbytes", "object", "char", "text", "void"),
        *("self", "this", "cls", "await", "new", "function", "lambda", "yield", "async"),
        *("typeof", "not", "await_", "fn", "func", "def", "return"),
    }
)
# (the patterns below run on one short value at a time, never on model-sized text)
_PLACEHOLDER = re.compile(
    r"""\$.*                              # $VAR, ${VAR}, $(command), ${{ secrets.X }}
      | \{\{.*\}\} | \{[A-Za-z0-9_]*\}    # {{ var }}, {}, {name}
      | %\(\w+\)[sd] | %[sd]              # %(name)s, %s
      | <[^<>]*> | \[[^\[\]]*\]           # <your-password>, [REDACTED:x], [hidden]
      | [*xX.•#_-]+                       # ***, xxxx, ...
      | !\S*                              # !vault, !secret (YAML tags)
    """,
    re.VERBOSE,
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_TYPE_DECORATION = re.compile(r"^[&*?]+|(?:mut\s+)|[?!;,]+$")


def plausible_value(value: str, quoted: bool, name: str | None, following: str) -> bool:
    """Whether ``value``, assigned to the key ``name``, may be a secret (and so is
    redacted). ``quoted`` says whether it was written in quotes; ``following`` is the
    character after it (``""`` at the end of the text)."""
    if not value or value.startswith(MARKER_PREFIX):
        return False
    if _PLACEHOLDER.fullmatch(value):
        return False
    if quoted:
        return True
    if value[0] in "=>~!":  # `password == x`, `password => x` without a value
        return False
    bare = _TYPE_DECORATION.sub("", value)
    if bare.lower() in _CODE_WORDS:
        return False
    if _DOTTED.fullmatch(bare):
        return False  # self.password, os.environ, settings.TOKEN
    if _IDENTIFIER.fullmatch(bare):
        if following in ("(", "[", ",", ")", "."):
            return False  # a call, an index, or a name passed on as an argument
        if name is not None and _squash(bare) in _squash(name):
            return False  # password = password, token: Token, api_key: ApiKey
    return True


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def looks_random(value: str) -> bool:
    """Whether ``value`` looks like random key material: upper and lower case letters
    and digits, and at least 4 bits of entropy per character."""
    if not (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
    ):
        return False
    counts = Counter(value)
    total = len(value)
    entropy = -sum(n / total * math.log2(n / total) for n in counts.values())
    return entropy >= 4.0


def _secret_groups(rule: RedactionRule) -> tuple[int, ...]:
    return tuple(
        index
        for group, index in sorted(rule.regex.groupindex.items(), key=lambda item: item[1])
        if group == "secret" or group.startswith("secret_")
    )


def _replacer(rule: RedactionRule) -> Callable[[Any], str]:
    marker = f"{MARKER_PREFIX}{rule.kind}]"
    groups = _secret_groups(rule)
    name_group = rule.regex.groupindex.get("name")

    def replace(match: Any) -> str:
        whole: str = match.group(0)
        offset = match.start()
        start, end = match.start(), match.end()
        quoted = False
        for group in groups:
            span = match.span(group)
            if span[0] >= 0:
                start, end = span
                text = match.string
                quoted = start > 0 and end < len(text) and text[start - 1] == text[end] in "\"'"
                break
        else:
            if groups:
                return whole
        value = whole[start - offset : end - offset]
        if rule.check == "random" and not looks_random(value):
            return whole
        if rule.check == "assignment":
            name = match.group(name_group) if name_group is not None else None
            following = match.string[end : end + 1]
            if not plausible_value(value, quoted, name, following):
                return whole
        return whole[: start - offset] + marker + whole[end - offset :]

    return replace


class TextRedactor:
    """The redaction rules, ready to apply to text."""

    __slots__ = ("_rules",)

    def __init__(self, rules: Sequence[RedactionRule]) -> None:
        self._rules = tuple((rule.regex, _replacer(rule)) for rule in rules)

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced; the same object when there is none."""
        for regex, replace in self._rules:
            if regex.search(text) is None:
                continue
            replaced = regex.sub(replace, text)
            if replaced != text:
                text = replaced
        return text
