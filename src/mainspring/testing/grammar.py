"""The event grammar checker: does an event stream keep the ordering rules of DESIGN §5?

:func:`check_event_grammar` walks the events once (O(n) time, memory proportional to one
turn plus the run ids seen) and raises :class:`EventGrammarError` on the first violation,
naming the rule (a key of :data:`RULES`), the offending event's index and type, and the
events just before it.

Events are the frozen dataclasses of :mod:`mainspring.events`. Their JSON form is
accepted too (dicts from ``json.loads(event_to_json(event))``, whose messages are dicts),
so a logged run can be checked as well as a live one.

Decisions where the contract leaves room:

- The phase rule applies to a run only if that run has at least one ``phase_change``
  (hand-made sequences may omit phases); ``compaction_*`` and ``retry`` events always
  require their phase, so they imply phase changes.
- Tool calls of an assistant message that ended with ``stop_reason`` ``error`` or
  ``aborted`` are never sent to a provider, so they *may* get a tool result (at most
  one, in call order) but need not. Calls of every other assistant message, including
  ``length``, need exactly one.
- ``turn_end`` and ``turn_start`` are only allowed in phase ``turn``, and the phase may
  only become ``idle`` when no turn is open.
- A ``run_id`` may not be reused by a later run.
- When checks of several rules fail on one event, the order is: ``seq``,
  ``run-bounds``, ``user-in-turn``/``turn-nesting``, then the event's own rules.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

OUTSIDE_TURN = frozenset({"agent_start", "agent_end", "phase_change", "hook_error"})
MESSAGE_EVENTS = frozenset({"message_start", "message_end"})
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
UNSENT_STOP_REASONS = frozenset({"error", "aborted"})
END_REASONS = ("stop", "error", "aborted", "stopped_by_hook", "terminated")
"""The reasons a run may end with (``agent_end.reason``)."""
CONTEXT = 5


def field_of(obj: Any, name: str) -> Any:
    """A field of an event or message, as a dataclass/model attribute or a JSON dict key."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def tool_call_ids(message: Any) -> list[Any]:
    if isinstance(message, dict):
        content = message.get("content") or ()
        return [
            block.get("id")
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_call"
        ]
    return [call.id for call in getattr(message, "tool_calls", ())]


def runs_with_phase_changes(items: Iterable[Any]) -> set[int]:
    """Ordinals (0-based, by agent_start) of the runs that contain a phase_change."""
    ordinal = -1
    found: set[int] = set()
    for event in items:
        kind = field_of(event, "type")
        if kind == "agent_start":
            ordinal += 1
        elif kind == "phase_change":
            found.add(ordinal)
    return found


class TurnState:
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


class RunState:
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
        self.turn: TurnState | None = None
        self.compaction_at = -1
        self.compaction_reason: Any = None
        self.batch_terminated = False
        """Whether the last turn ended with every tool call's result setting terminate."""


Handler = Callable[[Any, RunState, "TurnState | None"], None]


