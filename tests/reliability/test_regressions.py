"""Regressions: the shrunk examples of the bugs the reliability properties found.

Each test is the minimal scenario hypothesis shrank a failure to, run through the same
harness (so every invariant is checked), plus a direct assertion of the expected
behaviour. The docstrings say what was expected and what happened.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import reliability_harness as rh
import reliability_hostile as hostile
import reliability_sse as sse
import reliability_strategies as rs
from reliability_strategies import (
    HookFault,
    HostileFault,
    HostileSpec,
    ListenerSpec,
    PluginSpec,
    Scenario,
)

from mainspring import AbortSignal, Agent, CompactionSummary, Settings, tool
from mainspring.providers.base import ToolCallEnd
from mainspring.settings import HookSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

# ------------------------------------------------ on_event: one failing observer


@pytest.mark.parametrize("at", [None, 0])
def test_a_failing_on_event_plugin_does_not_hide_events_from_later_observers(
    at: int | None,
) -> None:
    """A plugin's ``on_event`` raising (on every event, or on ``agent_start`` only).

    Expected: the run fails, but every observer, the built-in session writer included,
    still sees every event (DESIGN §6 ``on_event``: "all, in order"), so the session file
    equals the transcript. Was: ``Hooks.on_event`` stopped at the first raising
    implementation; the session file was never created (``at=None``), or was created at
    the first ``message_end`` with that message written twice (``at=0``).
    """
    world = rh.run_scenario(
        Scenario(
            steps=(),
            plugins=(PluginSpec("fault0", (HookFault("on_event", "raise", at),)),),
            second_run=False,
        )
    )
    assert world.recorder.events[-1].reason == "error"


# --------------------------------------- a failed message_start leaves it open


@pytest.mark.parametrize(
    ("listeners", "plugins", "steer_before"),
    [
        # a listener raising on the prompt's message_start
        ((ListenerSpec(3, "raise"),), (), 0),
        # ... on the message_start of the kept error message (exhausted script)
        ((ListenerSpec(5, "raise"),), (), 0),
        # ... on it after a steering message was delivered
        ((ListenerSpec(0, "steer"), ListenerSpec(7, "raise")), (), 0),
        # an on_event plugin raising StopRun on that message_start
        ((), (PluginSpec("fault0", (HookFault("on_event", "stop", 5),)),), 0),
    ],
)
def test_a_message_whose_message_start_delivery_failed_is_still_ended(
    listeners: tuple[ListenerSpec, ...], plugins: tuple[PluginSpec, ...], steer_before: int
) -> None:
    """Expected: every ``message_start`` gets its ``message_end`` (grammar
    ``message-nesting``). Was: the failure raised out of ``Run.add_message`` /
    ``request._stream``'s kept-failure path between the two, and the failure message
    then opened a second message (or ``turn_end`` came with the message open).
    """
    rh.run_scenario(
        Scenario(steps=(), plugins=plugins, listeners=listeners, steer_before=steer_before)
    )


# ------------------------------------------------ queued messages lost on failure


@pytest.mark.parametrize("at", [2, 4])
def test_steering_taken_for_a_turn_that_fails_first_stays_queued(at: int) -> None:
    """A steering message queued before ``prompt()``; a listener raises at
    ``turn_start`` (2) or at the prompt's ``message_end`` (4).

    Expected: the steering message is delivered or still queued (DESIGN §10: after an
    error the queues are kept). Was: taken off the queue before the turn and dropped.
    """
    world = rh.run_scenario(
        Scenario(steps=(), listeners=(ListenerSpec(at, "raise"),), steer_before=1, second_run=False)
    )
    assert len(world.agent.state.steering_queue) == 1


def test_a_follow_up_taken_by_resume_for_a_run_that_fails_first_stays_queued() -> None:
    """Run 1 fails (an ``on_event`` plugin raises on every event), a follow-up is queued;
    ``resume()`` takes it as the first turn's input and run 2 fails at ``agent_start``.

    Expected: the follow-up is still queued afterwards (it was never delivered). Was:
    ``Agent.resume`` (agent/agent.py) pops it before the run starts, and nothing puts
    it back, so it vanishes.
    """
    world = rh.run_scenario(
        Scenario(
            steps=(),
            plugins=(PluginSpec("fault0", (HookFault("on_event", "raise", None),)),),
            follow_up_before=1,
            second_run=True,
            second_run_kind="resume",
        )
    )
    queued = world.agent.state.follow_up_queue
    assert [m.content for m in queued] == ["follow_up #0 at event -1"]


# ----------------------------------- StopRun while the failure is being delivered


@pytest.mark.parametrize(
    ("steps", "listeners", "at"),
    [
        # a listener raises at turn_start; StopRun on the error message's message_start
        ((), (ListenerSpec(2, "raise"),), 3),
        # the provider raises CancelledError; StopRun on the aborted message's message_start
        ((faux.raises(asyncio.CancelledError),), (), 5),
    ],
)
def test_stop_run_from_on_event_during_failure_delivery_is_contained(
    steps: tuple[object, ...], listeners: tuple[ListenerSpec, ...], at: int
) -> None:
    """Expected: once the run is failing, a ``StopRun`` raised by an ``on_event`` plugin
    changes nothing (like any other error there: DESIGN §4 rule 1, "errors raised while
    delivering those failure events are logged, never looped on"): the failure message
    ends, ``turn_end`` closes the turn. Was: ``Run.emit`` re-raises ``StopRun`` from
    ``on_event`` even when ``run.failing``; ``_fail``'s ``except Exception`` swallows it
    half-way, leaving the message and the turn open, then ``phase_change(→ idle)`` is
    emitted inside the turn with ``turn=None``.
    """
    world = rh.run_scenario(
        Scenario(
            steps=steps,
            listeners=listeners,
            plugins=(PluginSpec("fault0", (HookFault("on_event", "stop", at),)),),
            second_run=False,
        )
    )
    assert [e.type for e in world.recorder.events][-3:] == ["turn_end", "phase_change", "agent_end"]


# ------------------------------------ a compaction interrupted after it was applied


@pytest.mark.parametrize(
    ("steps", "fault", "second_run"),
    [
        # run 2 overflows; the fallback compaction applies; then convert_to_llm (its 3rd
        # call, counting tokens_after) raises StopRun
        (
            (faux.reply(), faux.error("overflow", context_overflow=True)),
            HookFault("convert_to_llm", "stop", 2),
            True,
        ),
        # two tool turns, an overflow, the compaction applies; count_tokens raises StopRun
        # while counting tokens_after
        (
            (
                faux.reply(faux.tool_call("echo", {"text": ""})),
                faux.reply(faux.tool_call("echo", {"text": ""}), faux.tool_call("echo", {})),
                faux.error("overflow", context_overflow=True),
            ),
            HookFault("count_tokens", "stop", 4),
            False,
        ),
    ],
)
def test_a_compaction_interrupted_after_it_replaced_the_transcript_is_recorded(
    steps: tuple[object, ...], fault: HookFault, second_run: bool
) -> None:
    """Expected: if the transcript was replaced, ``compaction_end`` reports success (no
    ``error``) and the session file records the compaction, so it equals the transcript.
    Was: ``request.compact`` replaces ``core.messages`` and then counts ``tokens_after``
    with ``run.compacting`` still set; when that is interrupted, ``Run.leave_phase`` emits
    ``compaction_end(error="interrupted: ...")``, the session writer skips it, and the
    file keeps the old transcript (``agent_end.messages`` is off as well).
    """
    world = rh.run_scenario(
        Scenario(
            steps=steps,
            plugins=(PluginSpec("fault0", (fault,)),),
            max_attempts=0,
            second_run=second_run,
        )
    )
    messages = world.agent.state.messages
    assert any(isinstance(m, CompactionSummary) for m in messages)
    ends = [e for e in world.recorder.events if e.type == "compaction_end"]
    assert ends[-1].error is None


# ---------------------------------- grammar: a failed attempt that was discarded


@pytest.mark.parametrize(
    "scenario",
    [
        # a cut stream (retried), then StopRun from transform_context on the re-send
        Scenario(
            steps=(faux.cut(faux.text("partial")),),
            plugins=(PluginSpec("fault0", (HookFault("transform_context", "stop", 1),)),),
        ),
        # a context overflow after partial output, then StopRun from compact
        Scenario(
            steps=(faux.error("overflow", context_overflow=True, after=[faux.text("partial")]),),
            plugins=(PluginSpec("fault0", (HookFault("compact", "stop", 0),)),),
        ),
        # a cut stream (retried), then an overflow, then StopRun from compact
        Scenario(
            steps=(
                faux.cut(faux.tool_call("echo", {"text": ""}), faux.tool_call("echo", {})),
                faux.error("overflow", context_overflow=True),
            ),
            plugins=(PluginSpec("fault0", (HookFault("compact", "stop", 0),)),),
        ),
        # StopRun from on_event on the message_end of an attempt that is being retried
        Scenario(
            steps=(faux.cut(faux.text("partial")),),
            plugins=(PluginSpec("fault0", (HookFault("on_event", "stop", 8),)),),
        ),
    ],
)
def test_turn_end_message_after_a_discarded_attempt(scenario: Scenario) -> None:
    """The turn's only assistant message is a failed attempt that is not kept (it was to
    be retried, or re-sent after compaction); then ``StopRun`` ends the turn.

    Expected: the kernel closes the turn with ``turn_end.message=None`` (DESIGN §15
    ``StopRun``: "no assistant message is invented"; §9: the attempt's message "is not
    kept"), and ``check_event_grammar`` accepts that. Was: the checker's
    ``turn-end-message`` rule took the discarded attempt for the turn's message. Commit
    6b4ae44 fixed it for attempts followed by a ``retry`` event (cases 1 and 3), d1bcbcc
    for an overflow attempt with partial output (case 2) and a ``StopRun`` raised at the
    attempt's own ``message_end`` (case 4).
    """
    world = rh.run_scenario(scenario)
    turn_ends = [e for e in world.recorder.events if e.type == "turn_end"]
    assert turn_ends[0].message is None


# --------------------------------------------------------------- HTTP providers


@pytest.mark.parametrize(
    ("status", "content_type"),
    [(200, "application/json"), (500, "application/json"), (429, "text/plain")],
)
@pytest.mark.parametrize("make", [sse.openai, sse.anthropic])
def test_a_stalled_error_body_times_out(status: int, content_type: str, make: object) -> None:
    """The server sends the start of an error body (or a 200 JSON body) and then goes
    silent.

    Expected: ``ProviderError`` after the read timeout (50 ms here): "a server that stops
    sending is cut off after ``timeout.read`` seconds without a byte ... for any
    transport, mocks included" (providers/http.py docstring). Was: ``HTTPProvider._check``
    reads the error body with ``async for chunk in response.aiter_bytes()`` outside the
    per-chunk ``asyncio.timeout`` of ``_exchange``, so the stream hung forever (fixed
    in 4b6384e).
    """
    wire = sse.Wire(b'{"error": {"message": "overloaded"', status, content_type, (), "hang")
    sse.check_stream(make, wire)  # type: ignore[arg-type]


def test_openai_ends_each_tool_call_once() -> None:
    """A call whose id arrives after ``finish_reason`` closed it (generated and then
    ended at ``finish_reason``), followed by another call at the same index.

    Expected: one ``ToolCallEnd`` per started call. Was: ``_ChatStream._tool_delta``
    ends the old call again when a new id shows up at its index (``_end`` does not check
    ``call.ended``), so the stream has two ``ToolCallEnd`` for one call.
    """

    def chunk(delta: str) -> bytes:
        return b'data: {"choices": [{"index": 0, "delta": ' + delta.encode() + b"}]}\n\n"

    body = (
        chunk('{"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}')
        + b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}\n\n'
        + chunk(
            '{"tool_calls": [{"index": 0, "id": "call_0", "function": {"name": "echo", '
            '"arguments": ""}}]}'
        )
    )
    sse.check_stream(sse.openai, sse.Wire(body))

    async def ends() -> list[object]:
        provider = sse.openai(sse.transport(sse.Wire(body)))
        return [
            e
            async for e in provider.stream(sse.REQUEST, AbortSignal())
            if isinstance(e, ToolCallEnd)
        ]

    found = asyncio.run(ends())
    assert len(found) == len({e.id for e in found})  # type: ignore[attr-defined]


def test_a_stream_closed_while_it_drains_a_hung_response_leaves_no_http_task() -> None:
    """A complete reply (``[DONE]`` sent), then a server that never ends the response;
    the run is aborted from outside (a task not the run's, two loop turns later) while
    the provider's closing is draining that response.

    Expected: no task outlives the run. Was: the closing was cancelled inside
    ``_drain``, and the ``CancelledError`` left the stream's ``finally`` before it
    cancelled and awaited its helper, so the ``openai-http`` task was left pending on the
    hung response (found by the thorough profile).
    """
    body = (
        b'\xff\xfedata: {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"role": '
        b'"assistant", "content": ""}, "finish_reason": null}]}\n\n'
        b'data: {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, '
        b'"finish_reason": "stop"}]}\n\n'
        b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}\n\n'
        b"data: [DONE]\n\n"
    )
    wire = sse.Wire(body, ending="hang")
    scenario = Scenario(
        steps=(),
        listeners=(ListenerSpec(0, "abort_external"),),
        external_yields=2,
        abort_grace_s=0.25,
        second_run=False,
    )
    rh.run_scenario(
        scenario, lambda: sse.openai(sse.transport(wire, sse.FOLLOW_UP["openai"])), "openai:m"
    )


# ------------------------------------------- hostile plugins and tools (HostileSpec)


def _hostile(
    *steps: object,
    plugins: tuple[tuple[HostileFault, ...], ...] = (),
    subscribers: tuple[HostileFault, ...] = (),
) -> Scenario:
    return Scenario(
        steps=steps,
        chunk_size=64,
        abort_grace_s=0.0,
        second_run=False,
        hostile=HostileSpec(
            plugins=plugins, subscribers=subscribers, hook_timeout_s=0.01, hook_grace_s=0.0
        ),
    )


# event indices of a run replying with one text: 1 is phase_change(idle → turn), just
# before the first turn_start; 9 is turn_end; 11 is agent_end
_PHASE_TURN, _TURN_END, _AGENT_END = 1, 9, 11
_EDGES = {_PHASE_TURN: "phase_change", _TURN_END: "turn_end", _AGENT_END: "agent_end"}


@pytest.mark.parametrize("at", list(_EDGES), ids=list(_EDGES.values()))
@pytest.mark.parametrize("hook", ["subscriber", "on_event"])
@pytest.mark.parametrize("behaviour", ["hang", "deaf"])
def test_a_hang_at_a_turn_edge_reports_its_timeout_inside_the_grammar(
    behaviour: str, hook: str, at: int
) -> None:
    """A subscriber or ``on_event`` observer hangs on the ``phase_change`` that precedes
    the first ``turn_start``, on ``turn_end`` or on ``agent_end``.

    Expected: the ``hook_error`` for its timeout keeps the grammar: between turns it has
    ``turn=None``; after ``agent_end`` nothing may be emitted (the report is logged).
    Was: ``Run._finish_delivery`` (kernel/run.py) emitted the pending reports right after
    the event whose delivery timed out, after ``turn_end`` while ``core.turn`` still held
    the closed turn (``turn-nesting``) and after ``agent_end`` (``run-bounds``). Then,
    with the reports held until the next event: the one held from ``phase_change``
    (idle → turn) is emitted from ``Run.begin_turn`` after ``core.turn`` is set for the
    new turn but before its ``turn_start``, so it carries ``turn=0`` outside a turn.
    """
    fault = HostileFault(hook, behaviour, at)
    world = rh.run_scenario(
        _hostile(
            faux.text("done"),
            plugins=((fault,),) if hook == "on_event" else (),
            subscribers=(fault,) if hook == "subscriber" else (),
        )
    )
    types = [e.type for e in world.recorder.events]
    assert types[at] == _EDGES[at]
    assert types[-1] == "agent_end"


@pytest.mark.parametrize(
    ("kind", "hook"),
    [
        ("details_huge_int", None),
        ("progress_huge_int", None),
        ("result_huge_int", "after_tool_result"),
    ],
)
def test_an_integer_too_long_to_print_in_tool_details_is_normalised(
    kind: str, hook: str | None
) -> None:
    """A tool's ``details`` or progress report, or a result filter's replacement, holds
    ``10**5000``.

    Expected: every event is JSON (``event_to_json``) and the session file equals the
    transcript. Was: ``to_jsonable`` (jsonable.py) passes every ``int`` as a safe scalar,
    but ``json.dumps`` refuses integers past ``sys.get_int_max_str_digits()`` (4,300
    digits: ``ValueError``), so ``tool_execution_end``/``_update`` and the result message
    events cannot be serialised. (An ``int`` with more digits than that limit needs
    :func:`describe`, or its ``bit_length`` checked, in ``_safe`` and ``_copy``.)
    """
    plugins: tuple[tuple[HostileFault, ...], ...] = ()
    if hook is not None:
        index = hostile.garbage_index(hook, kind)
        plugins = ((HostileFault(hook, "garbage", None, False, index),),)
        kind = "object"
    rh.run_scenario(_hostile(faux.tool_call("junk", {"kind": kind}, id="junk-0"), plugins=plugins))


@pytest.mark.parametrize("label", ["block_circular", "block_huge_int", "block_evil"])
def test_a_block_with_an_unprintable_reason_still_blocks_with_json_events(label: str) -> None:
    """A gate returns ``Block(reason)`` whose reason is a circular dict, ``10**5000`` or a
    value whose ``repr`` raises.

    Expected: the call is blocked and every event is JSON (the ``tool_decision`` reason is
    text). Was: ``Hooks.before_tool_call`` passes ``Block.reason`` on as is: the
    ``tool_decision`` event holds the circular dict (``_plain`` in kernel/events.py recurses
    until ``RecursionError``), and ``_prepare`` (kernel/tools.py) formats the reason into
    the result text, which raises for the others, failing the whole run.
    """
    index = hostile.garbage_index("before_tool_call", label)
    fault = HostileFault("before_tool_call", "garbage", None, False, index)
    rh.run_scenario(
        _hostile(faux.tool_call("echo", {"text": "a"}, id="echo-0"), plugins=((fault,),))
    )


@pytest.mark.parametrize("label", ["evil_repr", "huge_int"])
def test_a_gate_returning_an_unprintable_value_blocks_its_call_and_the_run_goes_on(
    label: str,
) -> None:
    """A gate returns garbage whose ``repr`` raises (a ``BaseException`` subclass, or the
    ``ValueError`` of ``repr(10**5000)``).

    Expected (DESIGN §6, fail closed): the call is blocked with a ``hook_error`` naming
    the plugin, and the run goes on. Was: ``Hooks.before_tool_call`` builds its
    "returned {result!r}, not a Block" error *after* the ``try``, so the exception from
    ``repr`` escapes the hook facade and fails the whole run (``reason="error"``).
    """
    index = hostile.garbage_index("before_tool_call", label)
    fault = HostileFault("before_tool_call", "garbage", None, False, index)
    world = rh.run_scenario(
        _hostile(
            faux.tool_call("echo", {"text": "a"}, id="echo-0"),
            faux.text("done"),
            plugins=((fault,),),
        )
    )
    assert world.recorder.events[-1].reason == "stop", world.recorder.events[-1].detail


@pytest.mark.parametrize(
    "step",
    [
        faux.tool_call("anything", rs._nested(64, "arrays"), id="deep64-arrays-0"),
        faux.tool_call("anything", rs._nested(63, "objects"), id="deep63-objects-0"),
        faux.tool_call("junk", {"kind": "details_deep"}, id="junk-0"),
    ],
    ids=["arguments-64-deep", "arguments-63-deep", "details-deep"],
)
def test_values_within_the_depth_limits_are_recorded_whole_in_the_session(step: object) -> None:
    """Tool-call arguments nested 63-64 levels deep (within ``max_argument_depth``), or
    tool ``details`` nested deeper than ``jsonable.MAX_DEPTH`` (normalised to 64 levels).

    Expected: the session file read back equals the transcript. Was: the session encoder
    (``_walk`` in sessions.py) cuts at ``MAX_DEPTH = 64`` counted from the *message*, not
    from the value: the message, its content tuple and the tool call (or the details
    field) use up levels, so a value the kernel accepted or normalised to 64 levels is cut
    again on disk, and ``from_session`` resumes with different arguments/details.
    """
    rh.run_scenario(_hostile(step))


# ------------------------------------- a stalled report raised on before message_end


async def test_a_subscriber_raising_on_a_stalled_report_does_not_lose_the_message_end() -> None:
    """A subscriber that ignored cancellation on a ``message_update`` was detached, and
    reported (``hook_error``) at the next emitted event, the assistant's ``message_end``; a
    second subscriber raised on that ``hook_error``.

    Expected: the ``message_end`` still goes out, then the run fails. Found by the
    thorough profile: the ``message_end`` was lost, and the failure answered the tool
    calls of a message that had started and never ended.
    """
    hung: list[str] = []

    async def deaf(event: object, signal: object) -> None:
        if getattr(event, "type", "") != "message_update" or hung:
            return
        hung.append("yes")
        while True:  # ignores cancellation: detached after the grace period
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()

    def raising(event: object, signal: object) -> None:
        if getattr(event, "type", "") == "hook_error":
            raise RuntimeError("raises on hook_error")

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    reply = faux.reply(faux.text("hello there"), faux.tool_call("echo", {"text": "a"}))
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([reply, faux.text("done")], chunk_size=4),
        autoload=False,
        tools=[echo],
        settings=Settings(hooks=HookSettings(timeout_s=0.05, abort_grace_s=0.05)),
    )
    recorder = EventRecorder()
    for listener in (recorder, deaf, raising):
        agent.subscribe(listener)

    outcome = await asyncio.wait_for(agent.prompt("go"), 10)

    assert outcome.reason == "error" and "raises on hook_error" in (outcome.detail or "")
    check_event_grammar(recorder.events)
