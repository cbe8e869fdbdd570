"""Where a tool call's argument values came from: the provenance a gate reasons with.

A model can only write into a call what it was shown or what it made up. So for each
string value of a call's arguments, :class:`Provenance` finds where that value was seen in
the context the model was sent: the system prompt, a user message, a tool result (which
call, and its :class:`~mainspring.effects.Labels`), a compaction summary; or nowhere (the
model generated it). A gate that receives ``provenance`` can then ask: was this recipient
named by the user, or did it come only from untrusted content (an injected instruction)?

The context searched is the run's system prompt and transcript as the call is decided:
the messages ``transform_context`` projects the request from. What a transform adds to a
request alone is not searched (a value taken from it is ``model``); what it removes still
is.

**Matching** is robust to the serialisation the model saw: a value is looked for as
written, and JSON-escaped (``\\"``, ``\\n``, ``\\u00e9``: a tool result that is JSON text
shows its strings escaped); runs of whitespace count as one space on both sides; an
e-mail address is matched without regard to case. A match must not be part of a longer
word (``eve@evil.com`` is not seen in ``steve@evil.com``). Values shorter than
:data:`MIN_CHARS` characters are too common to trace: their provenance is ``unknown``.

**Bounds.** At most :data:`MAX_CONTEXT_CHARS` characters of context are searched: the
system prompt and the user's messages first, then tool results and summaries, newest
first; of one message, its first :data:`MAX_MESSAGE_CHARS`. A value not found when a
bound cut the context is ``unknown`` (never ``model``). At most :data:`MAX_VALUES` string
values of a call are traced (the rest are ``unknown``), each by its first
:data:`MAX_NEEDLE_CHARS` characters. The work is done on first use, once per call: each
message's text is normalised and its words indexed once (kept for the last 8,192 messages
seen), a value is looked for only in the messages holding its rarest word, and a context
that extends one asked about before reuses its work. A gate that does not take
``provenance`` costs nothing.

**Confidential data.** :meth:`Provenance.carries` answers the other question a flow
rule asks: does an argument (a mail body) carry data from a result labelled confidential
or higher? It looks for the distinctive fragments of such results (words of 6 or more
characters holding a digit, ``@`` or ``/``, and lines of 24 or more characters) in the
value.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, final

from pydantic import BaseModel

from .effects import Labels, join_labels, message_labels

__all__ = [
    "MAX_CONTEXT_CHARS",
    "MAX_MESSAGE_CHARS",
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

MAX_MESSAGE_CHARS = 250_000
"""Characters of one message searched at most (a longer one makes the context cut)."""

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


_EMAIL = re.compile(r"^[^\s@]+@[^\s@]+\.[^\s@]+$")
_DISTINCT = re.compile(r"\S*[0-9@/]\S*")
_SEPARATORS = {code: " " for code in range(128) if not chr(code).isalnum()}
"""ASCII characters that are not letters or digits: word separators of the index. Other
characters belong to words, so a word of the index may be longer than a word of the
needle next to a non-ASCII symbol: that can only hide a match, never invent one."""
_PLAIN_JSON = re.compile(r'[^"\\\x00-\x1f\x7f]*')
_PROBED_WORDS = 8
"""A needle's longest words whose postings are compared to pick the rarest."""
_PROBED_CHARS = 96
"""The words probed are taken from the needle's first this many characters."""


def _normal(text: str) -> str:
    """``text`` with every run of whitespace one space, and none at either end."""
    return " ".join(text.split())


def _words(text: str, limit: int | None = None) -> list[str]:
    """The words of ``text`` (split at :data:`_SEPARATORS`); with ``limit``, the whole
    words within its first ``limit`` characters."""
    if limit is not None and len(text) > limit:
        words = text[:limit].translate(_SEPARATORS).split()
        if text[limit - 1 : limit + 1].translate(_SEPARATORS).count(" ") == 0:
            words.pop()  # the cut fell inside a word
        return words
    return text.translate(_SEPARATORS).split()


