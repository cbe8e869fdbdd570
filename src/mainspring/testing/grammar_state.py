"""The state the event grammar checker keeps, and its rules for tools, phases and retries.

Private to :mod:`mainspring.testing.grammar`: :class:`ToolAndPhaseRules` holds the
handlers of the tool-execution, tool-result, phase, compaction and retry rules; the
checker there holds runs, turns and messages and inherits these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .grammar import EventGrammarError

_OUTSIDE_TURN = frozenset({"agent_start", "agent_end", "phase_change", "hook_error"})
_MESSAGE_EVENTS = frozenset({"message_start", "message_end"})
_MOVES = frozenset(
    {
        ("idle", "turn"),
        ("turn", "idle"),
        ("turn", "compaction"),
        ("compaction", "turn"),
        ("turn", "retry"),
        ("retry", "turn"),
    }
)
_UNSENT_STOP_REASONS = frozenset({"error", "aborted"})
END_REASONS = ("stop", "error", "aborted", "stopped_by_hook", "terminated")
"""The reasons a run may end with (``agent_end.reason``)."""
_CONTEXT = 5


def _get(obj: Any, name: str) -> Any:
    """A field of an event or message, as a dataclass/model attribute or a JSON dict key."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _tool_call_ids(message: Any) -> list[Any]:
    if isinstance(message, dict):
        content = message.get("content") or ()
        return [
            block.get("id")
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_call"
        ]
    return [call.id for call in getattr(message, "tool_calls", ())]


def _runs_with_phase_changes(items: Iterable[Any]) -> set[int]:
    """Ordinals (0-based, by agent_start) of the runs that contain a phase_change."""
    ordinal = -1
    found: set[int] = set()
    for event in items:
        kind = _get(event, "type")
        if kind == "agent_start":
            ordinal += 1
        elif kind == "phase_change":
            found.add(ordinal)
    return found