class ToolAndPhaseRules:
    """The handlers of the tool, phase, compaction and retry rules (a mixin)."""

    kind: str | None
    index: int

    def fail(self, rule: str, message: str) -> EventGrammarError:
        raise NotImplementedError  # the checker's

    def _tool_result(self, turn: TurnState, call_id: Any) -> None:
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

    def _tool_start(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        assert turn is not None
        call_id = field_of(event, "tool_call_id")
        if call_id in turn.exec_names:
            raise self.fail(
                "tool-execution", f"tool_execution_start for {call_id!r} twice in the turn"
            )
        turn.exec_names[call_id] = field_of(event, "tool_name")
        turn.exec_open.add(call_id)

    def _started(self, event: Any, turn: TurnState | None) -> Any:
        assert turn is not None
        call_id = field_of(event, "tool_call_id")
        if call_id not in turn.exec_names:
            raise self.fail(
                "tool-execution",
                f"{self.kind} for {call_id!r} without tool_execution_start in this turn",
            )
        if call_id not in turn.exec_open:
            raise self.fail("tool-execution", f"{self.kind} for {call_id!r} after its end")
        name = field_of(event, "tool_name")
        if name != turn.exec_names[call_id]:
            raise self.fail(
                "tool-execution",
                f"{self.kind} for {call_id!r} names tool {name!r}, its start named "
                f"{turn.exec_names[call_id]!r}",
            )
        return call_id

    def _tool_update(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        self._started(event, turn)

    def _tool_end(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        call_id = self._started(event, turn)
        assert turn is not None
        turn.exec_open.discard(call_id)
        turn.terminates[call_id] = field_of(field_of(event, "result"), "terminate") is True

    # ---- phases, compaction, retry

    def _phase_change(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        previous = field_of(event, "previous")
        phase = field_of(event, "phase")
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

    def _compaction_start(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        if run.phase != "compaction":
            raise self.fail("compaction", f"compaction_start in phase {run.phase!r}")
        if run.compaction_reason is not None:
            raise self.fail(
                "compaction",
                f"compaction_start while compaction_start at #{run.compaction_at} is open",
            )
        reason = field_of(event, "reason")
        run.compaction_reason = "" if reason is None else reason
        run.compaction_at = self.index

    def _compaction_end(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        if run.compaction_reason is None:
            raise self.fail("compaction", "compaction_end without compaction_start")
        if run.phase != "compaction":
            raise self.fail("compaction", f"compaction_end in phase {run.phase!r}")
        reason = field_of(event, "reason")
        if (reason or "") != run.compaction_reason:
            raise self.fail(
                "compaction",
                f"compaction_end reason {reason!r} differs from its start's "
                f"{run.compaction_reason!r}",
            )
        run.compaction_reason = None

    def _retry(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        if run.phase != "retry":
            raise self.fail("compaction", f"retry event in phase {run.phase!r} (expected 'retry')")
        if turn is not None:
            turn.last_assistant = None  # the failed attempt's message is not kept


__all__ = ["RULES", "EventGrammarError", "check_event_grammar"]

RULES: dict[str, str] = {
    "seq": "seq increases by exactly 1 from each event to the next (the first may be any int)",
    "run-bounds": (
        "every run starts with agent_start and ends with agent_end; no event outside a run; "
        "every event of a run carries its run_id; a new agent_start only after the previous "
        "run's agent_end; run ids are not reused; the last run is complete"
    ),
    "turn-nesting": (
        "turn_start/turn_end alternate inside a run, turn indexes count 0, 1, 2, ... per run; "
        "every event inside a turn has that turn's index; only agent_start, agent_end, "
        "phase_change and hook_error occur outside a turn, with turn=None; agent_end comes "
        "after the run's last turn_end"
    ),
    "message-nesting": (
        "each message is message_start, message_update*, message_end with one role; "
        "messages do not interleave; message_update only for assistant messages; "
        "a message that gets updates starts empty (its message_start has no content: "
        "the first delta arrives in the first message_update); "
        "no message is open at turn_end"
    ),
    "tool-execution": (
        "each tool_execution_start id occurs once per turn; its updates, approval requests "
        "and single tool_execution_end follow it in the same turn, with the same tool_name; "
        "no update, approval request or end without a start; none after the end"
    ),
    "tool-results": (
        "every tool call of an assistant message gets exactly one tool_result message in the "
        "same turn before turn_end, in call order (optional for error/aborted messages); no "
        "tool_result without a matching call; every tool execution of the turn ended before "
        "turn_end; turn_end.tool_results are the turn's tool-result messages, in order"
    ),
    "turn-end-message": (
        "turn_end.message is the last assistant message ended in the turn, or None if the "
        "turn had none; a retry event discards the failed attempt's message, and None is "
        "also right after a failed attempt that was not kept (the run stopped before a "
        "retry or a re-send)"
    ),
    "phase": (
        "phase_change.previous is the current phase (a run starts idle); moves are "
        "idle->turn, turn->idle, turn->compaction, compaction->turn, turn->retry, "
        "retry->turn; turn_start/turn_end only in phase turn; idle only with no turn open; "
        "a run with phase changes ends idle before agent_end"
    ),
    "compaction": (
        "compaction_start/compaction_end pair up (same reason), only in phase compaction; "
        "retry events only in phase retry"
    ),
    "user-in-turn": "user messages' message_start/message_end occur inside a turn",
    "end-reason": (
        "agent_end.reason is one of " + ", ".join(END_REASONS) + "; terminated only "
        "right after a turn whose tool calls all ended (tool_execution_end) with a result "
        "that sets terminate"
    ),
}


class EventGrammarError(AssertionError):
    """An event stream broke grammar rule ``rule`` at event ``index`` (0-based).

    ``event_type`` is the offending event's type and ``detail`` the bare explanation;
    ``str(error)`` names all of them and lists the few events before the offending one.
    An ``AssertionError``, so pytest reports it as a failed assertion.
    """

    def __init__(
        self,
        rule: str,
        index: int,
        message: str,
        *,
        event_type: str | None = None,
        context: Iterable[str] = (),
    ) -> None:
        self.rule = rule
        self.index = index
        self.detail = message
        self.event_type = event_type
        self.context = tuple(context)
        where = f"event #{index}" + (f" ({event_type})" if event_type else "")
        text = f"event grammar rule {rule!r} violated at {where}: {message}"
        if self.context:
            text += "\n  preceding events: " + ", ".join(self.context)
        super().__init__(text)


def check_event_grammar(events: Iterable[Any]) -> None:
    """Check ``events`` (any iterable, in emission order) against :data:`RULES`.

    Returns ``None`` if every rule holds (an empty stream holds trivially); raises
    :class:`EventGrammarError` for the first violation, and ``TypeError`` for an item
    that is not an event.
    """
    items = events if isinstance(events, list | tuple) else list(events)
    checker = _Checker(runs_with_phase_changes(items))
    for index, event in enumerate(items):
        checker.feed(index, event)
    checker.finish(len(items))


class _Checker(ToolAndPhaseRules):
    def __init__(self, phase_runs: set[int]) -> None:
        self.phase_runs = phase_runs
        self.ordinal = -1
        self.prev_seq: int | None = None
        self.run: RunState | None = None
        self.run_ids: set[Any] = set()
        self.index = -1
        self.kind: str | None = None
        self.recent: deque[str] = deque(maxlen=CONTEXT)
        self.handlers: dict[str, Handler] = {
            "agent_end": self._agent_end,
            "turn_start": self._turn_start,
            "turn_end": self._turn_end,
            "message_start": self._message_start,
            "message_update": self._message_update,
            "message_end": self._message_end,
            "tool_execution_start": self._tool_start,
            "tool_execution_update": self._tool_update,
            "tool_approval_request": self._tool_update,
            "tool_execution_end": self._tool_end,
            "phase_change": self._phase_change,
            "compaction_start": self._compaction_start,
            "compaction_end": self._compaction_end,
            "retry": self._retry,
        }

    def fail(self, rule: str, message: str) -> EventGrammarError:
        return EventGrammarError(
            rule, self.index, message, event_type=self.kind, context=self.recent
        )

    # ---- the walk

    def feed(self, index: int, event: Any) -> None:
        kind = field_of(event, "type")
        if not isinstance(kind, str):
            raise TypeError(f"item #{index} is not an event (no str 'type'): {event!r}")
        self.index = index
        self.kind = kind

        seq = field_of(event, "seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise self.fail("seq", f"seq must be an int, got {seq!r}")
        if self.prev_seq is not None and seq != self.prev_seq + 1:
            raise self.fail("seq", f"seq {seq} follows seq {self.prev_seq} (expected +1)")
        self.prev_seq = seq

        turn_field = field_of(event, "turn")
        if kind == "agent_start":
            self._agent_start(event, turn_field)
        else:
            run = self.run
            if run is None:
                raise self.fail(
                    "run-bounds", "event outside a run: no agent_start opened a run for it"
                )
            if field_of(event, "run_id") != run.run_id:
                raise self.fail(
                    "run-bounds",
                    f"run_id {field_of(event, 'run_id')!r} differs from the run's {run.run_id!r} "
                    f"(agent_start at #{run.start})",
                )
            turn = run.turn
            if kind != "turn_start" and kind != "turn_end":
                if turn is None:
                    if kind not in OUTSIDE_TURN:
                        if kind in MESSAGE_EVENTS and (
                            field_of(field_of(event, "message"), "role") == "user"
                        ):
                            raise self.fail("user-in-turn", "user message outside a turn")
                        raise self.fail("turn-nesting", f"{kind} outside a turn")
                    if turn_field is not None:
                        raise self.fail(
                            "turn-nesting", f"turn={turn_field!r} outside a turn (expected None)"
                        )
                elif turn_field != turn.index:
                    raise self.fail(
                        "turn-nesting",
                        f"turn={turn_field!r} inside turn {turn.index}",
                    )
            handler = self.handlers.get(kind)
            if handler is not None:
                handler(event, run, turn)
        self.recent.append(f"#{index} {kind}")

    def finish(self, count: int) -> None:
        if self.run is not None:
            self.index = count - 1
            raise self.fail(
                "run-bounds",
                f"the last run (agent_start at #{self.run.start}, run_id "
                f"{self.run.run_id!r}) has no agent_end",
            )

    # ---- runs and turns

    def _agent_start(self, event: Any, turn_field: Any) -> None:
        if self.run is not None:
            raise self.fail(
                "run-bounds",
                f"agent_start before the previous run (agent_start at #{self.run.start}) "
                "ended with agent_end",
            )
        run_id = field_of(event, "run_id")
        if run_id in self.run_ids:
            raise self.fail("run-bounds", f"run_id {run_id!r} was already used by a run")
        if turn_field is not None:
            raise self.fail("turn-nesting", f"agent_start has turn={turn_field!r} (expected None)")
        self.ordinal += 1
        self.run_ids.add(run_id)
        self.run = RunState(run_id, self.index, self.ordinal in self.phase_runs)

    def _agent_end(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        if turn is not None:
            raise self.fail("turn-nesting", f"agent_end while turn {turn.index} is open")
        if run.tracks_phase and run.phase != "idle":
            raise self.fail(
                "phase",
                f"run ends in phase {run.phase!r}: expected phase_change(turn -> idle) "
                "before agent_end",
            )
        reason = field_of(event, "reason")
        if reason not in END_REASONS:
            raise self.fail("end-reason", f"agent_end.reason {reason!r} is not a known reason")
        if reason == "terminated" and not run.batch_terminated:
            raise self.fail(
                "end-reason",
                "agent_end.reason 'terminated', but the last turn's tool results did not "
                "all set terminate",
            )
        self.run = None

    def _turn_start(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        if turn is not None:
            raise self.fail("turn-nesting", f"turn_start while turn {turn.index} is open")
        turn_field = field_of(event, "turn")
        if turn_field != run.next_turn:
            raise self.fail(
                "turn-nesting", f"turn_start has turn={turn_field!r}, expected {run.next_turn}"
            )
        if run.tracks_phase and run.phase != "turn":
            raise self.fail("phase", f"turn_start in phase {run.phase!r} (expected 'turn')")
        run.turn = TurnState(run.next_turn)
        run.next_turn += 1
        run.batch_terminated = False

    def _turn_end(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        if turn is None:
            raise self.fail("turn-nesting", "turn_end without an open turn")
        turn_field = field_of(event, "turn")
        if turn_field != turn.index:
            raise self.fail(
                "turn-nesting", f"turn_end has turn={turn_field!r}, expected {turn.index}"
            )
        if turn.open_role is not None:
            raise self.fail(
                "message-nesting",
                f"turn_end while the {turn.open_role} message started at #{turn.open_at} "
                "has no message_end",
            )
        if run.tracks_phase and run.phase != "turn":
            raise self.fail("phase", f"turn_end in phase {run.phase!r} (expected 'turn')")
        if run.compaction_reason is not None:
            raise self.fail(
                "compaction",
                f"turn_end while compaction_start at #{run.compaction_at} has no compaction_end",
            )
        if turn.exec_open:
            raise self.fail(
                "tool-results",
                f"turn_end before tool_execution_end of {sorted(map(str, turn.exec_open))}",
            )
        for position, call_id in enumerate(turn.call_ids):
            if turn.call_required[position] and not turn.call_result[position]:
                raise self.fail("tool-results", f"tool call {call_id!r} got no tool_result message")
        reported = [
            field_of(result, "tool_call_id") for result in field_of(event, "tool_results") or ()
        ]
        if reported != turn.results:
            raise self.fail(
                "tool-results",
                f"turn_end.tool_results are for {reported!r}, but the turn's tool_result "
                f"messages were for {turn.results!r}",
            )
        message = field_of(event, "message")
        if turn.has_assistant:
            expected = turn.last_assistant
            discarded = (
                message is None
                and expected is not None
                and field_of(expected, "stop_reason") == "error"
            )
            if message is not expected and message != expected and not discarded:
                raise self.fail(
                    "turn-end-message",
                    "turn_end.message is not the last assistant message of the turn",
                )
        elif message is not None:
            raise self.fail(
                "turn-end-message", "turn_end.message is set but the turn had no assistant message"
            )
        run.batch_terminated = bool(turn.call_ids) and all(
            turn.terminates.get(call_id, False) for call_id in turn.call_ids
        )
        run.turn = None

    # ---- messages

    def _message_start(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        assert turn is not None  # guaranteed by feed()
        role = field_of(field_of(event, "message"), "role")
        if turn.open_role is not None:
            raise self.fail(
                "message-nesting",
                f"message_start({role}) while the {turn.open_role} message started at "
                f"#{turn.open_at} has no message_end",
            )
        turn.open_role = role
        turn.open_at = self.index
        turn.open_empty = not field_of(field_of(event, "message"), "content")

    def _message_update(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        assert turn is not None
        role = field_of(field_of(event, "message"), "role")
        if turn.open_role is None:
            raise self.fail("message-nesting", "message_update without message_start")
        if turn.open_role != "assistant" or role != "assistant":
            raise self.fail(
                "message-nesting",
                f"message_update for a {role} message (open: {turn.open_role}); "
                "updates are for assistant messages only",
            )
        if not turn.open_empty:
            raise self.fail(
                "message-nesting",
                f"message_update for the assistant message started at #{turn.open_at} with "
                "content: a streamed message starts empty, its first delta comes in an update",
            )

    def _message_end(self, event: Any, run: RunState, turn: TurnState | None) -> None:
        assert turn is not None
        message = field_of(event, "message")
        role = field_of(message, "role")
        if turn.open_role is None:
            raise self.fail("message-nesting", f"message_end({role}) without message_start")
        if role != turn.open_role:
            raise self.fail(
                "message-nesting",
                f"message_end({role}) for the {turn.open_role} message started at #{turn.open_at}",
            )
        turn.open_role = None
        if role == "assistant":
            turn.has_assistant = True
            turn.last_assistant = message
            required = field_of(message, "stop_reason") not in UNSENT_STOP_REASONS
            for call_id in tool_call_ids(message):
                if call_id in turn.call_pos:
                    raise self.fail(
                        "tool-results", f"tool call id {call_id!r} occurs twice in the turn"
                    )
                turn.call_pos[call_id] = len(turn.call_ids)
                turn.call_ids.append(call_id)
                turn.call_required.append(required)
                turn.call_result.append(False)
        elif role == "tool_result":
            self._tool_result(turn, field_of(message, "tool_call_id"))
