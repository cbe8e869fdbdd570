"""The built-in token estimate: what ``count_tokens`` answers when no plugin does.

Roughly four characters per token for text, thinking and tool arguments, plus a little
framing per message; a fixed cost per image.

Reported usage describes a *request*, not a slice of a transcript: an assistant message's
usage (input plus output tokens) counts what the model was sent for it plus the reply.
So the newest reply that reported usage stands for everything up to it only while the
messages before it are still the ones that request carried. They are not once a message
*newer than the reply* sits before it: a compaction summary, or anything else put there
after the reply arrived, shows that the context was rewritten since (messages carry their
creation ``timestamp``). Such a reply's usage is ignored and it is estimated from its
content like any other message. A message without a numeric ``timestamp`` never counts as
newer.

Consequences the kernel relies on:

- after a compaction (a summary made *now*, then the kept tail) the estimate is the
  estimate of what was kept, until the next reply reports usage for the compacted context;
- :func:`tail_tokens` and ``estimate_tokens(..., reported_usage=False)`` estimate
  messages from their own content only, which is what a candidate tail of a transcript
  needs (a kept reply's usage would stand for the whole old context).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, cast, final

from .messages import AssistantMessage, ImageContent, TextContent, ThinkingContent, ToolCall

__all__ = ["IMAGE_TOKENS", "RunningEstimate", "estimate_tokens", "tail_tokens"]

IMAGE_TOKENS = 1_200
"""The estimate for one image, whatever its size."""


def _arguments_chars(arguments: Any) -> int:
    """About the length of ``arguments`` as JSON, without serialising it."""
    if isinstance(arguments, dict):
        return 2 + sum(len(key) + 4 + _arguments_chars(value) for key, value in arguments.items())
    if isinstance(arguments, list):
        return 2 + sum(_arguments_chars(item) + 1 for item in arguments)
    if isinstance(arguments, str):
        return len(arguments) + 2
    return len(str(arguments))


def _message_chars(message: Any) -> tuple[int, int]:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return len(content), 0
    chars, images = 0, 0
    for block in content:
        if isinstance(block, TextContent):
            chars += len(block.text)
        elif isinstance(block, ThinkingContent):
            chars += len(block.thinking)
        elif isinstance(block, ToolCall):
            chars += len(block.name) + _arguments_chars(block.arguments)
        elif isinstance(block, ImageContent):
            images += 1
    return chars, images


_PER_MESSAGE_CHARS = 16
"""Framing each message adds (role, separators), in characters."""

_NO_TIME = float("-inf")

_Entry = tuple[Any, int, int, int, float]
"""(weakref, chars with framing, images, tokens its usage reports or 0, timestamp)."""

_entries: dict[int, _Entry] = {}
"""Per message, by ``id``: messages are immutable, so their size is too. An entry is
removed by its weakref's callback when the message dies, before its ``id`` can be reused."""


def _usage_tokens(message: Any) -> int:
    return message.usage.total_tokens if isinstance(message, AssistantMessage) else 0


def _timestamp(message: Any) -> float:
    stamp = getattr(message, "timestamp", None)
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return float(stamp)
    return _NO_TIME


def _sized(message: Any) -> _Entry:
    """``message`` measured, not cached (its weakref left ``None``)."""
    chars, images = _message_chars(message)
    size = chars + _PER_MESSAGE_CHARS
    return (None, size, images, _usage_tokens(message), _timestamp(message))


def _measure(message: Any) -> _Entry:
    key = id(message)
    _, size, images, reported, stamp = _sized(message)
    try:
        reference = weakref.KeyedRef(message, _forget, key)
    except TypeError:  # not weak-referenceable: measured, not cached
        return (None, size, images, reported, stamp)
    entry = (reference, size, images, reported, stamp)
    _entries[key] = entry
    return entry


def _forget(reference: weakref.KeyedRef[Any, int]) -> None:
    _entries.pop(reference.key, None)


def _entry(message: Any) -> _Entry:
    entry = _entries.get(id(message))
    return entry if entry is not None else _measure(message)


def _tokens(chars: int, images: int) -> int:
    return chars // 4 + images * IMAGE_TOKENS


