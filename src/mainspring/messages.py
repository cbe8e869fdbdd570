"""Transcript messages: frozen pydantic models discriminated by ``role``.

Every value that crosses the kernel/plugin boundary is immutable: sequences are tuples
and models are frozen, so a listener or a plugin can never change the transcript behind
the kernel's back. Custom message types are any frozen model with a ``role`` outside
``user``/``assistant``/``tool_result``; they live in the transcript and in session files,
and the ``convert_to_llm`` hook decides what the model sees of them.

Every message type here has ``.text``: a user message's string (or its text blocks
joined), an assistant reply's or a tool result's text blocks joined (thinking and images
left out), a compaction summary's ``summary``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .effects import Labels

__all__ = [
    "LLM_ROLES",
    "AssistantContent",
    "AssistantMessage",
    "CompactionSummary",
    "FrozenDict",
    "FrozenList",
    "ImageContent",
    "LLMMessage",
    "Message",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolArgs",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "freeze",
    "message_text",
    "share_field_sets",
    "thaw",
]


def _now() -> float:
    return time.time()


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


_FIELD_SETS: dict[frozenset[str], set[str]] = {}
"""One set per combination of given field names (a bounded number: subsets of each
model's declared fields that code actually gives)."""


def share_field_sets(model: Any) -> None:
    """Let ``model`` and the models directly inside it (a field, or an item of a tuple
    field) share pydantic's record of the fields they were given (``model_fields_set``)
    with every model given the same ones.

    For frozen models without extra fields only (the messages and blocks here, tool
    results, custom message types): their record never changes (pydantic copies it
    before ``model_copy(update=...)`` adds to it). That record is a ``set``, 216 bytes at
    the least and 728 for a reply: a large part of a kept message, so the kernel calls
    this on each message it keeps in a transcript. Anything else is left as it is.
    """
    if not _share_record(model):
        return
    for value in model.__dict__.values():
        if type(value) is tuple:
            for item in value:
                _share_record(item)
        else:
            _share_record(value)


def _share_record(model: Any) -> bool:
    if (
        not isinstance(model, BaseModel)
        or not model.model_config.get("frozen")
        or model.__pydantic_extra__ is not None
    ):
        return False
    given = model.__pydantic_fields_set__
    shared = _FIELD_SETS.setdefault(frozenset(given), given)
    if shared is not given:
        object.__setattr__(model, "__pydantic_fields_set__", shared)
    return True


class TextContent(_Frozen):
    """A block of plain text."""

    type: Literal["text"] = "text"
    text: str


class ThinkingContent(_Frozen):
    """Model reasoning; ``signature`` is the provider's opaque proof, replayed verbatim."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class ImageContent(_Frozen):
    """An image, base64-encoded in ``data``."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str


class FrozenDict(dict[str, Any]):
    """A read-only dict: tool-call arguments cannot be changed once in the transcript.

    It is still a ``dict`` (JSON, pydantic and ``isinstance`` treat it as one); use
    :func:`thaw` (or ``copy.deepcopy``) for a mutable copy.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "read-only: tool-call arguments and settings cannot be changed in place; "
            "copy them with mainspring.thaw()"
        )

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: Any) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (thaw(self),))


class ToolArgs(FrozenDict):
    """The arguments of a tool call as every permission gate sees them, for every tool.

    A read-only mapping of the argument names of the tool's schema (the names the model
    sends) to their validated values: ``args["command"]``, ``args.get("command")`` and
    ``args.command`` all read the same value (an argument named like a ``dict`` method,
    such as ``items``, is read with ``args["items"]``). Nested objects are ``ToolArgs``
    too, and lists are read-only. For a tool with a pydantic parameters model the values
    are the validated model's (coerced, defaults filled in), for a JSON-Schema tool the
    model's arguments themselves. Still a ``dict``: :func:`thaw` gives a mutable copy.
    """

    __slots__ = ()

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> ToolArgs:
        """A deep read-only copy of ``value``, every nested mapping a ``ToolArgs``."""
        return cls({key: _gate_value(item) for key, item in value.items()})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            known = ", ".join(map(repr, self)) or "none"
            raise AttributeError(f"no argument {name!r} (the arguments: {known})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._read_only()

    def __delattr__(self, name: str) -> None:
        self._read_only()

    def __repr__(self) -> str:
        return f"ToolArgs({dict.__repr__(self)})"


def _gate_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return ToolArgs.of(value)
    if isinstance(value, list | tuple):
        return FrozenList(_gate_value(item) for item in value)
    return value


class FrozenList(list[Any]):
    """A read-only list inside :class:`FrozenDict` values."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "read-only: tool-call arguments and settings cannot be changed in place; "
            "copy them with mainspring.thaw()"
        )

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = remove = pop = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: Any) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (thaw(self),))


