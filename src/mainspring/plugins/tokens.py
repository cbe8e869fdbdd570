"""Built-in (essential): the token estimate behind ``count_tokens``.

Roughly four characters per token for text, thinking and tool arguments; a fixed cost per
image. When the newest assistant message reported usage, its input plus output tokens
stand for everything up to it, and only the messages after it are estimated.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, final

from ..hookspecs import hookimpl
from ..messages import AssistantMessage, ImageContent, TextContent, ThinkingContent, ToolCall

__all__ = ["IMAGE_TOKENS", "RunningEstimate", "count_tokens", "estimate_tokens"]

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

_Entry = tuple[Any, int, int, int]
"""(weakref, chars with framing, images, tokens its usage reports or 0)."""

_entries: dict[int, _Entry] = {}
"""Per message, by ``id``: messages are immutable, so their size is too. An entry is
removed by its weakref's callback when the message dies, before its ``id`` can be reused."""


def _usage_tokens(message: Any) -> int:
    return message.usage.total_tokens if isinstance(message, AssistantMessage) else 0


def _measure(message: Any) -> _Entry:
    key = id(message)
    chars, images = _message_chars(message)
    try:
        reference = weakref.ref(message, lambda _ref: _entries.pop(key, None))
    except TypeError:  # not weak-referenceable: measured, not cached
        return (None, chars + _PER_MESSAGE_CHARS, images, _usage_tokens(message))
    entry = (reference, chars + _PER_MESSAGE_CHARS, images, _usage_tokens(message))
    _entries[key] = entry
    return entry


def _entry(message: Any) -> _Entry:
    entry = _entries.get(id(message))
    return entry if entry is not None else _measure(message)


@final
class RunningEstimate:
    """The built-in estimate of a transcript that grows, kept current message by message.

    :meth:`add` is O(1); :meth:`reset` reads backwards only down to the newest message
    that reported usage. ``tokens`` is what :func:`estimate_tokens` would return for the
    messages seen.
    """

    __slots__ = ("_base", "_chars", "_images")

    def __init__(self, messages: Sequence[Any] = ()) -> None:
        self._base = self._chars = self._images = 0
        if messages:
            self.reset(messages)

    def add(self, message: Any) -> None:
        """Account for ``message``, appended after the others."""
        _, chars, images, reported = _entry(message)
        if reported:
            self._base, self._chars, self._images = reported, 0, 0
        else:
            self._chars += chars
            self._images += images

    def reset(self, messages: Sequence[Any]) -> None:
        """Start over with ``messages``."""
        chars, images, base = 0, 0, 0
        lookup = _entries.get
        for message in reversed(messages):
            entry = lookup(id(message))
            if entry is None:
                entry = _measure(message)
            if entry[3]:
                base = entry[3]
                break
            chars += entry[1]
            images += entry[2]
        self._base, self._chars, self._images = base, chars, images

    @property
    def tokens(self) -> int:
        """The estimate, in tokens."""
        return self._base + self._chars // 4 + self._images * IMAGE_TOKENS


def estimate_tokens(messages: Sequence[Any]) -> int:
    """Estimate the tokens of ``messages`` (see the module docstring).

    One backward pass that stops at the newest message reporting usage; each message's
    size is measured once in its lifetime.
    """
    return RunningEstimate(messages).tokens


@hookimpl(trylast=True)
def count_tokens(messages: tuple[Any, ...]) -> int:
    """The built-in estimate; answers when no other plugin does."""
    return estimate_tokens(messages)