@final
class RunningEstimate:
    """The built-in estimate of a transcript that grows, kept current message by message.

    :meth:`add` is O(1) and caches nothing: a message appended is usually never measured
    again, and thousands of agents' transcripts would otherwise each hold an entry per
    message. :meth:`reset` reads every message once (each message's size is cached from
    its second measurement on). ``tokens`` is what :func:`estimate_tokens` returns for the
    messages seen, in order.
    """

    __slots__ = ("_base", "_chars", "_images", "_newest")

    def __init__(self, messages: Sequence[Any] = ()) -> None:
        self._base = self._chars = self._images = 0
        self._newest = _NO_TIME
        if messages:
            self.reset(messages)

    def add(self, message: Any) -> None:
        """Account for ``message``, appended after the others."""
        entry = _entries.get(id(message))
        _, chars, images, reported, stamp = entry if entry is not None else _sized(message)
        if reported and stamp > self._newest:
            # nothing before it is newer: its usage covers the messages before it
            self._base, self._chars, self._images = reported, 0, 0
        else:
            self._chars += chars
            self._images += images
        if stamp > self._newest:
            self._newest = stamp

    def reset(self, messages: Sequence[Any]) -> None:
        """Start over with ``messages``."""
        base, chars, images, newest = 0, 0, 0, _NO_TIME
        lookup = _entries.get
        for message in messages:
            entry = lookup(id(message))
            if entry is None:
                entry = _measure(message)
            stamp = entry[4]
            if entry[3] and stamp > newest:
                base, chars, images = entry[3], 0, 0
            else:
                chars += entry[1]
                images += entry[2]
            if stamp > newest:
                newest = stamp
        self._base, self._chars, self._images, self._newest = base, chars, images, newest

    @property
    def tokens(self) -> int:
        """The estimate, in tokens."""
        return self._base + _tokens(self._chars, self._images)


def estimate_tokens(messages: Sequence[Any], *, reported_usage: bool = True) -> int:
    """Estimate the tokens of ``messages`` (see the module docstring).

    With ``reported_usage=False`` every message is estimated from its content, whatever
    usage the replies among them reported: the size of a slice of a transcript.
    """
    if reported_usage:
        return _with_usage(messages)
    chars, images = 0, 0
    for message in messages:
        entry = _entry(message)
        chars += entry[1]
        images += entry[2]
    return _tokens(chars, images)


_stamp_of = cast("Callable[[Any], float]", itemgetter(4))


def _newest_before(messages: Sequence[Any], index: int) -> float:
    """The newest timestamp among ``messages[:index]`` (one pass in C once all are measured)."""
    if not index:
        return _NO_TIME
    prefix = messages[:index]
    try:
        newest: float = max(map(_stamp_of, map(_entries.get, map(id, prefix))))
    except TypeError:  # some message not measured yet (or not cacheable)
        newest = max(_entry(message)[4] for message in prefix)
    return newest


def _with_usage(messages: Sequence[Any]) -> int:
    """``RunningEstimate(messages).tokens``, read backwards: stops at the newest reply whose
    usage counts, checking that nothing before it is newer."""
    chars, images = 0, 0
    lookup = _entries.get
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        entry = lookup(id(message))
        if entry is None:
            entry = _measure(message)
        if entry[3] and _newest_before(messages, index) < entry[4]:
            return entry[3] + _tokens(chars, images)
        chars += entry[1]
        images += entry[2]
    return _tokens(chars, images)


def tail_tokens(messages: Sequence[Any]) -> list[int]:
    """The content estimate of every tail: item ``i`` is that of ``messages[i:]``.

    ``len(messages) + 1`` items (the last, the empty tail, is 0); item ``i`` equals
    ``estimate_tokens(messages[i:], reported_usage=False)``. One backward pass.
    """
    out = [0] * (len(messages) + 1)
    chars, images = 0, 0
    for index in range(len(messages) - 1, -1, -1):
        entry = _entry(messages[index])
        chars += entry[1]
        images += entry[2]
        out[index] = _tokens(chars, images)
    return out
