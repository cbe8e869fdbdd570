"""Errors and hook result values shared by the kernel and plugins."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .providers.base import Model, ThinkingLevel
    from .questions import Question

__all__ = [
    "AgentBusyError",
    "Approval",
    "ApprovalRequest",
    "Ask",
    "Block",
    "CompactionResult",
    "HookError",
    "HookTimeoutError",
    "NextTurn",
    "PluginLoadError",
    "RememberKind",
    "StopRun",
    "describe_error",
]


class AgentBusyError(RuntimeError):
    """A run is active: ``prompt()``, ``resume()`` and ``reset()`` must wait for idle."""

    def __init__(self, action: str) -> None:
        super().__init__(
            f"cannot {action}() while a run is active: use agent.steer() to redirect the "
            "current run, agent.follow_up() to queue the next request, or await "
            "agent.wait_for_idle() first"
        )


class PluginLoadError(RuntimeError):
    """A plugin could not be loaded or registered; the agent refuses to start.

    ``plugin`` is the plugin's name (the entry point name for installed plugins);
    ``distribution`` and ``version`` are set for installed plugins.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin: str | None = None,
        distribution: str | None = None,
        version: str | None = None,
    ) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.distribution = distribution
        self.version = version


class CapabilityError(PermissionError):
    """A plugin asked its :class:`~mainspring.kernel.agent_view.AgentView` for an action its
    granted capabilities do not allow; ``capability`` is the one it needs."""

    def __init__(self, message: str, *, plugin: str, capability: str) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.capability = capability


class HookError(Exception):
    """Hook implementation ``plugin`` of ``hook`` raised (or broke an invariant).

    The original exception is ``__cause__``; the kernel decides what the failure means
    (see the failure column of the hook table).
    """

    def __init__(self, hook: str, plugin: str, cause: BaseException | str) -> None:
        self.hook = hook
        self.plugin = plugin
        self.cause_text = cause if isinstance(cause, str) else describe_error(cause)
        super().__init__(f"{hook} implementation of plugin {plugin!r} failed: {self.cause_text}")


class HookTimeoutError(TimeoutError):
    """A hook, listener or tool did not finish within its deadline (``timeout_s``)."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"timed out after {timeout_s:g} s")
        self.timeout_s = timeout_s


def describe_error(error: BaseException) -> str:
    """``Type: message`` (``Type`` alone when the message is empty); a timeout's own text."""
    if isinstance(error, HookTimeoutError):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class StopRun(Exception):
    """Raised by a run-time hook to end the run deliberately.

    The run ends with ``agent_end.reason="stopped_by_hook"`` and ``detail=reason``;
    queues are kept.
    """

    def __init__(self, reason: str = "stopped by a plugin") -> None:
        super().__init__(reason)
        self.reason = reason


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
