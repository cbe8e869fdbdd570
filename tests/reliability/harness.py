"""Runs a generated :class:`~reliability_strategies.Scenario` and checks every invariant.

:func:`run_scenario` builds an agent (FauxProvider script, the fault tools, fault
plugins, fault listeners, a session file), prompts it (and optionally a second time) and
raises ``AssertionError`` naming the first broken invariant:

- ``prompt()`` returns within :data:`BOUND_S` and raises nothing (lifecycle rule 1);
- ``check_event_grammar`` passes on the whole event stream (both runs);
- while a run is active, every listener sees ``is_streaming`` true and the state already
  updated for the event (pending calls at ``tool_execution_start``/``end``, the phase at
  ``phase_change``, the partial message at ``message_update``);
- the transcript has exactly one result per tool call, and the default
  ``convert_to_llm`` of it is valid to send (``transcript_problem(..., llm_only=True)``);
- the agent is idle afterwards (not streaming, phase ``idle``, nothing pending, no
  streaming message) and ``error_message`` is set exactly when the run ended in
  ``error``/``aborted``;
- no asyncio task the run created is left (an uncooperative tool that outlives
  ``abort_grace_s`` is the one documented exception; it is accounted for and awaited);
- the session file read back equals the transcript;
- ``agent_end.messages`` is the tail the run added (when nothing compacted);
- fail closed: a gate that raised or returned garbage blocked its call (which never ran);
  a result filter that raised withheld the result (the tool's output never reaches the
  transcript); every contained hook failure has its ``hook_error`` naming the plugin;
- an ``abort()`` from a listener before the run's end never yields ``reason="stop"``;
- steering/follow-up messages are conserved: each is delivered once or still queued, and
  a run that ends with ``stop`` left nothing behind that was queued before its last turn
  ended;
- every event can be turned into JSON (``event_to_json``; ``message_update`` events, partial
  replies of the script, only in hostile scenarios, where arguments are hostile);
- a run that was aborted (by a listener, another task, a timer or by cancelling the task
  awaiting ``prompt()``) settles within :func:`settle_bound` of the first ``abort()``,
  measured on the loop clock (:data:`FIGURES` keeps the largest figure seen);
- with a ``HostileSpec``: what :func:`reliability_hostile.check_hostile` asserts.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import reliability_hostile as hostile
import reliability_strategies as rs
from pydantic import BaseModel, ConfigDict, Field

from mainspring import (
    Agent,
    AgentBusyError,
    AssistantMessage,
    Block,
    CompactionResult,
    Model,
    StopRun,
    TextContent,
    Tool,
    ToolContext,
    ToolResult,
    ToolResultMessage,
    UserMessage,
    hookimpl,
)
from mainspring.events import event_to_json
from mainspring.invariants import transcript_problem
from mainspring.plugins.convert import convert_to_llm
from mainspring.sessions import read_session
from mainspring.settings import (
    CompactionSettings,
    HookSettings,
    RetrySettings,
    Settings,
    ToolSettings,
)
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

__all__ = [
    "BOUND_S",
    "FIGURES",
    "HOSTILE_BOUND_S",
    "SECRET",
    "Note",
    "World",
    "check_quiet_loop",
    "run_scenario",
    "settle_bound",
]

BOUND_S = 20.0
"""No generated run may take longer than this (the slowest scripted ones take ~0.3 s)."""

HOSTILE_BOUND_S = 5.0
"""The same with hostile plugins: their deadlines are a few hundredths of a second."""

FIGURES: dict[str, float] = {"runs": 0, "aborted_runs": 0, "max_settle_s": 0.0}
"""Runs checked in this process, runs that were aborted, and the longest time from the
first ``abort()`` to the run's end (loop clock), for the session summary."""


def settle_bound(scenario: rs.Scenario) -> float:
    """How long after ``abort()`` a run of ``scenario`` may take to settle: the longest
    grace period plugin or tool code is given once cancelled, plus a generous 1 s."""
    spec = scenario.hostile
    hooks = HookSettings().abort_grace_s if spec is None else spec.hook_grace_s
    return max(hooks, scenario.abort_grace_s) + 1.0


SECRET = "SECRET-TOOL-OUTPUT"
"""The echo tool's output marker: it must never pass a result filter that failed."""

