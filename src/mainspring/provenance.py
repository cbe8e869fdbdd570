"""Where a tool call's argument values came from: the provenance a gate reasons with.

A model can only write into a call what it was shown or what it made up. So for each
string value of a call's arguments, :class:`Provenance` finds where that value was seen in
the context the model was sent: the system prompt, a user message, a tool result (which
call, and its :class:`~mainspring.effects.Labels`), a compaction summary; or nowhere (the
model generated it). A gate that receives ``provenance`` can then ask: was this recipient
named by the user, or did it come only from untrusted content (an injected instruction)?

**Matching** is robust to the serialisation the model saw: a value is looked for as
written, and JSON-escaped (``\\"``, ``\\n``, ``\\u00e9``: a tool result that is JSON text
shows its strings escaped); runs of whitespace count as one space on both sides; an
e-mail address is matched without regard to case. A match must not be part of a longer
word (``eve@evil.com`` is not seen in ``steve@evil.com``). Values shorter than
:data:`MIN_CHARS` characters are too common to trace: their provenance is ``unknown``.

**Bounds.** At most :data:`MAX_CONTEXT_CHARS` characters of context are searched: the
system prompt and the user's messages first, then tool results and summaries, newest
first. A value not found when the bound cut the context is ``unknown`` (never
``model``). At most :data:`MAX_VALUES` string values of a call are traced (the rest are
``unknown``), each by its first :data:`MAX_NEEDLE_CHARS` characters. The work is done on
first use, once per call, and the context's text is prepared once per context and reused
by the calls that share it: a gate that does not take ``provenance`` costs nothing.

**Confidential data.** :meth:`Provenance.carries` answers the other question a flow
rule asks: does an argument (a mail body) carry data from a result labelled confidential
or higher? It looks for the distinctive fragments of such results (words of 6 or more
characters holding a digit, ``@`` or ``/``, and lines of 24 or more characters) in the
value.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, final

from pydantic import BaseModel

from .effects import Labels, join_labels, message_labels

__all__ = [
    "MAX_CONTEXT_CHARS",
    "MAX_NEEDLE_CHARS",
    "MAX_VALUES",
    "MIN_CHARS",
    "Origin",
    "OriginKind",
    "Provenance",
    "Traced",
    "context_labels",
    "gate_inputs",
]

MAX_CONTEXT_CHARS = 2_000_000
"""Characters of context searched at most (about 500k tokens); past it, ``unknown``."""

MAX_VALUES = 64
"""String values of one call traced at most."""

MAX_NEEDLE_CHARS = 512
"""A longer value is traced by its first this many characters (after normalising)."""

MIN_CHARS = 4
"""A shorter value is too common to trace: ``unknown``."""

_MAX_FRAGMENTS = 64
"""Distinctive fragments taken from one confidential result, at most."""

OriginKind: TypeAlias = Literal["system", "user", "tool_result", "summary", "model", "unknown"]


@final
@dataclass(frozen=True, slots=True)
class Origin:
    """One place a value was seen.

    ``kind``: ``system`` (the system prompt), ``user`` (a user message), ``tool_result``
    (``tool_call_id``, ``tool_name`` and the result's ``labels``), ``summary`` (a
    compaction summary, with the join of the labels of what it replaced); or, alone,
    ``model`` (seen nowhere: the model generated it) or ``unknown`` (not traced: too
    short, too many values, or past the context bound).
    """

    kind: OriginKind
    tool_call_id: str | None = None
    tool_name: str | None = None
    labels: Labels | None = None

    @property
    def untrusted(self) -> bool:
        """Whether this place is content labelled ``untrusted``."""
        return self.labels is not None and self.labels.untrusted

    @property
    def unlabelled_result(self) -> bool:
        """Whether this is a tool result or summary that carries no labels."""
        return self.kind in ("tool_result", "summary") and self.labels is None


MODEL = Origin("model")
UNKNOWN = Origin("unknown")
_SYSTEM = Origin("system")
_USER = Origin("user")


@final
@dataclass(frozen=True, slots=True)
class Traced:
    """One string value of an argument and every place it was seen (``(MODEL,)`` when
    nowhere, ``(UNKNOWN,)`` when not traced)."""

    value: str
    origins: tuple[Origin, ...]

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds of its origins."""
        return frozenset(origin.kind for origin in self.origins)


_SPACE = re.compile(r"\s+")
_EMAIL = re.compile(r"^[^\s@]+@[^\s@]+\.[^\s@]+$")
_DISTINCT = re.compile(r"\S*[0-9@/]\S*")


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text)


