"""Built-in (essential): the token estimate behind ``count_tokens``.

Roughly four characters per token for text, thinking and tool arguments; a fixed cost per
image. When the newest assistant message reported usage, its input plus output tokens
stand for everything up to it, and only the messages after it are estimated.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from ..hookspecs import hookimpl
from ..messages import AssistantMessage, ImageContent, TextContent, ThinkingContent, ToolCall

__all__ = ["IMAGE_TOKENS", "count_tokens", "estimate_tokens"]

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
    if not isinstance(message, AssistantMessage):
        return 0
    usage = message.usage
    return (
        usage.input_tokens
        + usage.output_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens
    )


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


def estimate_tokens(messages: Sequence[Any]) -> int:
    """Estimate the tokens of ``messages`` (see the module docstring).

    One backward pass that stops at the newest message reporting usage; each message's
    size is measured once in its lifetime.
    """
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
    return base + chars // 4 + images * IMAGE_TOKENS


@hookimpl(trylast=True)
def count_tokens(messages: tuple[Any, ...]) -> int:
    """The built-in estimate; answers when no other plugin does."""
    return estimate_tokens(messages)
