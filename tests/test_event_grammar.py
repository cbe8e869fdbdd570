"""check_event_grammar on hand-made event sequences: valid runs pass, each rule bites."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from mainspring import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from mainspring.events import (
    AgentEnd,
    AgentStart,
    CompactionEnd,
    CompactionStart,
    Event,
    HookErrorEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    PhaseChange,
    Retry,
    ToolDecision,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
    event_to_json,
)
from mainspring.providers import TextDelta
from mainspring.testing import RULES, EventGrammarError, EventRecorder, check_event_grammar

Events = list[Event]


def numbered(events: list[Any], start: int = 0) -> Events:
    """Give the events consecutive seq numbers from ``start``."""
    return [dataclasses.replace(e, seq=start + i) for i, e in enumerate(events)]


class Run:
    """Builds one run's events; seq is assigned later by :func:`numbered`."""

    def __init__(self, run_id: str = "r1") -> None:
        self.run_id = run_id
        self.turn: int | None = None
        self.events: list[Any] = []

    def add(self, cls: type[Any], **payload: Any) -> Run:
        payload.setdefault("turn", self.turn)
        self.events.append(cls(seq=0, run_id=self.run_id, **payload))
        return self

    def start(self) -> Run:
        return self.add(AgentStart)

    def end(self, reason: str = "stop") -> Run:
        return self.add(AgentEnd, messages=(), reason=reason)

    def phase(self, previous: str, phase: str) -> Run:
        return self.add(PhaseChange, previous=previous, phase=phase)

    def turn_start(self, index: int) -> Run:
        self.turn = index
        return self.add(TurnStart)

    def turn_end(
        self, message: AssistantMessage | None, results: tuple[ToolResultMessage, ...] = ()
    ) -> Run:
        self.add(TurnEnd, message=message, tool_results=results)
        self.turn = None
        return self

    def message(self, message: Any, updates: int = 0) -> Run:
        # a streamed message starts empty
        start = message.model_copy(update={"content": ()}) if updates else message
        self.add(MessageStart, message=start)
        for _ in range(updates):
            self.add(MessageUpdate, message=message, delta=TextDelta("x"))
        return self.add(MessageEnd, message=message)

    def exec_start(self, call_id: str, name: str) -> Run:
        return self.add(ToolExecutionStart, tool_call_id=call_id, tool_name=name, args={})

    def exec_update(self, call_id: str, name: str) -> Run:
        return self.add(
            ToolExecutionUpdate, tool_call_id=call_id, tool_name=name, partial_result="..."
        )

    def exec_end(self, call_id: str, name: str) -> Run:
        return self.add(
            ToolExecutionEnd,
            tool_call_id=call_id,
            tool_name=name,
            result=ToolResult("ok"),
            is_error=False,
        )


USER = UserMessage(content="read two files", timestamp=1.0)
CALLS = (
    ToolCall(id="c1", name="read", arguments={"path": "a"}),
    ToolCall(id="c2", name="read", arguments={"path": "b"}),
)
CALLING = AssistantMessage(
    content=(TextContent(text="reading"), *CALLS), stop_reason="tool_use", timestamp=2.0
)
R1 = ToolResultMessage(tool_call_id="c1", tool_name="read", content=(TextContent(text="A"),))
R2 = ToolResultMessage(tool_call_id="c2", tool_name="read", content=(TextContent(text="B"),))
FINAL = AssistantMessage(content=(TextContent(text="done"),), stop_reason="stop", timestamp=3.0)


def text_run(run_id: str = "r1") -> Run:
    run = Run(run_id).start().phase("idle", "turn").turn_start(0)
    run.message(USER).message(FINAL, updates=2).turn_end(FINAL)
    return run.phase("turn", "idle").end()


