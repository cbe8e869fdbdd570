"""What hooks return to decide: a gate's :class:`Block`, :class:`Ask` or :class:`Edit`, an
approver's :class:`Approval` of an :class:`ApprovalRequest`, a ``compact`` hook's
:class:`CompactionResult`, a ``prepare_next_turn`` hook's :class:`NextTurn`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..providers.base import Model, ThinkingLevel
    from ..questions import Question

__all__ = [
    "Approval",
    "ApprovalRequest",
    "Ask",
    "Block",
    "CompactionResult",
    "NextTurn",
    "RememberKind",
]


@dataclass(frozen=True, slots=True)
class Block:
    """Returned by ``before_tool_call`` to refuse a call; ``reason`` reaches the model.

    ``rule`` names the rule of the gate that decided (recorded in ``tool_decision.rule``).
    """

    reason: str
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class Ask:
    """Returned by ``before_tool_call``: the call runs only if an approver allows it.

    ``reason`` is shown to the approver (a person, through the CLI or an application). A
    ``Block`` from any gate still wins over an ``Ask``. ``rule`` names the rule that asked.
    """

    reason: str
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    """Returned by ``before_tool_call``: run the call with ``arguments`` instead.

    The new arguments are validated against the tool's schema (invalid ones block the
    call, fail closed); the gates after this one see the edited call and arguments, and
    the call's ``tool_decision`` names every gate that edited it (``edited_by``) and the
    arguments that ran. ``reason`` says why (recorded, never shown to the model), ``rule``
    which rule edited.
    """

    arguments: Mapping[str, Any]
    reason: str = ""
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One tool call waiting for a decision: what ``request_approval`` is asked about.

    ``arguments`` are the call's read-only arguments as the model sent them; ``plugin`` is
    the gate that asked, ``reason`` its reason. With ``question`` set, the running call
    asks the person (:mod:`mainspring.questions`): ``arguments`` is the question
    described, ``plugin`` who asks, and only an answer with ``content`` accepts it.
    """

    tool_call_id: str
    tool_name: str
    arguments: Any
    reason: str
    plugin: str
    question: Question | None = None


RememberKind = Literal["call", "prefix", "glob", "tool"]
"""What an allowed approval is remembered for (see :class:`Approval`)."""

REMEMBER_KINDS: tuple[RememberKind, ...] = ("call", "prefix", "glob", "tool")


@dataclass(frozen=True, slots=True)
class Approval:
    """An approver's answer to one :class:`ApprovalRequest`.

    ``allow`` must be ``True`` or ``False`` itself: anything else (``"no"``, ``1``,
    ``None``) raises ``TypeError``, and an approver that raises blocks its calls. Only an
    ``allow`` is remembered, for the rest of the session, as ``remember`` says:

    - ``"call"``: later calls of the tool with exactly these arguments;
    - ``"prefix"`` / ``"glob"``: later calls whose string ``argument`` starts with
      ``pattern`` (followed only by plain words) / is a path matching the glob
      ``pattern``, every other argument exactly as now (the rules:
      :mod:`mainspring.approval_scopes`); the approved call must itself be covered, or it
      is refused;
    - ``"tool"``: every later call of the tool, whatever its arguments.

    ``reason`` is recorded in the ``tool_decision`` event (and, for a refusal, shown to
    the model). ``content`` answers a question (:mod:`mainspring.questions`): a form's
    values, or ``{}`` for a URL; given only with ``allow=True``.
    """

    allow: bool
    reason: str | None = None
    remember: RememberKind | None = None
    argument: str | None = None
    pattern: str | None = None
    content: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if type(self.allow) is not bool:
            raise TypeError(f"Approval.allow must be True or False, not {self.allow!r}")
        if self.content is not None and not (self.allow and isinstance(self.content, Mapping)):
            raise ValueError("Approval.content is a mapping, given only with allow=True")
        if self.remember is not None and self.remember not in REMEMBER_KINDS:
            raise ValueError(
                f"Approval.remember must be None or one of {REMEMBER_KINDS}, not {self.remember!r}"
            )
        scoped = self.remember in ("prefix", "glob")
        for name in ("argument", "pattern"):
            value = getattr(self, name)
            if scoped and not (isinstance(value, str) and value):
                raise ValueError(f'remember="{self.remember}" needs a non-empty {name}')
            if not scoped and value is not None:
                raise ValueError(f'{name} is given only with remember="prefix" or "glob"')


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """Returned by ``compact``: ``messages`` becomes the transcript."""

    messages: Sequence[Any]
    summary: str | None = None
    details: Any = field(default=None)


@dataclass(frozen=True, slots=True)
class NextTurn:
    """Returned by ``prepare_next_turn``: what the rest of the run sends, from the next
    model request on (``None`` leaves a field as it is).

    - ``messages``: the context the next request sends in place of the transcript (for
      example a compacted one); the messages of later turns are added after it. The
      transcript itself (``agent.state.messages``, the session file) keeps every message.
    - ``system_prompt``: the system prompt of the rest of the run.
    - ``model``: a :class:`~mainspring.Model` or ``"provider:model-id"`` for the rest of
      the run.
    - ``thinking_level``: the thinking level of the rest of the run.

    The agent's own configuration (``agent.configure``) is not changed.
    """

    messages: Sequence[Any] | None = None
    system_prompt: str | None = None
    model: Model | str | None = None
    thinking_level: ThinkingLevel | None = None