@final
class _Haystack:
    """The searchable text of one context: each entry's normalised text joined by NULs,
    the entries' start offsets, and each entry's origin. Built once per context, from
    entries prepared once per message (:func:`_entry`)."""

    __slots__ = ("_folded", "cut", "labels", "origins", "starts", "text", "texts")

    def __init__(self, system_prompt: str, messages: Sequence[Any]) -> None:
        first: list[tuple[Origin, str]] = []
        later: list[tuple[Origin, str]] = []
        if system_prompt:
            first.append((_SYSTEM, _normal(system_prompt)))
        labels: list[Labels | None] = []
        for message in messages:
            entry = _entry(message)
            if entry is None:
                continue
            (first if entry[0] is _USER else later).append(entry)
            labels.append(entry[0].labels)
        later.reverse()  # newest first
        self.labels = join_labels(labels)
        self.cut = False
        self.origins: list[Origin] = []
        self.texts: list[str] = []
        budget = MAX_CONTEXT_CHARS
        for origin, text in (*first, *later):
            if budget <= 0:
                self.cut = True
                break
            if len(text) > budget:
                text, self.cut = text[:budget], True
            self.origins.append(origin)
            self.texts.append(text)
            budget -= len(text)
        self.starts: list[int] = []
        position = 0
        for text in self.texts:
            self.starts.append(position)
            position += len(text) + 1
        self.text = "\x00".join(self.texts)
        self._folded: str | None = None

    @property
    def folded(self) -> str:
        """The text in lower case, offsets unchanged, for e-mail matching."""
        if self._folded is None:
            lowered = self.text.lower()
            if len(lowered) != len(self.text):  # a character that lowers to two
                lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in self.text)
            self._folded = lowered
        return self._folded

    def find(self, needle: str, fold: bool) -> list[Origin]:
        """The origins of every entry ``needle`` occurs in as a whole word."""
        text = self.folded if fold else self.text
        found: list[Origin] = []
        seen: set[int] = set()
        start = text.find(needle)
        first, last = needle[0].isalnum(), needle[-1].isalnum()
        while start >= 0:
            end = start + len(needle)
            if (not first or start == 0 or not text[start - 1].isalnum()) and (
                not last or end == len(text) or not text[end].isalnum()
            ):
                index = bisect.bisect_right(self.starts, start) - 1
                if index not in seen:
                    seen.add(index)
                    found.append(self.origins[index])
                # the rest of this entry adds nothing: go on from the next one
                if index + 1 >= len(self.starts):
                    break
                start = text.find(needle, self.starts[index + 1])
                continue
            start = text.find(needle, start + 1)
        return found


_entries: dict[int, tuple[Any, tuple[Origin, str] | None]] = {}
_MAX_ENTRIES = 8192


def _entry(message: Any) -> tuple[Origin, str] | None:
    """``(origin, normalised text)`` of a message that can be a value's source (``None``
    for assistant and custom messages), prepared once per message object."""
    known = _entries.get(id(message))
    if known is not None and known[0] is message:
        return known[1]
    role = getattr(message, "role", None)
    entry: tuple[Origin, str] | None
    if role == "user":
        entry = (_USER, _normal(_text(message)))
    elif role == "tool_result":
        origin = Origin(
            "tool_result",
            getattr(message, "tool_call_id", None),
            getattr(message, "tool_name", None),
            message_labels(message),
        )
        entry = (origin, _normal(_text(message)))
    elif role == "compaction":
        entry = (Origin("summary", labels=message_labels(message)), _normal(_text(message)))
    else:
        entry = None
    if len(_entries) >= _MAX_ENTRIES:
        _entries.clear()
    _entries[id(message)] = (message, entry)
    return entry


def _text(message: Any) -> str:
    text = getattr(message, "text", None)
    if isinstance(text, str):
        return text
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else ""


_cache: list[tuple[str, tuple[Any, ...], _Haystack]] = []
_CACHED = 4


def _haystack(system_prompt: str, messages: tuple[Any, ...]) -> _Haystack:
    """The haystack of a context, reused while the same context is asked about."""
    for prompt, known, haystack in _cache:
        if known is messages and prompt == system_prompt:
            return haystack
    haystack = _Haystack(system_prompt, messages)
    _cache.append((system_prompt, messages, haystack))
    del _cache[:-_CACHED]
    return haystack


def context_labels(system_prompt: str, messages: tuple[Any, ...]) -> Labels | None:
    """The join of the labels of every labelled message of a context (``None``: none)."""
    return _haystack(system_prompt, messages).labels


def _needles(value: str) -> tuple[list[str], bool]:
    """The spellings to look for, and whether to match without regard to case."""
    raw = value.strip()[: MAX_NEEDLE_CHARS * 2]
    normal = _normal(raw)[:MAX_NEEDLE_CHARS]
    spellings = [normal]
    for ascii_only in (True, False):
        escaped = _normal(json.dumps(raw, ensure_ascii=ascii_only)[1:-1])[:MAX_NEEDLE_CHARS]
        if escaped not in spellings:
            spellings.append(escaped)
    fold = _EMAIL.match(normal) is not None
    if fold:
        spellings = list(dict.fromkeys(s.lower() for s in spellings))
    return spellings, fold