def tool_run(run_id: str = "r2") -> Run:
    run = Run(run_id).start().phase("idle", "turn").turn_start(0).message(USER)
    run.message(CALLING, updates=3)
    run.exec_start("c1", "read")
    run.add(ToolDecision, tool_call_id="c1", tool_name="read", decision="allow", plugin=None)
    run.exec_start("c2", "read")
    run.add(ToolDecision, tool_call_id="c2", tool_name="read", decision="allow", plugin=None)
    run.exec_update("c1", "read").exec_update("c2", "read")
    run.exec_end("c2", "read").exec_end("c1", "read")  # completion order: c2 first
    run.message(R1).message(R2).turn_end(CALLING, (R1, R2))
    run.turn_start(1)
    run.phase("turn", "compaction")
    run.add(CompactionStart, reason="threshold", tokens_before=900)
    run.add(CompactionEnd, reason="threshold", tokens_before=900, tokens_after=100)
    run.phase("compaction", "turn")
    run.phase("turn", "retry")
    run.add(Retry, attempt=1, max_attempts=3, delay_s=0.5, error="overloaded")
    run.phase("retry", "turn")
    run.add(HookErrorEvent, hook="transform_context", plugin="p", error="E", outcome="skipped")
    run.message(FINAL, updates=1).turn_end(FINAL)
    run.phase("turn", "idle")
    run.add(HookErrorEvent, hook="on_event", plugin="p", error="E", outcome="logged")
    return run.end()


def valid_stream() -> Events:
    return numbered(text_run("r1").events + tool_run("r2").events, start=100)


# ------------------------------------------------------------------ valid streams


def test_text_run_passes() -> None:
    check_event_grammar(numbered(text_run().events))


def test_tool_run_with_parallel_calls_ending_out_of_order_passes() -> None:
    check_event_grammar(numbered(tool_run().events))


def test_several_runs_and_any_iterable_pass() -> None:
    events = valid_stream()
    check_event_grammar(events)
    check_event_grammar(iter(events))
    check_event_grammar(tuple(events))
    check_event_grammar([])


def test_a_run_without_phase_changes_passes() -> None:
    run = Run().start().turn_start(0).message(USER).message(FINAL).turn_end(FINAL).end()
    check_event_grammar(numbered(run.events))


def test_turn_without_assistant_message_and_error_message_calls_are_optional() -> None:
    failed = AssistantMessage(content=CALLS, stop_reason="aborted")
    run = Run().start().turn_start(0).message(USER).turn_end(None)
    run.turn_start(1).message(failed).turn_end(failed).end(reason="aborted")
    check_event_grammar(numbered(run.events))


def test_json_form_of_a_valid_stream_passes() -> None:
    check_event_grammar(json.loads(event_to_json(e)) for e in valid_stream())


def test_thousands_of_events() -> None:
    run = Run().start().phase("idle", "turn")
    for index in range(1_000):
        calling = AssistantMessage(
            content=(ToolCall(id=f"t{index}", name="read"),), stop_reason="tool_use"
        )
        result = ToolResultMessage(tool_call_id=f"t{index}", tool_name="read")
        run.turn_start(index).message(calling, updates=5)
        run.exec_start(f"t{index}", "read").exec_end(f"t{index}", "read")
        run.message(result).turn_end(calling, (result,))
    events = numbered(run.phase("turn", "idle").end().events)
    assert len(events) > 13_000
    check_event_grammar(events)


def test_recorder_keeps_events_and_checks_them() -> None:
    recorder = EventRecorder()
    for event in valid_stream():
        recorder(event, None)
    assert len(recorder) == len(valid_stream())
    assert recorder.types()[:3] == ["agent_start", "phase_change", "turn_start"]
    assert [e.tool_call_id for e in recorder.of_type(ToolExecutionEnd)] == ["c2", "c1"]
    assert len(recorder.of_type("turn_end")) == 3
    assert recorder.messages() == [USER, FINAL, USER, CALLING, R1, R2, FINAL]
    assert recorder.messages("tool_result") == [R1, R2]
    recorder.check_grammar()
    recorder.clear()
    assert recorder.events == []


# ------------------------------------------------------------------ broken streams


def _replace(events: Events, index: int, **changes: Any) -> Events:
    event: Any = events[index]
    events[index] = dataclasses.replace(event, **changes)
    return events


def _find(events: Events, kind: str, nth: int = 0, **where: Any) -> int:
    hits = [
        i
        for i, e in enumerate(events)
        if e.type == kind and all(getattr(e, k) == v for k, v in where.items())
    ]
    return hits[nth]


def broken_seq() -> tuple[Events, int]:
    events = valid_stream()
    index = _find(events, "turn_start", 1)
    return _replace(events, index, seq=events[index].seq + 1), index


def broken_run_bounds() -> tuple[Events, int]:
    events = valid_stream()
    index = _find(events, "message_end", 3)  # in run r2
    return _replace(events, index, run_id="r1"), index


def broken_turn_nesting() -> tuple[Events, int]:
    events = valid_stream()
    index = _find(events, "turn_start", 2)  # r2's second turn claims index 2
    for i in range(index, _find(events, "turn_end", 2) + 1):
        _replace(events, i, turn=2)
    return events, index