def _lowered(text: str) -> str:
    """``text`` in lower case with its offsets unchanged."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character that lowers to two
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered


@final
class _Entry:
    """One message as a place values are looked for: its origin, its normalised text
    (lower-cased on demand), its words indexed in :data:`_index`. Made once per message."""

    __slots__ = ("_folded", "key", "origin", "text", "truncated")

    def __init__(self, key: int, origin: Origin, text: str) -> None:
        self.key = key
        self.origin = origin
        self.truncated = len(text) > MAX_MESSAGE_CHARS
        self.text = _normal(text[:MAX_MESSAGE_CHARS])
        self._folded: str | None = None
        for word in set(_words(self.text.lower())):
            _index.setdefault(word, set()).add(key)

    @property
    def folded(self) -> str:
        if self._folded is None:
            self._folded = _lowered(self.text)
        return self._folded

    def holds(self, needle: str, fold: bool, limit: int) -> bool:
        """Whether ``needle`` occurs in the first ``limit`` characters as a whole word."""
        return _holds(self.folded if fold else self.text, needle, limit)


def _holds(text: str, needle: str, limit: int) -> bool:
    """Whether ``needle`` occurs in ``text[:limit]`` as a whole word."""
    stop = min(len(text), limit)
    first, last = needle[0].isalnum(), needle[-1].isalnum()
    start = text.find(needle, 0, stop)
    while start >= 0:
        end = start + len(needle)
        if (not first or start == 0 or not text[start - 1].isalnum()) and (
            not last or end == len(text) or not text[end].isalnum()
        ):
            return True
        start = text.find(needle, start + 1, stop)
    return False


_MAX_ENTRIES = 8192
"""Messages whose prepared text is kept; past it, all are dropped and prepared again."""
_MAX_ENTRY_CHARS = 32_000_000
"""Characters of prepared text kept; past it, likewise."""
_entries: dict[int, tuple[Any, _Entry | None]] = {}
_index: dict[str, set[int]] = {}
"""Each lower-case word of a prepared message → the keys of the messages holding it."""
_held = [0, 0]
"""``[characters of prepared text held, generation]``: the generation grows at each
drop, and a haystack made in an earlier one searches every entry (its words are no
longer in the index)."""


def _drop() -> None:
    _entries.clear()
    _index.clear()
    _held[0] = 0
    _held[1] += 1


def _entry(message: Any) -> _Entry | None:
    """The entry of a message that can be a value's source (``None`` for assistant and
    custom messages), prepared once per message object (kept alive while cached)."""
    key = id(message)
    known = _entries.get(key)
    if known is not None and known[0] is message:
        return known[1]
    if known is not None:  # another object got the id of a dropped one
        _drop()
    role = getattr(message, "role", None)
    origin: Origin | None
    if role == "user":
        origin = _USER
    elif role == "tool_result":
        origin = Origin(
            "tool_result",
            getattr(message, "tool_call_id", None),
            getattr(message, "tool_name", None),
            message_labels(message),
        )
    elif role == "compaction":
        origin = Origin("summary", labels=message_labels(message))
    else:
        origin = None
    if len(_entries) >= _MAX_ENTRIES or _held[0] >= _MAX_ENTRY_CHARS:
        _drop()
    entry = None if origin is None else _Entry(key, origin, _text(message))
    _entries[key] = (message, entry)
    _held[0] += 0 if entry is None else len(entry.text)
    return entry


@final
class _Haystack:
    """One context as places to look: the system prompt, and the entries of its user
    messages, tool results and summaries.

    While the context's text fits :data:`MAX_CONTEXT_CHARS`, the entries are in
    transcript order, searched whole, and a context that extends one asked about before
    is built from it by adding the new messages only. Past the bound, the system prompt,
    the user's messages, then tool results and summaries newest first are searched as far
    as the bound reaches (``limits``), and ``cut`` is set.
    """

    __slots__ = (
        "cut",
        "entries",
        "generation",
        "labels",
        "limits",
        "position",
        "system",
        "total",
    )

    def __init__(
        self,
        system_prompt: str,
        messages: Sequence[Any],
        base: _Haystack | None = None,
        known: int = 0,
    ) -> None:
        """The haystack of ``messages``; ``base``, if given, is that of their first
        ``known`` messages (and the same system prompt)."""
        start = _held[1]
        # entries made before a drop of the index are searched whole (see ``find``)
        self.generation: int = start if base is None or base.generation == start else -1
        self.system = _normal(system_prompt)
        self.cut = False
        self.limits: list[int] | None = None
        self.entries: list[_Entry]
        self.labels: Labels | None
        self.total: int
        if base is not None and base.limits is None:
            fresh = [entry for entry in map(_entry, messages[known:]) if entry is not None]
            self.entries = [*base.entries, *fresh]
            self.cut = base.cut or any(entry.truncated for entry in fresh)
            self.labels = join_labels([base.labels, *(entry.origin.labels for entry in fresh)])
            self.total = base.total + sum(len(entry.text) for entry in fresh)
            if self.total <= MAX_CONTEXT_CHARS:
                self.position: dict[int, int] = dict(base.position)
                for index, entry in enumerate(fresh, len(base.entries)):
                    self.position[entry.key] = index
                return
        else:
            self.entries = [entry for entry in map(_entry, messages) if entry is not None]
            self.cut = any(entry.truncated for entry in self.entries)
            self.labels = join_labels(entry.origin.labels for entry in self.entries)
            self.total = len(self.system) + sum(len(entry.text) for entry in self.entries)
        if self.total > MAX_CONTEXT_CHARS:
            self._bound()
        self.position = {entry.key: index for index, entry in enumerate(self.entries)}

    def _bound(self) -> None:
        self.cut = True
        users = [entry for entry in self.entries if entry.origin is _USER]
        later = [entry for entry in self.entries if entry.origin is not _USER]
        later.reverse()  # newest first
        budget = MAX_CONTEXT_CHARS
        self.system = self.system[:budget]
        budget -= len(self.system)
        self.entries, limits = [], []
        for entry in (*users, *later):
            if budget <= 0:
                break
            self.entries.append(entry)
            limits.append(budget)
            budget -= len(entry.text)
        self.limits = limits

    def find(self, needle: str, fold: bool) -> list[Origin]:
        """The origins of the places ``needle`` occurs in as a whole word.

        Only the messages holding the needle's rarest word are searched: every word of a
        needle is a whole word of any text it occurs in as a whole word.
        """
        found: list[Origin] = []
        system = _lowered(self.system) if fold else self.system
        if system and _holds(system, needle, len(system)):
            found.append(_SYSTEM)
        words = sorted(set(_words(needle.lower(), _PROBED_CHARS)), key=len, reverse=True)
        del words[_PROBED_WORDS:]
        candidates: Iterable[int]
        if not words or self.generation != _held[1]:
            candidates = range(len(self.entries))
        else:
            postings = [_index.get(word) for word in words]
            if any(posting is None for posting in postings):
                return found
            rarest = min((p for p in postings if p is not None), key=len)
            position = self.position
            if len(rarest) < len(position):
                candidates = sorted(position[key] for key in rarest if key in position)
            else:
                candidates = sorted(position[key] for key in position if key in rarest)
        entries, limits = self.entries, self.limits
        for index in candidates:
            entry = entries[index]
            if entry.holds(needle, fold, len(entry.text) if limits is None else limits[index]):
                found.append(entry.origin)
        return found


def _text(message: Any) -> str:
    text = getattr(message, "text", None)
    if isinstance(text, str):
        return text
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else ""


_cache: list[tuple[str, tuple[Any, ...], _Haystack]] = []
_CACHED = 4


_lock = threading.Lock()
"""Guards the shared caches (:data:`_entries`, :data:`_index`, :data:`_cache`): gates of
agents running at once may trace in several threads (a plain ``def`` gate runs in one)."""


def _haystack(system_prompt: str, messages: tuple[Any, ...]) -> _Haystack:
    """The haystack of a context: the one made for the same tuple, else one extending
    the haystack of a context it extends (same first message, and its last message at
    the same place), else a new one."""
    with _lock:
        return _haystack_unlocked(system_prompt, messages)


def _haystack_unlocked(system_prompt: str, messages: tuple[Any, ...]) -> _Haystack:
    base: tuple[int, _Haystack] | None = None
    for slot, (prompt, known, haystack) in enumerate(_cache):
        if prompt != system_prompt:
            continue
        if known is messages:
            _cache.append(_cache.pop(slot))  # most recently used last
            return haystack
        count = len(known)
        if (
            0 < count < len(messages)
            and messages[0] is known[0]
            and messages[count - 1] is known[-1]
            and (base is None or count > base[0])
        ):
            base = (count, haystack)
    if base is None:
        haystack = _Haystack(system_prompt, messages)
    else:
        haystack = _Haystack(system_prompt, messages, base[1], base[0])
        used = next(item for item in _cache if item[2] is base[1])
        _cache.remove(used)
        _cache.append(used)  # most recently used last
    _cache.append((system_prompt, messages, haystack))
    del _cache[:-_CACHED]
    return haystack


def context_labels(system_prompt: str, messages: tuple[Any, ...]) -> Labels | None:
    """The join of the labels of every labelled message of a context (``None``: none)."""
    return _haystack(system_prompt, messages).labels


def _needles(value: str) -> tuple[list[str], bool]:
    """The spellings to look for, and whether to match without regard to case."""
    raw = value[: MAX_NEEDLE_CHARS * 2]
    normal = _normal(raw)[:MAX_NEEDLE_CHARS]
    spellings = [normal]
    if not (raw.isascii() and _PLAIN_JSON.fullmatch(raw)):  # JSON would escape something
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

    def context_untrusted(self, unlabelled_untrusted: bool = False) -> bool:
        """Whether the context holds content labelled ``untrusted`` (or, with
        ``unlabelled_untrusted``, a tool result or summary without labels). A context past
        the bound counts as untrusted: what was not searched cannot be vouched for."""
        haystack = self._context()
        if haystack.cut:
            return True
        for entry in haystack.entries:
            origin = entry.origin
            if origin.untrusted or (unlabelled_untrusted and origin.unlabelled_result):
                return True
        return False

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

    def trace(self, value: str) -> Traced:
        """Where ``value`` (any string, such as a URL found inside an argument) was seen in
        the context, as for an argument's values."""
        return _trace(self._context(), value, True)

    def carries(self, name: str, level: str = "confidential") -> tuple[Origin, ...]:
        """The tool results (and summaries) labelled ``level`` or higher whose distinctive
        fragments occur in argument ``name``'s values."""
        texts = [_normal(t.value) for t in self.get(name, ())]
        if not texts:
            return ()
        found: list[Origin] = []
        for entry in self._context().entries:
            labels = entry.origin.labels
            if labels is None or not labels.at_least(level):
                continue
            if any(fragment in value for fragment in _fragments(entry.text) for value in texts):
                found.append(entry.origin)
        return tuple(found)


