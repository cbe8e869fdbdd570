"""Lifecycle events: frozen values with a ``type``, a gapless ``seq``, ``run_id`` and ``turn``.

The kernel assigns ``seq`` (strictly increasing per agent, across runs, no gaps),
``run_id`` (one per ``prompt()``/``resume()``) and ``turn`` (the turn's 0-based index
within the run, ``None`` outside a turn). The ordering rules are checked by
:func:`mainspring.testing.check_event_grammar`.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, final

from pydantic import BaseModel

from .messages import AssistantMessage, ToolResultMessage
from .tools import ToolResult

__all__ = [
    "AgentEnd",
    "AgentEndReason",
    "AgentStart",
    "CompactionEnd",
    "CompactionStart",
    "Event",
    "HookErrorEvent",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Phase",
    "PhaseChange",
    "Retry",
    "ToolApprovalRequest",
    "ToolDecision",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "TurnEnd",
    "TurnStart",
    "event_to_dict",
    "event_to_json",
    "message_update",
]

Phase: TypeAlias = Literal["idle", "turn", "compaction", "retry"]
AgentEndReason: TypeAlias = Literal["stop", "error", "aborted", "stopped_by_hook", "terminated"]
DecidedBy: TypeAlias = Literal["gate", "approver", "api", "remembered", "timeout", "no_approver"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Event:
    type: ClassVar[str]
    seq: int
    run_id: str
    turn: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStart(_Event):
    """First event of every run."""

    type: ClassVar[str] = "agent_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEnd(_Event):
    """Last event of every run: the run's new ``messages``, why it ended, and the detail."""

    type: ClassVar[str] = "agent_end"
    messages: tuple[Any, ...]
    reason: AgentEndReason
    detail: str | None = None

    @property
    def text(self) -> str:
        """The text of the run's last assistant message (``""`` if it had none)."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return message.text
        return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStart(_Event):
    """A turn begins: inputs, one model request, its tool batch."""

    type: ClassVar[str] = "turn_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnd(_Event):
    """A turn ends: its assistant ``message`` (``None`` if it had none) and its results."""

    type: ClassVar[str] = "turn_end"
    message: AssistantMessage | None
    tool_results: tuple[ToolResultMessage, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageStart(_Event):
    """A message enters the transcript, or an assistant message begins streaming.

    A streamed assistant message starts empty: ``message`` is the partial message before
    any delta (no content), and the first delta arrives in the first ``message_update``.
    """

    type: ClassVar[str] = "message_start"
    message: Any


@final
class PartialMessage(tuple[Any, ...]):
    """The message as it stood at one delta, not yet built: cheap to take, built on demand.

    ``(assembler, ...)``: the stream assembler that took it (whose ``build_partial`` builds
    it), then what the assembler needs to build the message as it stood. Everything it
    refers to is immutable or append-only, so :meth:`build` returns the same message
    whenever it is called.
    """

    __slots__ = ()

    def build(self) -> AssistantMessage:
        """The partial :class:`~mainspring.AssistantMessage` this snapshot stands for."""
        message: AssistantMessage = self[0].build_partial(self)
        return message


@dataclass(frozen=True, slots=True, kw_only=True)
class _MessageUpdateFields(_Event):
    type: ClassVar[str] = "message_update"
    message: Any
    delta: Any


_stored_message: Any = _MessageUpdateFields.__dict__["message"]
"""The slot that holds a ``message_update``'s message, built or not yet built."""


