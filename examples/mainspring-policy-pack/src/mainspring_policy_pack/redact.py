"""Secret redaction: in tool results and in the messages sent to the model.

A match of a :class:`~mainspring_policy_pack.config.RedactionRule` becomes
``[REDACTED:<kind>]`` (only its ``secret`` group, when the pattern has one). Rules apply
in order, each to the output of the one before.

What is redacted:

- a tool result (``after_tool_result``): every text block, and ``details`` recursively
  (strings in dicts, lists and tuples; a pydantic model is dumped to JSON-like data first;
  any other object is replaced by its redacted ``repr``, since it could hold a secret).
  Images are kept as they are.
- the model's context (``transform_context``): the text of user messages, of assistant
  messages and of tool results, and compaction summaries. Never touched: tool calls (their
  ids and arguments, so every call keeps its result and the transcript stays valid),
  thinking blocks (their signatures would no longer verify), images, ``details`` (the model
  is not sent them) and custom message types (render them in ``convert_to_llm`` and redact
  there if they can hold secrets).

Messages are frozen: a changed message is a copy (``model_copy``), an unchanged one is
passed on as the same object, and when nothing changed the hook returns ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from mainspring import (
    AssistantMessage,
    CompactionSummary,
    TextContent,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)

from .config import RedactionRule

__all__ = ["Redactor"]


class Redactor:
    """Applies redaction rules to text, tool results and messages."""

    __slots__ = ("rules",)

    def __init__(self, rules: Sequence[RedactionRule]) -> None:
        self.rules = tuple(rules)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced (the same object when there is none)."""
        for rule in self.rules:
            if rule.regex.search(text) is not None:
                text = rule.regex.sub(_replacement(rule), text)
        return text

    def value(self, value: Any) -> Any:
        """``value`` with every string in it redacted; ``value`` itself (the same object)
        when it holds no secret (see the module docs)."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            items = [(self.value(key), self.value(item)) for key, item in value.items()]
            if all(
                new_key is key and new is item
                for (new_key, new), (key, item) in zip(items, value.items(), strict=True)
            ):
                return value
            return dict(items)
        if isinstance(value, list | tuple):
            redacted = [self.value(item) for item in value]
            if all(new is old for new, old in zip(redacted, value, strict=True)):
                return value
            return type(value)(redacted)
        if isinstance(value, BaseModel):
            dumped = value.model_dump(mode="json")
            cleaned = self.value(dumped)
            return value if cleaned is dumped else cleaned
        shown = repr(value)
        cleaned_repr = self.text(shown)
        return value if cleaned_repr == shown else cleaned_repr

    def result(self, result: ToolResult) -> ToolResult | None:
        """A redacted copy of ``result``, or ``None`` if it holds no secret."""
        content = self._blocks(result.content)
        details = self.value(result.details)
        if content is result.content and details is result.details:
            return None
        return ToolResult(content, details=details, is_error=result.is_error)

    def _blocks(self, blocks: tuple[Any, ...]) -> tuple[Any, ...]:
        changed = False
        out = []
        for block in blocks:
            if isinstance(block, TextContent):
                text = self.text(block.text)
                if text is not block.text:
                    block = block.model_copy(update={"text": text})
                    changed = True
            out.append(block)
        return tuple(out) if changed else blocks

    def message(self, message: Any) -> Any:
        """``message`` with its text redacted: a copy if anything changed, else itself."""
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                text = self.text(message.content)
                return (
                    message
                    if text is message.content
                    else message.model_copy(update={"content": text})
                )
            blocks = self._blocks(message.content)
        elif isinstance(message, AssistantMessage | ToolResultMessage):
            blocks = self._blocks(message.content)
        elif isinstance(message, CompactionSummary):
            summary = self.text(message.summary)
            return (
                message
                if summary is message.summary
                else message.model_copy(update={"summary": summary})
            )
        else:
            return message
        return (
            message if blocks is message.content else message.model_copy(update={"content": blocks})
        )

    def messages(self, messages: Sequence[Any]) -> tuple[Any, ...] | None:
        """The redacted messages, or ``None`` if none of them changed."""
        out = tuple(self.message(message) for message in messages)
        if all(new is old for new, old in zip(out, messages, strict=True)):
            return None
        return out


def _replacement(rule: RedactionRule) -> Any:
    marker = f"[REDACTED:{rule.kind}]"
    if "secret" not in rule.regex.groupindex:
        return marker

    def replace(match: re.Match[str]) -> str:
        start, end = match.span("secret")
        if start < 0:
            return marker
        whole = match.group(0)
        offset = match.start()
        return whole[: start - offset] + marker + whole[end - offset :]

    return replace