CONTAINED_MODES = {
    "transform_context": {"raise", "break", "wrong_type"},
    "convert_to_llm": {"raise", "break", "wrong_type"},
    "count_tokens": {"raise", "wrong_type"},
    "compact": {"raise", "wrong_type", "broken"},
    "before_tool_call": {"raise", "wrong_type"},
    "after_tool_result": {"raise", "wrong_type"},
}


class Note(BaseModel):
    """A custom-role message a plugin may put into a projection."""

    model_config = ConfigDict(frozen=True)
    role: Literal["note"] = "note"
    text: str = "a plugin's note"
    timestamp: float = Field(default_factory=time.time)


# -------------------------------------------------------------------------------- tools


class TextArgs(BaseModel):
    text: str


class MsArgs(BaseModel):
    ms: int = Field(ge=0, le=1000)


class CountArgs(BaseModel):
    n: int = Field(ge=0, le=5)


class NoArgs(BaseModel):
    pass


SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


def make_tools(world: World) -> list[Tool]:
    """The fault tools (see ``reliability_strategies.KNOWN_TOOLS``)."""

    def executed(ctx: ToolContext) -> None:
        state = world.agent.state
        world.executed.append((state.run_id, state.turn, ctx.tool_call_id))

    async def echo(args: TextArgs, ctx: ToolContext) -> str:
        executed(ctx)
        return f"{SECRET} {args.text}"

    async def slow(args: MsArgs, ctx: ToolContext) -> str:
        executed(ctx)
        await asyncio.sleep(args.ms / 1000)
        return f"slept {args.ms} ms"

    async def fail(args: TextArgs, ctx: ToolContext) -> str:
        executed(ctx)
        raise RuntimeError(f"the tool failed: {args.text}")

    async def cancelself(args: NoArgs, ctx: ToolContext) -> str:
        executed(ctx)
        raise asyncio.CancelledError

    async def stubborn(args: MsArgs, ctx: ToolContext) -> str:
        executed(ctx)
        task = asyncio.current_task()
        assert task is not None
        world.stubborn_tasks.add(task)
        try:
            await asyncio.sleep(args.ms / 1000)
        except asyncio.CancelledError:
            # uncooperative: keeps working for a while after being cancelled
            world.stubborn_cancelled.add(task)
            await asyncio.sleep(world.scenario.stubborn_s)
            world.stubborn_finished.add(task)
            return "finished anyway"
        return "done"

    def blocking(args: MsArgs, ctx: ToolContext) -> str:
        world.executed.append(("thread", None, ctx.tool_call_id))
        time.sleep(args.ms / 1000)
        return "blocked a thread"

    async def progress(args: CountArgs, ctx: ToolContext) -> str:
        executed(ctx)
        world.contexts.append(ctx)
        for step in range(args.n):
            ctx.update({"step": step})
            await asyncio.sleep(0)
        return f"{args.n} steps"

    async def serial(args: MsArgs, ctx: ToolContext) -> str:
        executed(ctx)
        await asyncio.sleep(args.ms / 1000)
        return "serial"

    async def timeout(args: MsArgs, ctx: ToolContext) -> str:
        executed(ctx)
        await asyncio.sleep(args.ms / 1000)
        return "too late"

    def schema(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        world.executed.append(("thread", None, ctx.tool_call_id))
        return ToolResult(f"n={args['n']}", details={"n": args["n"]})

    async def locker(args: MsArgs, ctx: ToolContext) -> str:
        executed(ctx)
        async with ctx.file_lock(world.lock_path):
            if world.lock_holder is not None:
                world.problems.append(
                    f"file_lock held by {world.lock_holder} and {ctx.tool_call_id}"
                )
            world.lock_holder = ctx.tool_call_id
            try:
                await asyncio.sleep(args.ms / 1000)
            finally:
                world.lock_holder = None
        return "locked"

    async def big(args: CountArgs, ctx: ToolContext) -> str:
        executed(ctx)
        return "x" * (args.n * 60 + 10)

    return [
        Tool("echo", "echo text", TextArgs, echo),
        Tool("slow", "sleep", MsArgs, slow),
        Tool("fail", "raise", TextArgs, fail),
        Tool("cancelself", "raise CancelledError", NoArgs, cancelself),
        Tool("stubborn", "ignore cancellation", MsArgs, stubborn),
        Tool("blocking", "block a thread", MsArgs, blocking),
        Tool("progress", "report progress", CountArgs, progress),
        Tool("serial", "sequential", MsArgs, serial, sequential=True),
        Tool("timeout", "time out", MsArgs, timeout, timeout_s=0.005),
        Tool("schema", "JSON-Schema parameters", SCHEMA, schema),
        Tool("big", "a long result", CountArgs, big),
        Tool("locker", "hold a file lock", MsArgs, locker),
    ]


# ------------------------------------------------------------------------------ plugins


@dataclass(frozen=True)
class Fired:
    """One injected hook fault, where it happened."""

    hook: str
    plugin: str
    mode: str
    run_id: str | None
    turn: int | None
    call_id: str | None
    at_event: int


def _orphan() -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id="ghost-call", tool_name="ghost", content=(TextContent(text="boo"),)
    )