class MessageUpdate(_MessageUpdateFields):
    """An assistant message grew by ``delta``; ``message`` is the partial message.

    The kernel builds ``message`` the first time it is read (most listeners look only at
    ``delta``); it is the same value whenever and however often it is read.
    """

    __slots__ = ()

    @property
    def message(self) -> AssistantMessage:
        """The partial assistant message, built on first read and kept."""
        value = _stored_message.__get__(self, MessageUpdate)
        if type(value) is PartialMessage:
            value = value.build()
            _stored_message.__set__(self, value)
        return value  # type: ignore[no-any-return]

    @message.setter
    def message(self, value: Any) -> None:
        # only the dataclass __init__ gets here: assignment is refused by __setattr__
        _stored_message.__set__(self, value)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageEnd(_Event):
    """A message is complete and is now part of the transcript."""

    type: ClassVar[str] = "message_end"
    message: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionStart(_Event):
    """A tool call begins preparation; ``args`` are the model's raw arguments."""

    type: ClassVar[str] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionUpdate(_Event):
    """A running tool reported progress through ``ctx.update``."""

    type: ClassVar[str] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    partial_result: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionEnd(_Event):
    """A tool call finished (or failed preparation); ``result`` is final."""

    type: ClassVar[str] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: ToolResult
    is_error: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseChange(_Event):
    """The phase machine moved from ``previous`` to ``phase``."""

    type: ClassVar[str] = "phase_change"
    previous: Phase
    phase: Phase


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionStart(_Event):
    """Compaction begins; ``reason`` is ``threshold`` or ``overflow``."""

    type: ClassVar[str] = "compaction_start"
    reason: str
    tokens_before: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionEnd(_Event):
    """Compaction ended; ``error`` is set when it failed and nothing was replaced.

    ``plugin`` names the plugin whose ``compact`` implementation replaced the transcript
    (the built-in fallback is ``"fallback_compaction"``), or the one whose failure ``error``
    reports; ``None`` when no implementation produced a result or the run was aborted.
    """

    type: ClassVar[str] = "compaction_end"
    reason: str
    tokens_before: int
    tokens_after: int
    error: str | None = None
    plugin: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry(_Event):
    """A retryable provider failure; the next attempt starts after ``delay_s``."""

    type: ClassVar[str] = "retry"
    attempt: int
    max_attempts: int
    delay_s: float
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HookErrorEvent(_Event):
    """A plugin's hook implementation failed; ``outcome`` says what the kernel did."""

    type: ClassVar[str] = "hook_error"
    hook: str
    plugin: str
    error: str
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDecision(_Event):
    """The audit record of a gate decision on one tool call."""

    type: ClassVar[str] = "tool_decision"
    tool_call_id: str
    tool_name: str
    decision: Literal["allow", "block"]
    plugin: str | None
    reason: str | None = None
    decided_by: DecidedBy = "gate"
    """Who decided: the gates (``plugin`` is the blocking gate, ``None`` for allow), an
    ``approver`` (``plugin`` is its name), the ``api`` (``agent.approve()``), a
    ``remembered`` approval, or the kernel when no answer came (``timeout``) or no
    approver is configured (``no_approver``)."""
    rule: str | None = None
    """The rule that decided, as the deciding gate named it (``Block``/``Ask``/``Edit``
    ``rule``), or ``None``."""
    edited_by: tuple[str, ...] = ()
    """The gates that edited the call's arguments (``Edit``), in order; when not empty,
    ``arguments`` holds the arguments that ran (or were refused)."""
    arguments: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolApprovalRequest(_Event):
    """A gate asked for approval of a call (``before_tool_call`` returned ``Ask``).

    ``plugin`` is the gate that asked and ``reason`` its reason. The call's
    ``tool_decision`` follows once an approver, ``agent.approve()`` or a timeout decided.
    """

    type: ClassVar[str] = "tool_approval_request"
    tool_call_id: str
    tool_name: str
    args: Any
    reason: str
    plugin: str
    question: Any = None
    """For a question the running call asks (``ctx.ask``): the question described
    (``asker``, ``message``, ``mode``, ``schema`` or ``url``); answered with
    ``agent.approve(tool_call_id, True, content=...)``, and no ``tool_decision`` follows."""


Event: TypeAlias = (
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | PhaseChange
    | CompactionStart
    | CompactionEnd
    | Retry
    | HookErrorEvent
    | ToolDecision
    | ToolApprovalRequest
)


_Builder: TypeAlias = Callable[[int, str, "int | None", dict[str, Any]], Any]


def _setter(cls: type[Any], name: str) -> Any:
    """The ``__set__`` of field ``name``'s slot in event class ``cls`` (for
    ``message_update``'s message, its slot, not the property in front of it)."""
    if cls is MessageUpdate and name == "message":
        return _stored_message.__set__
    return getattr(cls, name).__set__


def _builder(cls: type[Any]) -> _Builder:
    """A constructor of event class ``cls`` for the kernel: ``(seq, run_id, turn, payload)``.

    It sets the slots directly instead of going through the frozen dataclass ``__init__``
    (the public constructor, which stays as it is): the kernel's payloads are its own,
    already of the right types. A missing required field raises ``KeyError``.
    """
    fields = dataclasses.fields(cls)
    set_seq, set_run_id, set_turn = (_setter(cls, name) for name in ("seq", "run_id", "turn"))
    required = tuple(
        (f.name, _setter(cls, f.name))
        for f in fields[3:]
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    optional = tuple(
        (f.name, _setter(cls, f.name), f.default)
        for f in fields[3:]
        if f.default is not dataclasses.MISSING
    )
    new = object.__new__

    def build(seq: int, run_id: str, turn: int | None, payload: dict[str, Any]) -> Any:
        event = new(cls)
        set_seq(event, seq)
        set_run_id(event, run_id)
        set_turn(event, turn)
        for name, setter in required:
            setter(event, payload[name])
        for name, setter, default in optional:
            setter(event, payload.get(name, default))
        return event

    return build


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {"type": getattr(value, "type", type(value).__name__)}
        for item in dataclasses.fields(value):
            data[item.name] = _plain(getattr(value, item.name))
        return data
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


BUILDERS: dict[type[Any], _Builder] = {cls: _builder(cls) for cls in typing.get_args(Event)}
"""The kernel's constructor for each event class (see :func:`_builder`)."""


def message_update(
    seq: int, run_id: str, turn: int | None, message: PartialMessage | AssistantMessage, delta: Any
) -> MessageUpdate:
    """A ``message_update`` whose ``message`` is built when first read (the per-delta path)."""
    event = _new(MessageUpdate)
    _update_seq(event, seq)
    _update_run_id(event, run_id)
    _update_turn(event, turn)
    _stored_message.__set__(event, message)
    _update_delta(event, delta)
    return event


_new = object.__new__
_update_seq, _update_run_id, _update_turn, _update_delta = (
    _setter(MessageUpdate, name) for name in ("seq", "run_id", "turn", "delta")
)


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict of ``event``: ``type`` first, then its fields."""
    data: dict[str, Any] = {"type": event.type}
    for item in dataclasses.fields(event):
        data[item.name] = _plain(getattr(event, item.name))
    return data


def event_to_json(event: Event) -> str:
    """``event`` as one line of JSON (no newline), for logs and replays."""
    return json.dumps(event_to_dict(event), ensure_ascii=False, separators=(",", ":"))