def _strings(value: Any, out: list[str], limit: int) -> None:
    """The string leaves of ``value`` (depth first), at most ``limit`` in ``out``."""
    stack = [value]
    while stack and len(out) < limit:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            out.append(str(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
        elif isinstance(item, BaseModel):
            stack.append(item.model_dump(mode="json"))


@final
class Provenance(Mapping[str, tuple[Traced, ...]]):
    """For each argument of a call (by the name the model used), its traced string values.

    A read-only mapping computed on first use. ``provenance["to"]`` is a tuple of
    :class:`Traced`, one per string value in the argument (a list of recipients gives
    several). The helpers answer what flow rules ask.
    """

    __slots__ = ("_arguments", "_haystack", "_messages", "_system_prompt", "_traced")

    def __init__(
        self, arguments: Mapping[str, Any], system_prompt: str, messages: tuple[Any, ...]
    ) -> None:
        self._arguments = arguments
        self._system_prompt = system_prompt
        self._messages = messages
        self._haystack: _Haystack | None = None
        self._traced: dict[str, tuple[Traced, ...]] | None = None

    def _context(self) -> _Haystack:
        if self._haystack is None:
            self._haystack = _haystack(self._system_prompt, self._messages)
        return self._haystack

    def _all(self) -> dict[str, tuple[Traced, ...]]:
        if self._traced is None:
            haystack = self._context()
            traced: dict[str, tuple[Traced, ...]] = {}
            left = MAX_VALUES
            for name, value in self._arguments.items():
                strings: list[str] = []
                _strings(value, strings, MAX_VALUES)
                traced[name] = tuple(_trace(haystack, s, (left := left - 1) >= 0) for s in strings)
            self._traced = traced
        return self._traced

    def __getitem__(self, name: str) -> tuple[Traced, ...]:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arguments)

    def __len__(self) -> int:
        return len(self._arguments)

    @property
    def context_labels(self) -> Labels | None:
        """The join of the labels of the context's labelled messages."""
        return self._context().labels

    def from_user(self, name: str) -> bool:
        """Whether every traced value of argument ``name`` was seen in a user message or
        the system prompt (``False`` for an argument without string values)."""
        traced = self.get(name, ())
        return bool(traced) and all(t.kinds & {"user", "system"} for t in traced)

    def only_from_untrusted(
        self, name: str, unlabelled_untrusted: bool = False
    ) -> tuple[Traced, ...]:
        """The values of argument ``name`` seen only in untrusted content: each of their
        origins is a tool result or summary labelled ``untrusted`` (or, with
        ``unlabelled_untrusted``, carrying no labels). A value also seen in a user message,
        the system prompt or trusted content is not one of them; nor is a value the model
        generated or that was not traced."""

        def untrusted(origin: Origin) -> bool:
            return origin.untrusted or (unlabelled_untrusted and origin.unlabelled_result)

        return tuple(
            t
            for t in self.get(name, ())
            if t.kinds <= {"tool_result", "summary"} and all(untrusted(o) for o in t.origins)
        )

    def carries(self, name: str, level: str = "confidential") -> tuple[Origin, ...]:
        """The tool results (and summaries) labelled ``level`` or higher whose distinctive
        fragments occur in argument ``name``'s values."""
        texts = [_normal(t.value) for t in self.get(name, ())]
        if not texts:
            return ()
        haystack = self._context()
        found: list[Origin] = []
        for origin, text in zip(haystack.origins, haystack.texts, strict=True):
            if origin.labels is None or not origin.labels.at_least(level):
                continue
            if any(fragment in value for fragment in _fragments(text) for value in texts):
                found.append(origin)
        return tuple(found)


def _fragments(text: str) -> list[str]:
    """Distinctive pieces of ``text``: words of 6+ characters holding a digit, ``@`` or
    ``/`` (account numbers, codes, addresses), and lines of 24+ characters."""
    words = [w for w in _DISTINCT.findall(text) if len(w) >= 6]
    lines = [line.strip() for line in text.split("\n") if len(line.strip()) >= 24]
    return [*words, *lines][:_MAX_FRAGMENTS]


def _trace(haystack: _Haystack, value: str, allowed: bool) -> Traced:
    if not allowed or len(value.strip()) < MIN_CHARS:
        return Traced(value, (UNKNOWN,))
    spellings, fold = _needles(value)
    origins: list[Origin] = []
    for spelling in spellings:
        for origin in haystack.find(spelling, fold):
            if origin not in origins:
                origins.append(origin)
    if origins:
        return Traced(value, tuple(origins))
    return Traced(value, (UNKNOWN if haystack.cut else MODEL,))


def gate_inputs(
    gates: Sequence[Any],
    arguments: Mapping[str, Any],
    system_prompt: str,
    context: Callable[[], tuple[Any, ...]],
) -> tuple[Provenance | None, Labels | None]:
    """The ``provenance`` and ``labels`` parameters of ``before_tool_call``, for ``gates``
    (objects with ``argnames``, the implementations in call order).

    Each is made only when some gate takes it (``None`` otherwise): a run without such a
    gate pays one scan of the gates' parameter names per call. ``context`` gives the
    messages the model was sent; it is called only when needed.
    """
    wants_provenance = wants_labels = False
    for gate in gates:
        names = gate.argnames
        wants_provenance = wants_provenance or "provenance" in names
        wants_labels = wants_labels or "labels" in names
    if not (wants_provenance or wants_labels):
        return None, None
    messages = context()
    provenance = Provenance(arguments, system_prompt, messages) if wants_provenance else None
    labels = context_labels(system_prompt, messages) if wants_labels else None
    return provenance, labels