def _project(hook: str, mode: str, messages: Sequence[Any]) -> Any:
    if mode == "identity":
        return list(messages)
    if mode == "custom":
        return (*messages, Note())
    if mode == "break":
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if results:
            return tuple(m for m in messages if m is not results[0])
        return (*messages, _orphan())
    if mode == "wrong_type":
        return 42
    return _common(hook, mode)


def _common(hook: str, mode: str) -> Any:
    if mode == "raise":
        raise RuntimeError(f"injected {hook} fault")
    if mode == "stop":
        raise StopRun(f"injected stop in {hook}")
    raise AssertionError(f"unknown mode {mode!r} for {hook}")


class FaultPlugin:
    """Implements every hook; the hooks named in its spec misbehave as scripted."""

    def __init__(self, spec: rs.PluginSpec, world: World) -> None:
        self.name = spec.name
        self._faults = {fault.hook: fault for fault in spec.faults}
        self._calls: Counter[str] = Counter()
        self._world = world

    def _act(
        self,
        hook: str,
        default: Any,
        misbehave: Callable[[str], Any],
        call_id: str | None = None,
    ) -> Any:
        fault = self._faults.get(hook)
        index = self._calls[hook]
        self._calls[hook] += 1
        if fault is None or (fault.at is not None and fault.at != index):
            return default
        world = self._world

        def fire() -> Any:
            state = world.agent.state
            world.fired.append(
                Fired(
                    hook,
                    self.name,
                    fault.mode,
                    state.run_id,
                    state.turn,
                    call_id,
                    len(world.recorder.events),
                )
            )
            return misbehave(fault.mode)

        if not fault.is_async:
            return fire()

        async def later() -> Any:
            await asyncio.sleep(0.002 if fault.mode == "slow" else 0)
            return fire()

        return later()

    @hookimpl
    def transform_context(self, messages: tuple[Any, ...], agent: Agent, signal: Any) -> Any:
        return self._act(
            "transform_context", None, lambda m: _project("transform_context", m, messages)
        )

    @hookimpl
    def convert_to_llm(self, messages: tuple[Any, ...], agent: Agent) -> Any:
        return self._act("convert_to_llm", None, lambda m: _project("convert_to_llm", m, messages))

    @hookimpl
    def before_tool_call(self, call: Any, args: Any, tool: Tool, agent: Agent, signal: Any) -> Any:
        def misbehave(mode: str) -> Any:
            if mode == "block":
                return Block("injected block")
            if mode == "wrong_type":
                return "yes"
            return _common("before_tool_call", mode)

        return self._act("before_tool_call", None, misbehave, call.id)

    @hookimpl
    def after_tool_result(self, call: Any, result: ToolResult, agent: Agent, signal: Any) -> Any:
        def misbehave(mode: str) -> Any:
            if mode == "replace":
                return ToolResult("replaced by a plugin")
            if mode == "wrong_type":
                return "not a ToolResult"
            return _common("after_tool_result", mode)

        return self._act("after_tool_result", None, misbehave, call.id)

    @hookimpl
    def should_stop_after_turn(self, state: Any, agent: Agent, signal: Any) -> Any:
        def misbehave(mode: str) -> Any:
            return True if mode == "true" else _common("should_stop_after_turn", mode)

        return self._act("should_stop_after_turn", False, misbehave)

    @hookimpl
    def on_event(self, event: Any, agent: Agent, signal: Any) -> Any:
        return self._act("on_event", None, lambda mode: _common("on_event", mode))

    @hookimpl
    def count_tokens(self, messages: tuple[Any, ...], model: Model) -> Any:
        def misbehave(mode: str) -> Any:
            if mode == "huge":
                return 10**9
            if mode == "wrong_type":
                return "many"
            return _common("count_tokens", mode)

        return self._act("count_tokens", None, misbehave)

    @hookimpl
    def compact(
        self, messages: tuple[Any, ...], model: Model, reason: str, agent: Agent, signal: Any
    ) -> Any:
        def misbehave(mode: str) -> Any:
            if mode == "keep":
                return CompactionResult(messages, summary="kept everything")
            if mode == "wrong_type":
                return "compacted"
            if mode == "broken":
                return CompactionResult((*messages, _orphan()))
            if mode == "slow":
                return None
            return _common("compact", mode)

        return self._act("compact", None, misbehave)