class _Turn:
    __slots__ = (
        "call_ids",
        "call_pos",
        "call_required",
        "call_result",
        "exec_names",
        "exec_open",
        "has_assistant",
        "index",
        "last_assistant",
        "next_result",
        "open_at",
        "open_empty",
        "open_role",
        "results",
        "terminates",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.open_role: Any = None
        self.open_at = -1
        self.open_empty = False
        self.has_assistant = False
        self.last_assistant: Any = None
        self.call_ids: list[Any] = []
        self.call_pos: dict[Any, int] = {}
        self.call_required: list[bool] = []
        self.call_result: list[bool] = []
        self.next_result = 0
        self.results: list[Any] = []
        self.exec_names: dict[Any, Any] = {}
        self.exec_open: set[Any] = set()
        self.terminates: dict[Any, bool] = {}
        """Per ended call: whether its tool_execution_end result set ``terminate``."""


class _Run:
    __slots__ = (
        "batch_terminated",
        "compaction_at",
        "compaction_reason",
        "next_turn",
        "phase",
        "run_id",
        "start",
        "tracks_phase",
        "turn",
    )

    def __init__(self, run_id: Any, start: int, tracks_phase: bool) -> None:
        self.run_id = run_id
        self.start = start
        self.tracks_phase = tracks_phase
        self.phase: Any = "idle"
        self.next_turn = 0
        self.turn: _Turn | None = None
        self.compaction_at = -1
        self.compaction_reason: Any = None
        self.batch_terminated = False
        """Whether the last turn ended with every tool call's result setting terminate."""


_Handler = Callable[[Any, _Run, "_Turn | None"], None]


class ToolAndPhaseRules:
    """The handlers of the tool, phase, compaction and retry rules (a mixin)."""

    kind: str | None
    index: int

    def fail(self, rule: str, message: str) -> EventGrammarError:
        raise NotImplementedError  # the checker's

    def _tool_result(self, turn: _Turn, call_id: Any) -> None:
        position = turn.call_pos.get(call_id)
        if position is None:
            raise self.fail(
                "tool-results", f"tool_result for {call_id!r}, which no tool call of the turn made"
            )
        if turn.call_result[position]:
            raise self.fail("tool-results", f"second tool_result for call {call_id!r}")
        if position < turn.next_result:
            raise self.fail(
                "tool-results",
                f"tool_result for {call_id!r} after the result of a later call (call order)",
            )
        for skipped in range(turn.next_result, position):
            if turn.call_required[skipped]:
                raise self.fail(
                    "tool-results",
                    f"tool_result for {call_id!r} before the result for the earlier call "
                    f"{turn.call_ids[skipped]!r} (call order)",
                )
        turn.call_result[position] = True
        turn.next_result = position + 1
        turn.results.append(call_id)

    # ---- tool executions

    def _tool_start(self, event: Any, run: _Run, turn: _Turn | None) -> None:
        assert turn is not None
        call_id = _get(event, "tool_call_id")
        if call_id in turn.exec_names:
            raise self.fail(
                "tool-execution", f"tool_execution_start for {call_id!r} twice in the turn"
            )
        turn.exec_names[call_id] = _get(event, "tool_name")
        turn.exec_open.add(call_id)

    def _started(self, event: Any, turn: _Turn | None) -> Any:
        assert turn is not None
        call_id = _get(event, "tool_call_id")
        if call_id not in turn.exec_names:
            raise self.fail(
                "tool-execution",
                f"{self.kind} for {call_id!r} without tool_execution_start in this turn",
            )
        if call_id not in turn.exec_open:
            raise self.fail("tool-execution", f"{self.kind} for {call_id!r} after its end")
        name = _get(event, "tool_name")
        if name != turn.exec_names[call_id]:
            raise self.fail(
                "tool-execution",
                f"{self.kind} for {call_id!r} names tool {name!r}, its start named "
                f"{turn.exec_names[call_id]!r}",
            )
        return call_id

    def _tool_update(self, event: Any, run: _Run, turn: _Turn | None) -> None:
        self._started(event, turn)

    def _tool_end(self, event: Any, run: _Run, turn: _Turn | None) -> None:
        call_id = self._started(event, turn)
        assert turn is not None
        turn.exec_open.discard(call_id)
        turn.terminates[call_id] = _get(_get(event, "result"), "terminate") is True

    # ---- phases, compaction, retry

    def _phase_change(self, event: Any, run: _Run, turn: _Turn | None) -> None:
        previous = _get(event, "previous")
        phase = _get(event, "phase")
        if previous != run.phase:
            raise self.fail(
                "phase", f"phase_change from {previous!r}, but the phase is {run.phase!r}"
            )
        if (previous, phase) not in _MOVES:
            raise self.fail("phase", f"phase_change {previous!r} -> {phase!r} is not allowed")
        if phase == "idle" and turn is not None:
            raise self.fail("phase", f"phase_change to 'idle' while turn {turn.index} is open")
        if previous == "compaction" and run.compaction_reason is not None:
            raise self.fail(
                "compaction",
                f"phase leaves 'compaction' while compaction_start at #{run.compaction_at} "
                "has no compaction_end",
            )
        run.phase = phase

    def _compaction_start(self, event: Any, run: _Run, turn: _Turn | None) -> None:
        if run.phase != "compaction":
            raise self.fail("compaction", f"compaction_start in phase {run.phase!r}")
        if run.compaction_reason is not None:
            raise self.fail(
                "compaction",
                f"compaction_start while compaction_start at #{run.compaction_at} is open",
            )
        reason = _get(event, "reason")
        run.compaction_reason = "" if reason is None else reason
        run.compaction_at = self.index

    def _compaction_end(self, event: Any, run: _Run, turn: _Turn | None) -> None:
        if run.compaction_reason is None:
            raise self.fail("compaction", "compaction_end without compaction_start")
        if run.phase != "compaction":
            raise self.fail("compaction", f"compaction_end in phase {run.phase!r}")
        reason = _get(event, "reason")
        if (reason or "") != run.compaction_reason:
            raise self.fail(
                "compaction",
                f"compaction_end reason {reason!r} differs from its start's "
                f"{run.compaction_reason!r}",
            )
        run.compaction_reason = None

    def _retry(self, event: Any, run: _Run, turn: _Turn | None) -> None:
        if run.phase != "retry":
            raise self.fail("compaction", f"retry event in phase {run.phase!r} (expected 'retry')")
        if turn is not None:
            turn.last_assistant = None  # the failed attempt's message is not kept