def freeze(value: Any) -> Any:
    """A deep read-only copy of JSON-like ``value`` (dicts and lists frozen)."""
    if isinstance(value, dict):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """A deep mutable copy of ``value`` (the inverse of :func:`freeze`)."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    return value


class ToolCall(_Frozen):
    """A request from the model to run tool ``name`` with ``arguments``.

    ``arguments`` is read-only (a :class:`FrozenDict`), so no listener or plugin can change
    what a call runs with or what the transcript says it ran with.
    """

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @field_validator("arguments", mode="after")
    @classmethod
    def _freeze_arguments(cls, value: dict[str, Any]) -> dict[str, Any]:
        frozen: dict[str, Any] = freeze(value)
        return frozen


class Usage(_Frozen):
    """Token accounting for one model response."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        """Every token the response touched, input and output."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


StopReason: TypeAlias = Literal["stop", "length", "repetition", "tool_use", "error", "aborted"]
"""Why a reply ended. ``length``: the output-token limit cut it; ``repetition``: the
provider's repetition guard cut it because it had started to loop (see
:mod:`mainspring.providers.repetition`); either way its tool calls are not run."""
UserContent: TypeAlias = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent: TypeAlias = Annotated[
    TextContent | ThinkingContent | ToolCall, Field(discriminator="type")
]


class UserMessage(_Frozen):
    """A message from the person (or program) driving the agent."""

    role: Literal["user"] = "user"
    content: str | tuple[UserContent, ...]
    timestamp: float = Field(default_factory=_now)

    @property
    def text(self) -> str:
        """The text: the content itself when it is a string, else its text blocks joined."""
        content = self.content
        if isinstance(content, str):
            return content
        return "".join(block.text for block in content if isinstance(block, TextContent))


class AssistantMessage(_Frozen):
    """A model reply, assembled by the kernel from the provider's stream.

    ``stop_reason`` is ``error`` or ``aborted`` for a reply that failed; such a message
    keeps its text and thinking, never an incomplete tool call, and carries the cause in
    ``error_message``.
    """

    role: Literal["assistant"] = "assistant"
    content: tuple[AssistantContent, ...] = ()
    provider: str = ""
    model: str = ""
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    response_id: str | None = None
    timestamp: float = Field(default_factory=_now)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of this reply, in the order the model made them."""
        return tuple(block for block in self.content if isinstance(block, ToolCall))

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


class ToolResultMessage(_Frozen):
    """The outcome of one tool call, sent back to the model.

    ``labels`` (see :mod:`mainspring.effects`) are the result's: what its content may be
    trusted with.
    """

    role: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool_name: str
    content: tuple[UserContent, ...] = ()
    details: Any = None
    is_error: bool = False
    labels: Labels | None = None
    timestamp: float = Field(default_factory=_now)

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


LLMMessage: TypeAlias = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]
"""The three roles a provider understands."""

Message: TypeAlias = BaseModel
"""Any transcript entry: an :data:`LLMMessage` or a custom frozen model with a ``role``."""


class CompactionSummary(_Frozen):
    """Stands for the messages a compaction removed; rendered to the model as text.

    ``summary`` is what the model is told about the removed part; ``removed`` counts the
    messages it replaces (across repeated compactions). ``labels`` is the join of the
    labels of what it replaced (:func:`mainspring.effects.join_labels`): a summary of
    untrusted mail is untrusted.
    """

    role: Literal["compaction"] = "compaction"
    summary: str
    removed: int = 0
    tokens_before: int = 0
    details: Any = None
    labels: Labels | None = None
    timestamp: float = Field(default_factory=_now)

    @property
    def text(self) -> str:
        """The summary (what the model is told about the removed part)."""
        return self.summary


LLM_ROLES: frozenset[str] = frozenset({"user", "assistant", "tool_result"})


_M = TypeVar("_M", bound=BaseModel)
_set_attribute = object.__setattr__


def trusted_construct(cls: type[_M], values: dict[str, Any]) -> _M:
    """Build ``cls`` from ``values`` that already hold every field, valid, without checks.

    What :meth:`pydantic.BaseModel.model_construct` does, minus its per-field default and
    alias handling, for the kernel's hot path (one partial message per streamed delta).
    The caller guarantees ``values`` is complete and valid.
    """
    instance = cls.__new__(cls)
    _set_attribute(instance, "__dict__", values)
    _set_attribute(instance, "__pydantic_fields_set__", set(values))
    _set_attribute(instance, "__pydantic_extra__", None)
    _set_attribute(instance, "__pydantic_private__", None)
    return instance


def message_text(message: BaseModel) -> str:
    """Best-effort plain text of any message, for logs, estimates and terminals."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ThinkingContent):
            parts.append(block.thinking)
    return "".join(parts)