def broken_message_nesting() -> tuple[Events, int]:
    run = Run().start().phase("idle", "turn").turn_start(0)
    run.add(MessageStart, message=USER).add(MessageStart, message=FINAL)
    return numbered(run.events), 4


def broken_tool_execution() -> tuple[Events, int]:
    events = valid_stream()
    index = _find(events, "tool_execution_end", tool_call_id="c1")
    update = _find(events, "tool_execution_update", tool_call_id="c1")
    events.insert(index, events.pop(update))  # the update now follows its end
    return numbered(events, start=100), index


def broken_tool_results() -> tuple[Events, int]:
    events = valid_stream()
    starts = [i for i, e in enumerate(events) if _role(e) == "tool_result"]
    r1_start, r1_end, r2_start, r2_end = starts
    reordered = events[r2_start : r2_end + 1] + events[r1_start : r1_end + 1]
    events[r1_start : r2_end + 1] = reordered  # results in completion order, not call order
    return numbered(events, start=100), r1_start + 1


def broken_turn_end_message() -> tuple[Events, int]:
    events = valid_stream()
    index = _find(events, "turn_end", 0)
    return _replace(events, index, message=CALLING), index


def broken_phase() -> tuple[Events, int]:
    events = valid_stream()
    index = _find(events, "phase_change", 0, run_id="r2", previous="turn", phase="idle")
    del events[index]  # r2 ends without returning to idle (a hook_error, then agent_end)
    return numbered(events, start=100), index + 1


def broken_compaction() -> tuple[Events, int]:
    events = valid_stream()
    index = _find(events, "compaction_end")
    del events[index]
    return numbered(events, start=100), index  # phase leaves compaction with it open


def broken_user_in_turn() -> tuple[Events, int]:
    run = Run().start().phase("idle", "turn").message(USER)
    return numbered(run.events), 2


def broken_end_reason() -> tuple[Events, int]:
    run = Run().start().phase("idle", "turn").turn_start(0)
    run.message(USER).message(FINAL, updates=1).turn_end(FINAL).phase("turn", "idle")
    events = numbered(run.end(reason="terminated").events)  # no tool result asked for it
    return events, len(events) - 1


def test_terminated_after_a_batch_whose_every_result_terminates_passes() -> None:
    done = ToolResult("ok", terminate=True)
    calling = AssistantMessage(content=(CALLS[0],), stop_reason="tool_use", timestamp=2.0)
    run = Run().start().phase("idle", "turn").turn_start(0).message(USER)
    run.message(calling).exec_start("c1", "read")
    run.add(ToolExecutionEnd, tool_call_id="c1", tool_name="read", result=done, is_error=False)
    run.message(R1).turn_end(calling, (R1,)).phase("turn", "idle").end(reason="terminated")
    events = numbered(run.events)
    check_event_grammar(events)
    check_event_grammar([json.loads(event_to_json(e)) for e in events])


def _role(event: Event) -> str | None:
    if event.type not in {"message_start", "message_end"}:
        return None
    return getattr(getattr(event, "message", None), "role", None)


BROKEN: dict[str, Callable[[], tuple[Events, int]]] = {
    "seq": broken_seq,
    "run-bounds": broken_run_bounds,
    "turn-nesting": broken_turn_nesting,
    "message-nesting": broken_message_nesting,
    "tool-execution": broken_tool_execution,
    "tool-results": broken_tool_results,
    "turn-end-message": broken_turn_end_message,
    "phase": broken_phase,
    "compaction": broken_compaction,
    "user-in-turn": broken_user_in_turn,
    "end-reason": broken_end_reason,
}


def test_every_rule_has_a_broken_case() -> None:
    assert set(BROKEN) == set(RULES)


@pytest.mark.parametrize("rule", list(BROKEN))
def test_broken_sequence_violates_its_rule(rule: str) -> None:
    events, index = BROKEN[rule]()
    with pytest.raises(EventGrammarError) as caught:
        check_event_grammar(events)
    error = caught.value
    assert error.rule == rule
    assert error.index == index
    assert error.event_type == events[index].type
    assert f"'{rule}'" in str(error) and f"#{index}" in str(error)
    assert isinstance(error, AssertionError)


# ------------------------------------------------------------------ sub-rules


