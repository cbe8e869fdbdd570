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


_sizes: dict[int, tuple[Any, int, int]] = {}
"""Per-message (weakref, chars, images): messages are immutable, so their size is too."""


def _forget(key: int) -> Any:
    return lambda _ref: _sizes.pop(key, None)


def _message_size(message: Any) -> tuple[int, int]:
    key = id(message)
    hit = _sizes.get(key)
    if hit is not None:
        return hit[1], hit[2]
    chars, images = _message_chars(message)
    try:
        reference = weakref.ref(message, _forget(key))
    except TypeError:  # not weak-referenceable: just don't cache it
        return chars, images
    _sizes[key] = (reference, chars, images)
    return chars, images


def estimate_tokens(messages: Sequence[Any]) -> int:
    """Estimate the tokens of ``messages`` (see the module docstring)."""
    start, base = 0, 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.usage.total_tokens:
            usage = message.usage
            base = (
                usage.input_tokens
                + usage.output_tokens
                + usage.cache_read_tokens
                + usage.cache_write_tokens
            )
            start = index + 1
            break
    chars, images = 0, 0
    for message in messages[start:]:
        more_chars, more_images = _message_size(message)
        chars += more_chars + 16
        images += more_images
    return base + chars // 4 + images * IMAGE_TOKENS


@hookimpl(trylast=True)
def count_tokens(messages: tuple[Any, ...]) -> int:
    """The built-in estimate; answers when no other plugin does."""
    return estimate_tokens(messages)
