"""Content for spans, in the shapes of the GenAI semantic conventions (opt-in only).

Messages become ``{"role", "parts": [...]}`` objects (``gen_ai.input.messages``,
``gen_ai.output.messages``): text parts ``{"type": "text", "content"}``, thinking
``{"type": "reasoning", "content"}``, tool calls ``{"type": "tool_call", "id", "name",
"arguments"}``, tool results (role ``tool``) ``{"type": "tool_call_response", "id",
"response"}``; images are described (``{"type": "blob", "modality": "image",
"mime_type"}``), never copied. A compaction summary is a ``user`` text, as the model is
sent it; other custom roles are left out.

Every text is cut at ``limit`` characters (the cut is marked). Tool arguments are
recorded as the model wrote them, except values under secret-looking keys
(:data:`mainspring.logs.SECRET_KEY_PATTERN`), which become ``"[redacted]"``.
Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..logs import SECRET_KEY_PATTERN
from ..messages import ImageContent, TextContent, ThinkingContent, ToolCall

__all__ = ["cap", "encode", "input_tail", "mask_secrets", "message_parts", "result_text"]

REDACTED = "[redacted]"


def cap(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit} more chars]"


def mask_secrets(value: Any) -> Any:
    """A copy of JSON-like ``value`` whose values under secret-looking keys are masked."""
    if isinstance(value, Mapping):
        return {
            str(key): REDACTED if SECRET_KEY_PATTERN.search(str(key)) else mask_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_secrets(item) for item in value]
    return value


def _block(block: Any, limit: int) -> dict[str, Any] | None:
    if isinstance(block, TextContent):
        return {"type": "text", "content": cap(block.text, limit)}
    if isinstance(block, ThinkingContent):
        return {"type": "reasoning", "content": cap(block.thinking, limit)}
    if isinstance(block, ToolCall):
        return {
            "type": "tool_call",
            "id": block.id,
            "name": block.name,
            "arguments": mask_secrets(block.arguments),
        }
    if isinstance(block, ImageContent):
        return {"type": "blob", "modality": "image", "mime_type": block.mime_type}
    return None


def _parts(content: Any, limit: int) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": cap(content, limit)}]
    return [part for block in content if (part := _block(block, limit)) is not None]


def result_text(content: Iterable[Any], limit: int) -> str:
    """The text of a tool result's content blocks (images described), cut at ``limit``."""
    pieces = []
    for block in content:
        if isinstance(block, TextContent):
            pieces.append(block.text)
        elif isinstance(block, ImageContent):
            pieces.append(f"[image {block.mime_type}]")
    return cap("".join(pieces), limit)


def message_parts(message: Any, limit: int, *, output: bool = False) -> dict[str, Any] | None:
    """``message`` as a conventions message object (``None`` for custom roles).

    ``output`` adds the ``finish_reason`` of an assistant message.
    """
    role = getattr(message, "role", None)
    if role == "user":
        return {"role": "user", "parts": _parts(message.content, limit)}
    if role == "assistant":
        encoded: dict[str, Any] = {"role": "assistant", "parts": _parts(message.content, limit)}
        if output:
            encoded["finish_reason"] = message.stop_reason
        return encoded
    if role == "tool_result":
        response = result_text(message.content, limit)
        part = {"type": "tool_call_response", "id": message.tool_call_id, "response": response}
        return {"role": "tool", "parts": [part]}
    if role == "compaction":
        return {"role": "user", "parts": [{"type": "text", "content": cap(message.summary, limit)}]}
    return None


def input_tail(messages: tuple[Any, ...]) -> tuple[Any, ...]:
    """The messages of a request after its last assistant message: what the model had
    not seen in an earlier reply (the whole request when it has no assistant message)."""
    for index in range(len(messages) - 1, -1, -1):
        if getattr(messages[index], "role", None) == "assistant":
            return messages[index + 1 :]
    return messages


def encode(value: Any) -> str:
    """``value`` as compact JSON (anything not JSON-able as its ``repr``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