def test_incomplete_final_run() -> None:
    events = numbered(text_run().events[:-1])
    with pytest.raises(EventGrammarError, match="no agent_end") as caught:
        check_event_grammar(events)
    assert (caught.value.rule, caught.value.index) == ("run-bounds", len(events) - 1)


def test_event_before_any_run_and_nested_agent_start() -> None:
    events = numbered([AgentEnd(seq=0, run_id="r", messages=(), reason="stop")])
    with pytest.raises(EventGrammarError, match="outside a run"):
        check_event_grammar(events)
    events = numbered(text_run().events[:-1] + text_run("r2").events)
    with pytest.raises(EventGrammarError) as caught:
        check_event_grammar(events)
    assert caught.value.rule == "run-bounds"


def test_missing_tool_result_is_reported_at_turn_end() -> None:
    events = valid_stream()
    starts = [i for i, e in enumerate(events) if _role(e) == "tool_result"]
    del events[starts[2] : starts[3] + 1]  # drop R2's start and end
    events = numbered(events, start=100)
    with pytest.raises(EventGrammarError, match="'c2' got no tool_result") as caught:
        check_event_grammar(events)
    assert caught.value.rule == "tool-results"
    assert events[caught.value.index].type == "turn_end"


def test_turn_end_tool_results_must_match_the_messages() -> None:
    events = valid_stream()
    index = _find(events, "turn_end", 1)
    with pytest.raises(EventGrammarError, match=r"turn_end\.tool_results") as caught:
        check_event_grammar(_replace(events, index, tool_results=(R2, R1)))
    assert caught.value.rule == "tool-results"


def test_unfinished_execution_and_result_without_call() -> None:
    events = valid_stream()
    del events[_find(events, "tool_execution_end", tool_call_id="c1")]
    with pytest.raises(EventGrammarError, match="tool_execution_end of") as caught:
        check_event_grammar(numbered(events, start=100))
    assert caught.value.rule == "tool-results"

    stray = ToolResultMessage(tool_call_id="nobody", tool_name="x")
    run = Run().start().turn_start(0).message(USER).message(stray)
    with pytest.raises(EventGrammarError, match="no tool call") as caught:
        check_event_grammar(numbered(run.turn_end(None).end().events))
    assert caught.value.rule == "tool-results"


def test_update_for_a_user_message_and_bad_phase_move() -> None:
    run = Run().start().turn_start(0).add(MessageStart, message=USER)
    run.add(MessageUpdate, message=USER, delta=TextDelta("x"))
    with pytest.raises(EventGrammarError, match="assistant messages only") as caught:
        check_event_grammar(numbered(run.events))
    assert caught.value.rule == "message-nesting"

    events = numbered(Run().start().phase("idle", "retry").events)
    with pytest.raises(EventGrammarError, match="not allowed") as caught:
        check_event_grammar(events)
    assert caught.value.rule == "phase"


def test_a_streamed_message_starts_empty() -> None:
    """The first delta comes in the first update, never in message_start as well."""
    run = Run().start().turn_start(0).add(MessageStart, message=FINAL)
    run.add(MessageUpdate, message=FINAL, delta=TextDelta("done"))
    with pytest.raises(EventGrammarError, match="starts empty") as caught:
        check_event_grammar(numbered(run.events))
    assert caught.value.rule == "message-nesting"

    # a message without updates (added whole) starts with its content
    whole = Run().start().turn_start(0).message(FINAL).turn_end(FINAL).end()
    check_event_grammar(numbered(whole.events))
    # and the JSON form of a streamed run passes too
    streamed = Run().start().turn_start(0).message(FINAL, updates=1).turn_end(FINAL).end()
    check_event_grammar([json.loads(event_to_json(e)) for e in numbered(streamed.events)])


def test_retry_outside_the_retry_phase() -> None:
    run = Run().start().phase("idle", "turn").turn_start(0)
    run.add(Retry, attempt=1, max_attempts=3, delay_s=0.1, error="e")
    with pytest.raises(EventGrammarError, match="retry event") as caught:
        check_event_grammar(numbered(run.events))
    assert caught.value.rule == "compaction"


def test_error_message_lists_the_preceding_events() -> None:
    events, _ = broken_message_nesting()
    with pytest.raises(EventGrammarError) as caught:
        check_event_grammar(events)
    assert "preceding events: #0 agent_start" in str(caught.value)
    assert "message_start" in str(caught.value)


def test_non_events_are_a_type_error() -> None:
    with pytest.raises(TypeError, match="not an event"):
        check_event_grammar([object()])
