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

After the rules, when the policy has a rule of kind ``private_key``, the lines of **key
material** a rule cannot see one line at a time are redacted too (:func:`key_material`):
a private key's body lines are base64 of a fixed width (64 for PEM, 70 for OpenSSH), but
its first OpenSSH line is mostly ``A`` (not random), its last line is short, and a grep
or ``sed -n 5p`` shows any of them alone. So a base64 line (after an optional grep
``file:2:`` / ``file-2-`` or numbered ``    2<TAB>`` prefix) is key material when it

- is alone and is an OpenSSH key's first line (``b3BlbnNzaC1rZXktdjE``…, "openssh-key-v1")
  or exactly 64 or 70 characters long (a key's full line), or, 16 to 100 characters with
  upper and lower case letters and digits, ends in ``=`` padding or holds ``AAA`` (the
  zero bytes of an OpenSSH length field): a key's last line;
- or belongs to a run of consecutive base64 lines (short ones too, such as an OpenSSH
  key's padding line ``AQIDBA==``) that holds a line of the kinds above, or that touches
  a line a rule redacted as a private key or a key's ``-----END ... PRIVATE KEY-----``
  line: every base64 line of the run is then redacted.

A key's last line read alone (``sed -n 27p``) that is shorter than 40 characters, has no
padding and no ``AAA`` is not told from a word: PEM keys can have one.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from .config import RedactionRule

__all__ = [
    "KEY_MATERIAL_KIND",
    "MARKER_PREFIX",
    "TextRedactor",
    "key_material",
    "looks_random",
    "plausible_value",
]

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


KEY_MATERIAL_KIND = "private_key"
"""The kind of the rules whose presence turns :func:`key_material` on, and its marker's."""

_KEY_LINE = re.compile(
    r"(?P<prefix>[ \t]*(?:[^\s:]*[:-](?:\d+[:-])?|\d+\t)?[ \t]*)"
    r"(?P<body>[A-Za-z0-9+/]{2,100}={0,2})\r?"
)
_END_LINE = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_KEY_WIDTHS = (64, 70)
_SHORTEST_ALONE = 16
_OPENSSH_MAGIC = "b3BlbnNzaC1rZXktdjE"
_KEY_MARKER = f"{MARKER_PREFIX}{KEY_MATERIAL_KIND}]"


_LONGEST_KEY_LINE = 400
"""Longer lines are never key material (a grep prefix and a body fit well within): the
one Python pattern here runs on short lines only, so the time stays linear."""


def _key_body(line: str) -> tuple[str, str] | None:
    """``(prefix, body)`` of a line that is only base64 (after a grep or number prefix);
    a short one only when it looks like an OpenSSH key's padding line (padded, or no
    lower-case letter: ``AQIDBA==``, ``AQIDBAUG``), not like a word (``end``)."""
    if len(line) > _LONGEST_KEY_LINE:
        return None
    match = _KEY_LINE.fullmatch(line)
    if match is None:
        return None
    body = match["body"]
    if len(body) < _SHORTEST_ALONE and not (
        len(body) >= 4 and (body.endswith("=") or not any(c.islower() for c in body))
    ):
        return None
    return match["prefix"], body


def _alone_is_key(body: str) -> bool:
    if len(body) < _SHORTEST_ALONE:
        return False  # only in a run (an OpenSSH key's padding, ``AQIDBA==``)
    if body.startswith(_OPENSSH_MAGIC):
        return True
    if len(body) in _KEY_WIDTHS:
        return True
    # a key's last line: padded, or holding the zero bytes of an OpenSSH length field
    # (upper and lower case, no digit asked for: random base64 this short lacks one in
    # about one key in fifty)
    cased = any(c.isupper() for c in body) and any(c.islower() for c in body)
    return cased and (body.endswith("=") or "AAA" in body)


def _keyed_line(line: str) -> bool:
    """A line that makes the base64 lines next to it key material: a private-key marker
    of the rules, or a key's END line (``tail -n 3`` of a key file)."""
    return _KEY_MARKER in line or (
        len(line) <= _LONGEST_KEY_LINE and _END_LINE.search(line) is not None
    )


def key_material(text: str) -> str:
    """``text`` with its private-key body lines redacted (see the module); the same object
    when there are none."""
    if "\n" not in text and _key_body(text) is None:
        return text
    lines = text.split("\n")
    bodies = [_key_body(line) for line in lines]
    redact = [False] * len(lines)
    start = 0
    while start < len(lines):
        if bodies[start] is None and not _keyed_line(lines[start]):
            start += 1
            continue
        end = start
        while end < len(lines) and (bodies[end] is not None or _keyed_line(lines[end])):
            end += 1
        run = range(start, end)
        body_lines = [i for i in run if bodies[i] is not None]
        keyed = any(_keyed_line(lines[i]) for i in run) or any(
            _alone_is_key(bodies[i][1])  # type: ignore[index]
            for i in body_lines
        )
        if keyed:
            for i in body_lines:
                redact[i] = True
        start = end
    if not any(redact):
        return text
    for i, flagged in enumerate(redact):
        if flagged:
            prefix = bodies[i][0]  # type: ignore[index]
            lines[i] = prefix + _KEY_MARKER
    return "\n".join(lines)


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

    __slots__ = ("_key_material", "_rules")

    def __init__(self, rules: Sequence[RedactionRule]) -> None:
        self._rules = tuple((rule.regex, _replacer(rule)) for rule in rules)
        self._key_material = any(rule.kind == KEY_MATERIAL_KIND for rule in rules)

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced; the same object when there is none."""
        for regex, replace in self._rules:
            if regex.search(text) is None:
                continue
            replaced = regex.sub(replace, text)
            if replaced != text:
                text = replaced
        return key_material(text) if self._key_material else text
