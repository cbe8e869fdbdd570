"""Secret redaction: in tool results, progress reports and the messages sent to the model.

The text rules and their checks are in :mod:`.secrets`; this module walks values.

What is redacted:

- a tool result (``after_tool_result``): every text block, and ``details``;
- a running tool's progress report (``filter_tool_update``): the whole value;
- the model's context (``transform_context``): the text of user messages, of assistant
  messages and of tool results, and compaction summaries. Never touched: tool calls (their
  ids and arguments, so every call keeps its result and the transcript stays valid),
  thinking blocks (their signatures would no longer verify), images, ``details`` (the model
  is not sent them) and custom message types (render them in ``convert_to_llm`` and redact
  there if they can hold secrets).

Values (``details``, progress reports) are walked the way they are serialised into events
and session files, not the way they print, so that no field is skipped:

- strings are redacted; ``bytes``/``bytearray`` are read as UTF-8 (undecodable bytes
  replaced) and, if that holds a secret, become the redacted text;
- dicts (keys and values), lists, tuples (named tuples too), sets and frozensets item by
  item; an enum by its value; a path by its text;
- a pydantic model through ``model_dump(mode="json")``, a dataclass instance through
  *all* its fields (``repr=False`` ones too); when either holds a secret it becomes the
  redacted plain data (a dict) in its place;
- ``None``, booleans, numbers, dates, times, UUIDs and decimals are kept;
- the value of a mapping key that names a secret (:data:`SECRET_KEYS`: ``password``,
  ``passwd``, ``token``, ``secret``, ``api_key``, ``authorization``, ``private_key``,
  compared case-insensitively, ``camelCase`` and ``kebab-case`` read as ``snake_case``,
  alone or as the last part of a longer key: ``db_password``, ``accessToken``,
  ``X-Api-Key``) is replaced whole by ``[REDACTED:<key>]``, at any depth, whatever it is
  (a string, a number, a list, a mapping), unless it is ``None``, a boolean or an empty
  string;
- anything else (an object that is not plain data, a model that cannot be dumped, a cycle,
  nesting deeper than :data:`MAX_DEPTH`) cannot be inspected, so it is replaced by a
  description (``<object of type X withheld: ...>``) rather than passed on unread.

A value holding no secret is returned as the same object. Messages are frozen: a changed
message is a copy (``model_copy``), an unchanged one is passed on as the same object, and
when nothing changed the hook returns ``None``.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import os
import re
import uuid
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
from .secrets import MARKER_PREFIX, TextRedactor

__all__ = ["MAX_DEPTH", "SECRET_KEYS", "Redactor", "secret_key_kind"]

MAX_DEPTH = 100
"""Nesting deeper than this is withheld rather than walked."""

SECRET_KEYS = ("password", "passwd", "token", "secret", "api_key", "authorization", "private_key")
"""Names of mapping keys whose values are secrets (see the module)."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")
_MARKER = re.compile(re.escape(MARKER_PREFIX) + r"[A-Za-z0-9_]+\]")
_LONGEST_KEY = 200
"""Longer mapping keys are not names (and are not split)."""

_KEPT = (bool, int, float, complex, datetime.date, datetime.time, datetime.timedelta)
_KEPT_TOO = (uuid.UUID, decimal.Decimal)


def secret_key_kind(key: Any) -> str | None:
    """The :data:`SECRET_KEYS` name a mapping ``key`` ends in, or ``None``."""
    if not isinstance(key, str) or len(key) > _LONGEST_KEY:
        return None
    snake = _SEPARATORS.sub("_", _CAMEL.sub("_", key).lower()).strip("_")
    for name in SECRET_KEYS:
        if snake == name or snake.endswith("_" + name):
            return name
    return None


def _secret_value(value: Any) -> bool:
    return not (value is None or isinstance(value, bool) or (isinstance(value, str) and not value))


def _withheld(value: Any, why: str) -> str:
    kind = type(value)
    return f"<object of type {kind.__module__}.{kind.__qualname__} withheld: {why}>"


class Redactor:
    """Applies redaction rules to text, values, tool results and messages."""

    __slots__ = ("_text", "rules")

    def __init__(self, rules: Sequence[RedactionRule]) -> None:
        self.rules = tuple(rules)
        self._text = TextRedactor(self.rules)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced (the same object when there is none)."""
        return self._text(text)

    def value(self, value: Any) -> Any:
        """``value`` with its secrets redacted, walked as it is serialised (see the module
        docs); ``value`` itself (the same object) when it holds no secret."""
        return self._walk(value, 0, set())

    def _walk(self, value: Any, depth: int, path: set[int]) -> Any:
        if value is None or isinstance(value, (str, *_KEPT, *_KEPT_TOO)):
            return self._text(value) if isinstance(value, str) else value
        if isinstance(value, bytes | bytearray | memoryview):
            decoded = bytes(value).decode("utf-8", "replace")
            cleaned = self._text(decoded)
            return value if cleaned is decoded else cleaned
        if isinstance(value, enum.Enum):
            inner = self._walk(value.value, depth, path)
            return value if inner is value.value else inner
        if isinstance(value, os.PathLike):
            shown = os.fspath(value)
            if not isinstance(shown, str):
                return self._walk(shown, depth, path)
            return value if self._text(shown) is shown else self._text(shown)
        if depth >= MAX_DEPTH:
            return _withheld(value, f"nested deeper than {MAX_DEPTH} levels")
        if id(value) in path:
            return _withheld(value, "it contains itself")
        path.add(id(value))
        try:
            return self._container(value, depth + 1, path)
        finally:
            path.discard(id(value))

    def _container(self, value: Any, depth: int, path: set[int]) -> Any:
        walk = self._walk
        if isinstance(value, dict):
            pairs = [
                (walk(k, depth, path), self._item(k, v, depth, path)) for k, v in value.items()
            ]
            originals = value.items()
            if all(nk is k and nv is v for (nk, nv), (k, v) in zip(pairs, originals, strict=True)):
                return value
            return {_hashable(key): item for key, item in pairs}
        if isinstance(value, list | tuple | set | frozenset):
            items = [walk(item, depth, path) for item in value]
            if all(new is old for new, old in zip(items, value, strict=True)):
                return value
            if isinstance(value, tuple) and hasattr(value, "_fields"):
                return type(value)(*items)  # a named tuple
            if isinstance(value, set | frozenset):
                try:
                    return type(value)(items)
                except TypeError:  # a walked item became a dict
                    return items
            return type(value)(items) if type(value) in (list, tuple) else items
        if isinstance(value, BaseModel):
            try:
                dumped = value.model_dump(mode="json")
            except Exception as error:  # an unserialisable field: nothing can be checked
                return _withheld(value, f"it cannot be dumped ({type(error).__name__})")
            cleaned = walk(dumped, depth, path)
            return value if cleaned is dumped else cleaned
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            cleaned = walk(fields, depth, path)
            return value if cleaned is fields else cleaned
        return _withheld(value, "mainspring-policy-pack cannot look inside it for secrets")

    def _item(self, key: Any, value: Any, depth: int, path: set[int]) -> Any:
        """A mapping's ``value`` under ``key``: withheld whole when the key names a secret
        (a value the rules replaced whole keeps their more telling marker)."""
        walked = self._walk(value, depth, path)
        kind = secret_key_kind(key)
        if kind is None or not _secret_value(value):
            return walked
        if isinstance(walked, str) and _MARKER.fullmatch(walked):
            return walked
        return f"{MARKER_PREFIX}{kind}]"

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


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        return repr(key)  # a redacted key that became plain data
    return key