def _fragments(text: str) -> list[str]:
    """Distinctive pieces of ``text``: words of 6+ characters holding a digit, ``@`` or
    ``/`` (account numbers, codes, addresses), and lines of 24+ characters."""
    words = [w for w in _DISTINCT.findall(text) if len(w) >= 6]
    lines = [line.strip() for line in text.split("\n") if len(line.strip()) >= 24]
    return [*words, *lines][:_MAX_FRAGMENTS]


def _trace(haystack: _Haystack, value: str, allowed: bool) -> Traced:
    if not allowed or len(value) < MIN_CHARS or len(value.strip()) < MIN_CHARS:
        return Traced(value, (UNKNOWN,))
    spellings, fold = _needles(value)
    origins: list[Origin] = []
    with _lock:  # the word index may be growing in another thread
        for spelling in spellings:
            for origin in haystack.find(spelling, fold):
                if origin not in origins:
                    origins.append(origin)
    if origins:
        return Traced(value, tuple(origins))
    return Traced(value, (UNKNOWN if haystack.cut else MODEL,))


def gate_inputs(
    wants_provenance: bool,
    wants_labels: bool,
    arguments: Mapping[str, Any],
    system_prompt: str,
    context: Callable[[], tuple[Any, ...]],
) -> tuple[Provenance | None, Labels | None]:
    """The ``provenance`` and ``labels`` parameters of ``before_tool_call``: each made
    only when some gate takes it (``None`` otherwise), so a run without such a gate pays
    nothing. ``context`` gives the messages the model was sent; it is called only when
    needed.
    """
    if not (wants_provenance or wants_labels):
        return None, None
    messages = context()
    provenance = Provenance(arguments, system_prompt, messages) if wants_provenance else None
    labels = context_labels(system_prompt, messages) if wants_labels else None
    return provenance, labels