# ---------------------------------------------------------------------------- listeners


def make_listener(spec: rs.ListenerSpec, world: World) -> Callable[[Any, Any], Any]:
    """A subscriber that performs ``spec.action`` at event ``spec.at`` of the first run."""

    def act() -> None:
        agent, index = world.agent, len(world.recorder.events) - 1
        action = spec.action
        if action == "raise":
            raise RuntimeError(f"injected listener fault at event {index}")
        if action == "abort":
            world.listener_aborts.append(index)
            world.abort()
        elif action == "abort_external":
            world.external_abort.set()
        elif action in ("steer", "follow_up"):
            world.queue(action, index)
        elif action == "late_update":
            for ctx in world.contexts:
                try:
                    ctx.update("late")
                except Exception as error:
                    world.problems.append(f"ctx.update() after the tool finished raised {error!r}")
        elif action == "busy":
            try:
                agent.reset()
            except AgentBusyError:
                pass
            else:
                world.problems.append(f"reset() during a run (event {index}) did not raise")

    async def act_async() -> None:
        await asyncio.sleep(0.001 if spec.action == "slow" else 0)
        if spec.action == "busy":
            try:
                await world.agent.prompt("while busy")
            except AgentBusyError:
                pass
            else:
                world.problems.append("prompt() during a run did not raise AgentBusyError")
            return
        act()

    def listener(event: Any, signal: Any) -> Any:
        if world.run_no != 1 or len(world.recorder.events) - 1 != spec.at:
            return None
        if spec.is_async:
            return act_async()
        if spec.action != "slow":
            act()
        return None

    return listener


# -------------------------------------------------------------------------------- world


class _Refused(Exception):
    """``resume()`` refused to start (it raised ``ValueError``)."""


class World:
    """One generated scenario: the agent and everything the test injected and saw."""

    def __init__(
        self,
        scenario: rs.Scenario,
        session_path: str,
        provider: Any = None,
        model: str | Model | None = None,
    ) -> None:
        self.scenario = scenario
        self.session_path = session_path
        self.recorder = EventRecorder()
        self.fired: list[Fired] = []
        self.problems: list[str] = []
        self.contexts: list[ToolContext] = []
        self.executed: list[tuple[str | None, int | None, str]] = []
        self.lock_path = str(Path(session_path).with_name("shared.txt"))
        self.lock_holder: str | None = None
        self.stubborn_tasks: set[asyncio.Task[Any]] = set()
        self.stubborn_cancelled: set[asyncio.Task[Any]] = set()
        self.stubborn_finished: set[asyncio.Task[Any]] = set()
        self.listener_aborts: list[int] = []
        self.tracked: list[tuple[UserMessage, int]] = []
        self.run_no = 0
        self.run_starts: list[int] = []
        self.external_abort = asyncio.Event()
        self.switch = hostile.Switch()
        self.hostile_fired: list[hostile.Fired] = []
        self.run_aborts: list[float] = []
        """Loop times of the ``abort()`` calls (and caller cancellations) of this run."""
        self.run_done: float | None = None
        s = scenario
        spec = s.hostile
        self.provider = provider or FauxProvider(
            s.steps, chunk_size=s.chunk_size, delay_s=s.delay_s
        )
        model = model or "faux:test"
        compaction = CompactionSettings()
        if s.small_window and provider is None:
            model = Model(provider="faux", id="small", context_window=300, max_output_tokens=50)
            compaction = CompactionSettings(keep_recent_tokens=60)
        tool_settings = ToolSettings(abort_grace_s=s.abort_grace_s, max_result_chars=100)
        hook_settings = HookSettings()
        tools = make_tools(self)
        plugins: list[Any] = [FaultPlugin(plugin, self) for plugin in s.plugins]
        self.filters_replace = any(
            fault.hook == "after_tool_result" for plugin in s.plugins for fault in plugin.faults
        )
        if spec is not None:
            tool_settings = ToolSettings(
                abort_grace_s=s.abort_grace_s,
                max_result_chars=100,
                max_argument_bytes=spec.max_argument_bytes,
            )
            hook_settings = HookSettings(
                timeout_s=spec.hook_timeout_s, abort_grace_s=spec.hook_grace_s
            )
            tools += hostile.make_hostile_tools(self)
            plugins += [
                hostile.HostilePlugin(f"hostile{index}", faults, self)
                for index, faults in enumerate(spec.plugins)
            ]
            self.filters_replace = self.filters_replace or any(
                fault.hook == "after_tool_result" for faults in spec.plugins for fault in faults
            )
        settings = Settings(
            retry=RetrySettings(max_attempts=s.max_attempts, base_delay_s=0, max_delay_s=0),
            tools=tool_settings,
            hooks=hook_settings,
            compaction=compaction,
            steering_mode=s.steering_mode,  # type: ignore[arg-type]
            follow_up_mode=s.follow_up_mode,  # type: ignore[arg-type]
            session_path=session_path,
        )
        self.agent = Agent(
            model=model,
            provider=self.provider,
            tools=tools,
            plugins=plugins,
            autoload=False,
            settings=settings,
        )
        self.agent.subscribe(self.recorder)
        self.agent.subscribe(self._check_state)
        self.caller: asyncio.Task[Any] | None = None
        self.caller_cancelled = False
        if s.cancel_caller_at is not None:
            self.agent.subscribe(self._cancel_caller)
        for listener in s.listeners:
            self.agent.subscribe(make_listener(listener, self))
        if spec is not None:
            for index, fault in enumerate(spec.subscribers):
                self.agent.subscribe(hostile.HostileSubscriber(index, fault, self))

    # -- during the run

    def abort(self) -> None:
        """``agent.abort()``, its time noted while the run is going."""
        self._note_abort()
        self.agent.abort()

    def _note_abort(self) -> None:
        caller = self.caller
        if caller is not None and not caller.done():
            self.run_aborts.append(asyncio.get_running_loop().time())

    def queue(self, kind: str, index: int) -> None:
        message = UserMessage(content=f"{kind} #{len(self.tracked)} at event {index}")
        self.tracked.append((message, index))
        if kind == "steer":
            self.agent.steer(message)
        else:
            self.agent.follow_up(message)

    def _check_state(self, event: Any, signal: Any) -> None:
        state = self.agent.state
        where = f"event #{len(self.recorder.events) - 1} ({event.type})"
        if not state.is_streaming:
            self.problems.append(f"is_streaming is false at {where}")
        kind = event.type
        if kind == "tool_execution_start" and event.tool_call_id not in state.pending_tool_calls:
            self.problems.append(f"{event.tool_call_id!r} not in pending_tool_calls at {where}")
        elif kind == "tool_execution_end" and event.tool_call_id in state.pending_tool_calls:
            self.problems.append(f"{event.tool_call_id!r} still in pending_tool_calls at {where}")
        elif kind == "phase_change" and state.phase != event.phase:
            self.problems.append(f"state.phase is {state.phase!r} at {where} to {event.phase!r}")
        elif kind == "message_update" and state.streaming_message is not event.message:
            self.problems.append(f"state.streaming_message is not the message at {where}")
        elif kind == "agent_end" and state.phase != "idle":
            self.problems.append(f"state.phase is {state.phase!r} at {where}")

    def _cancel_caller(self, event: Any, signal: Any) -> None:
        index = len(self.recorder.events) - 1
        if self.run_no == 1 and index == self.scenario.cancel_caller_at:
            assert self.caller is not None
            # the caller sees its CancelledError (and aborts the run) only when the run task
            # next yields: not an abort "at this event", so not in listener_aborts
            self.caller_cancelled = True
            self._note_abort()
            self.caller.cancel()

    async def _external_aborter(self) -> None:
        await self.external_abort.wait()
        for _ in range(self.scenario.external_yields):
            await asyncio.sleep(0)
        self.abort()

    # -- the scenario

    async def main(self) -> None:
        agent = self.agent
        for _ in range(self.scenario.steer_before):
            self.queue("steer", -1)
        for _ in range(self.scenario.follow_up_before):
            self.queue("follow_up", -1)
        aborter = asyncio.create_task(self._external_aborter())
        try:
            await self.prompt(1, "the first prompt")
        finally:
            aborter.cancel()
            await asyncio.wait([aborter])
        await self.check_run(1)
        if self.scenario.second_run:
            if isinstance(self.provider, FauxProvider):
                self.provider.append(faux.text("the second reply"))
            if self.scenario.second_run_kind == "resume":
                if not await self.resume():
                    return
            else:
                await self.prompt(2, "the second prompt")
            await self.check_run(2)
        assert agent.state.is_streaming is False

    async def prompt(self, number: int, text: str) -> None:
        await self._run(number, lambda: self.agent.prompt(text))

    async def resume(self) -> bool:
        """Run 2 as ``resume()``; ``False`` if it rightly refused (nothing to resume)."""
        state = self.agent.state
        tail = state.messages[-1] if state.messages else None
        queued = bool(state.steering_queue or state.follow_up_queue)
        refuse = tail is None or (
            isinstance(tail, AssistantMessage)
            and tail.stop_reason not in ("error", "aborted")
            and not queued
        )
        refuse = refuse or not isinstance(tail, AssistantMessage | UserMessage | ToolResultMessage)
        before = len(self.recorder.events)
        try:
            await self._run(2, self.agent.resume, refusal=ValueError)
        except _Refused as refused:
            if not refuse:
                self.fail(f"resume() refused a {tail!r} tail: {refused.args[0]!r}")
            if len(self.recorder.events) != before:
                self.fail("resume() emitted events although it refused")
            self.run_starts.pop()
            return False
        if refuse:
            self.fail(f"resume() ran although the tail was {tail!r} and nothing was queued")
        return True

    async def _run(
        self, number: int, start: Callable[[], Any], refusal: type[Exception] | None = None
    ) -> None:
        self.run_no = number
        self.run_starts.append(len(self.recorder.events))
        self.messages_before = len(self.agent.state.messages)
        self.run_aborts = []
        self.run_done = None
        loop = asyncio.get_running_loop()
        spec = self.scenario.hostile
        bound = BOUND_S if spec is None else HOSTILE_BOUND_S
        timer = None
        if spec is not None and spec.abort_after_s is not None:
            timer = loop.call_later(spec.abort_after_s, self.abort)
        try:
            async with asyncio.timeout(bound):
                self.caller = asyncio.create_task(start())
                self.caller.add_done_callback(self._done)
                await asyncio.wait([self.caller])
                self.caller.result()
        except TimeoutError:
            self.fail(f"run {number} did not return within {bound} s")
        except asyncio.CancelledError:
            if not (number == 1 and self.caller_cancelled):
                raise
        except BaseException as error:
            if refusal is not None and isinstance(error, refusal):
                raise _Refused(str(error)) from error
            detail = "".join(traceback.format_exception(error))
            self.fail(f"run {number} raised {error!r}:\n{detail}")
        else:
            if number == 1 and self.caller_cancelled:
                self.fail("prompt() returned normally although its caller was cancelled")
        finally:
            if timer is not None:
                timer.cancel()
        self.check_settled(number)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.run_done = task.get_loop().time()

    def check_settled(self, number: int) -> None:
        """An aborted run settled within :func:`settle_bound` of its first ``abort()``."""
        FIGURES["runs"] += 1
        if not self.run_aborts or self.run_done is None:
            return
        settle = self.run_done - min(self.run_aborts)
        FIGURES["aborted_runs"] += 1
        FIGURES["max_settle_s"] = max(FIGURES["max_settle_s"], settle)
        bound = settle_bound(self.scenario)
        if settle > bound:
            self.fail(f"run {number} settled {settle:.3f} s after abort(), past {bound:.3f} s")

    # -- checks

    def fail(self, message: str) -> None:
        types = " ".join(f"{i}:{e.type}" for i, e in enumerate(self.recorder.events))
        raise AssertionError(f"{message}\n  events: {types}")

    def run_events(self, number: int) -> list[Any]:
        start = self.run_starts[number - 1]
        end = self.run_starts[number] if number < len(self.run_starts) else None
        return self.recorder.events[start:end]

    async def check_run(self, number: int) -> None:
        agent, events = self.agent, self.recorder.events
        if self.problems:
            self.fail("; ".join(self.problems))
        try:
            check_event_grammar(events)
        except AssertionError as error:
            self.fail(str(error))
        mine = self.run_events(number)
        if [e.type for e in mine].count("agent_start") != 1 or mine[-1].type != "agent_end":
            self.fail(f"run {number} is not exactly one agent_start ... agent_end")
        every = self.scenario.hostile is not None
        for index, event in enumerate(mine):
            if event.type == "message_update" and not every:
                continue  # a partial of the scripted reply (costly to build for each delta)
            try:
                event_to_json(event)
            except BaseException as error:
                self.fail(f"event {index} ({event.type}) of run {number} is not JSON: {error!r}")
        end = mine[-1]
        state = agent.state
        if state.is_streaming or state.phase != "idle" or state.pending_tool_calls:
            self.fail(f"not idle after run {number}: {state.phase}, {state.pending_tool_calls}")
        if state.streaming_message is not None:
            self.fail(f"a streaming message is left after run {number}")
        problem = transcript_problem(state.messages)
        if problem:
            self.fail(f"the transcript after run {number} is invalid: {problem}")
        sent = tuple(state.messages)
        problem = transcript_problem(convert_to_llm(sent) or sent, llm_only=True)
        if problem:
            self.fail(f"the converted transcript after run {number} is invalid: {problem}")
        failed = end.reason in ("error", "aborted")
        if failed != (state.error_message is not None):
            self.fail(
                f"run {number} ended {end.reason!r} but error_message={state.error_message!r}"
            )
        compacted = any(e.type == "compaction_end" and e.error is None for e in mine)
        if not compacted:
            tail = tuple(state.messages[self.messages_before :])
            if len(tail) != len(end.messages) or any(
                a is not b for a, b in zip(tail, end.messages, strict=True)
            ):
                self.fail(f"agent_end.messages of run {number} are not the run's new messages")
        await self.check_tasks(number)
        self.check_session(number)
        self.check_fired(number, mine)
        if number == 1:
            self.check_aborts(mine)
        self.check_queues(number, mine)
        if self.scenario.hostile is not None:
            hostile.check_hostile(self, number, mine)

    async def check_tasks(self, number: int) -> None:
        current = asyncio.current_task()
        left = {task for task in asyncio.all_tasks() if task is not current}
        if left:
            # a tool that ignores its cancellation is detached after the grace period:
            # the kernel closes it, so not even its task outlives the run
            self.fail(f"tasks left after run {number}: {left}")
        if self.scenario.stubborn_s > self.scenario.abort_grace_s and self.stubborn_finished:
            self.fail(
                f"run {number} waited {self.scenario.stubborn_s} s for a cancelled "
                f"uncooperative tool, past abort_grace_s={self.scenario.abort_grace_s}"
            )
        self.stubborn_tasks.clear()
        self.stubborn_cancelled.clear()
        self.stubborn_finished.clear()

    def check_session(self, number: int) -> None:
        stored = read_session(self.session_path).messages
        live = list(self.agent.state.messages)
        if stored != live:
            index = next(
                (i for i, (a, b) in enumerate(zip(stored, live, strict=False)) if a != b),
                min(len(stored), len(live)),
            )
            self.fail(
                f"the session file after run {number} differs from the transcript at message "
                f"{index}: {len(stored)} stored, {len(live)} live\n"
                f"  stored: {stored[index : index + 1]}\n  live:   {live[index : index + 1]}"
            )

    def check_fired(self, number: int, mine: list[Any]) -> None:
        run_id = mine[0].run_id
        # an abort cuts the wait for a hook that is running (a plain def in its worker
        # thread, an async def between its await and its return): it did fire, but the
        # kernel stopped waiting and reports no failure for it
        aborted = mine[-1].type == "agent_end" and mine[-1].reason == "aborted"
        for fired in self.fired:
            if fired.run_id != run_id:
                continue
            contained = fired.mode in CONTAINED_MODES.get(fired.hook, ())
            if contained and not aborted:
                after = self.recorder.events[fired.at_event :]
                if not any(
                    e.type == "hook_error" and e.hook == fired.hook and e.plugin == fired.plugin
                    for e in after
                ):
                    self.fail(f"no hook_error for the contained fault {fired}")
            if fired.hook == "before_tool_call" and fired.mode in ("raise", "wrong_type", "block"):
                ends = self._ends(mine, fired)
                if len(ends) != 1 or not ends[0].is_error:
                    self.fail(f"a failed/blocking gate did not block its call: {fired} {ends}")
                if (fired.run_id, fired.turn, fired.call_id) in self.executed:
                    self.fail(f"a call ran although its gate failed or blocked: {fired}")
            if fired.hook == "after_tool_result" and fired.mode in ("raise", "wrong_type"):
                ends = self._ends(mine, fired)
                if len(ends) != 1 or not ends[0].is_error or SECRET in ends[0].result.text:
                    self.fail(f"a failed result filter did not withhold the result: {fired}")
                for event in mine:
                    message = getattr(event, "message", None)
                    if (
                        event.type == "message_end"
                        and isinstance(message, ToolResultMessage)
                        and event.turn == fired.turn
                        and message.tool_call_id == fired.call_id
                        and SECRET in message.text
                    ):
                        self.fail(f"a withheld result reached the transcript: {fired}")

    @staticmethod
    def _ends(mine: list[Any], fired: Fired) -> list[Any]:
        return [
            e
            for e in mine
            if e.type == "tool_execution_end"
            and e.turn == fired.turn
            and e.tool_call_id == fired.call_id
        ]

    def check_aborts(self, mine: list[Any]) -> None:
        if not self.listener_aborts:
            return
        end = self.run_starts[0] + len(mine) - 1
        last = mine[-2] if len(mine) > 1 else None
        if last is not None and last.type == "phase_change" and last.phase == "idle":
            end -= 1
        reason = mine[-1].reason
        first = min(self.listener_aborts)
        if first < end and reason == "stop":
            self.fail(f"abort() at event {first} (before the run ended) but reason={reason!r}")

    def check_queues(self, number: int, mine: list[Any]) -> None:
        state = self.agent.state
        delivered = Counter(
            id(e.message)
            for e in self.recorder.events
            if e.type == "message_end" and isinstance(e.message, UserMessage)
        )
        queued = Counter(id(m) for m in (*state.steering_queue, *state.follow_up_queue))
        for message, _at in self.tracked:
            count = delivered[id(message)] + queued[id(message)]
            if count != 1:
                self.fail(
                    f"queued message {message.content!r} is delivered {delivered[id(message)]}x "
                    f"and still queued {queued[id(message)]}x after run {number}"
                )
        if mine[-1].reason == "stop":
            start = self.run_starts[number - 1]
            turn_ends = [start + i for i, e in enumerate(mine) if e.type == "turn_end"]
            last_turn_end = turn_ends[-1] if turn_ends else start
            for message, at in self.tracked:
                if at <= last_turn_end and queued[id(message)]:
                    self.fail(
                        f"run {number} ended 'stop' but {message.content!r} (queued at event "
                        f"{at}, before its last turn_end #{last_turn_end}) is still queued"
                    )


def check_quiet_loop() -> None:
    """Fail if the event loop has tasks besides the current one."""
    current = asyncio.current_task()
    left = {task for task in asyncio.all_tasks() if task is not current}
    assert not left, f"tasks left: {left}"


def run_scenario(
    scenario: rs.Scenario,
    provider_factory: Callable[[], Any] | None = None,
    model: str | Model | None = None,
) -> World:
    """Run ``scenario`` in a fresh event loop; ``AssertionError`` on a broken invariant.

    ``provider_factory`` (called inside the loop) replaces the FauxProvider of the script.
    """
    with tempfile.TemporaryDirectory(prefix="mainspring-reliability-") as directory:
        session = str(Path(directory) / "session.jsonl")

        async def main() -> World:
            provider = provider_factory() if provider_factory is not None else None
            world = World(scenario, session, provider, model)
            try:
                await world.main()
            finally:
                world.switch.release()  # hostile code may finish now (if anything still runs it)
            return world

        return asyncio.run(main())


def assistant_messages(world: World) -> list[AssistantMessage]:
    """The assistant messages of the transcript (for ad-hoc assertions in regressions)."""
    return [m for m in world.agent.state.messages if isinstance(m, AssistantMessage)]
