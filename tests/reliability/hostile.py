"""Hostile plugin code and tools for the generated runs (see ``HostileSpec``).

Plugin code here does what the kernel cannot prevent a third-party package from doing:

- hang: await forever, honouring cancellation (``hang``), catching ``CancelledError`` and
  awaiting again (``deaf``), also ignoring the ``GeneratorExit`` of ``close()``
  (``deafer``), or yield garbage to the event loop and swallow whatever is thrown in
  (``bad_yield``);
- raise a ``BaseException`` subclass of its own, or ``GeneratorExit``;
- return garbage: objects no contract allows, locks, bytes, cycles, endless generators,
  values whose ``repr`` raises, integers too long to print, ``Block``\\ s with such reasons.

The tools swallow cancellation, block their thread, return or report unserialisable
values, or raise ``BaseException`` subclasses. Nothing here hangs the test itself: every
hang waits on the world's :class:`Switch`, released when the scenario is over (also when
it failed), so a kernel that never lets go fails the run bound instead of hanging pytest.

:func:`check_hostile` asserts what each hostile act must have led to (on top of every
invariant the harness checks): a failing gate blocked its call, a failing result filter
withheld the result, a failing transform has its ``hook_error``, a hang that no abort cut
has a ``hook_error`` saying "timed out after", arguments past the limits got a
validation-error result naming the limit, and a tool past its deadline timed out.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import reliability_strategies as rs
from pydantic import BaseModel, ConfigDict

from mainspring import Block, Tool, ToolContext, ToolResult, UserMessage, hookimpl

__all__ = [
    "TOOL_TIMEOUT_S",
    "HostileError",
    "HostilePlugin",
    "HostileSubscriber",
    "Switch",
    "check_hostile",
    "garbage_index",
    "make_hostile_tools",
]

TOOL_TIMEOUT_S = 0.02
"""The ``timeout_s`` of the timed hostile tools."""

SECRET = "SECRET-TOOL-OUTPUT"  # the harness's marker (a failed filter must never leak it)


class HostileError(BaseException):
    """A plugin's own ``BaseException`` subclass (not an ``Exception``)."""


class Switch:
    """Releases every hang of one scenario, at its end."""

    def __init__(self) -> None:
        self.released = False
        self.event = asyncio.Event()
        self.thread_event = threading.Event()

        self._kept: list[Any] = []

    def keep(self, coroutine: Any) -> Any:
        """Hold ``coroutine`` until :meth:`release`: one that ignores ``GeneratorExit``
        would otherwise be collected (and complain) as soon as the kernel drops it."""
        self._kept.append(coroutine)
        return coroutine

    def release(self) -> None:
        """End every hang; close what the kernel detached (it returns, now released)."""
        self.released = True
        self.event.set()
        self.thread_event.set()
        kept, self._kept = self._kept, []
        for coroutine in kept:
            coroutine.close()


async def hang(switch: Switch, behaviour: str) -> None:
    """Await until released; ``deaf``/``deafer`` swallow cancellation, ``deafer`` also
    ``GeneratorExit`` (so ``close()`` raises ``RuntimeError``)."""
    while not switch.released:
        try:
            await switch.event.wait()
        except asyncio.CancelledError:
            if behaviour == "hang":
                raise
        except GeneratorExit:
            if behaviour != "deafer":
                raise


class BadYield:
    """An awaitable that yields garbage to the event loop and swallows what comes back."""

    def __init__(self, switch: Switch) -> None:
        self.switch = switch

    def __await__(self) -> Generator[Any, None, None]:
        while not self.switch.released:
            try:
                yield 42
            except GeneratorExit:
                raise
            except BaseException:
                continue


# ------------------------------------------------------------------------------ garbage


class Evil:
    """A value that raises ``HostileError`` from ``repr``, ``str``, ``bool``, ``len``,
    iteration and comparison."""

    def _raise(self, *args: Any) -> Any:
        raise HostileError("evil value")

    __repr__ = __str__ = __bool__ = __len__ = __iter__ = __eq__ = _raise
    __hash__ = object.__hash__


class EvilAwaitable:
    """Looks awaitable; ``__await__`` raises."""

    def __await__(self) -> Any:
        raise HostileError("evil awaitable")


class EvilSequence(list[Any]):
    """A list whose iteration raises."""

    def __iter__(self) -> Any:
        raise HostileError("evil sequence")


class LockModel(BaseModel):
    """A pydantic model holding a lock (pydantic cannot dump it to JSON)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    lock: Any


def circular() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


def circular_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def deep(levels: int = 5_000) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


VALUES: dict[str, Callable[[], Any]] = {
    "object": object,
    "lock": threading.Lock,
    "bytes": lambda: b"\x00\xffbytes",
    "circular": circular,
    "generator": lambda: (n for n in itertools.count()),
    "set": lambda: {1, 2, 3},
    "weird_keys": lambda: {(1, 2): "tuple key", object(): "object key", 3: "int key"},
    "huge_int": lambda: 10**5000,
    "deep": deep,
    "evil": Evil,
}

GARBAGE: dict[str, tuple[tuple[str, Callable[[], Any]], ...]] = {
    "before_tool_call": (
        ("object", object),
        ("lock", threading.Lock),
        ("bytes", VALUES["bytes"]),
        ("circular", circular),
        ("generator", VALUES["generator"]),
        ("int", lambda: 42),
        ("str", lambda: "yes"),
        ("true", lambda: True),
        ("false", lambda: False),
        ("evil_repr", Evil),
        ("huge_int", VALUES["huge_int"]),
        ("block_lock", lambda: Block(threading.Lock())),  # type: ignore[arg-type]
        ("block_circular", lambda: Block(circular())),  # type: ignore[arg-type]
        ("block_huge_int", lambda: Block(10**5000)),  # type: ignore[arg-type]
        ("block_evil", lambda: Block(Evil())),  # type: ignore[arg-type]
    ),
    "transform_context": (
        ("object_list", lambda: [object()]),
        ("int", lambda: 42),
        ("str", lambda: "not messages"),
        ("bytes", VALUES["bytes"]),
        ("generator", lambda: (UserMessage(content="gen") for _ in range(3))),
        ("circular_list", circular_list),
        ("lock_tuple", lambda: (threading.Lock(),)),
        ("dict", lambda: {"role": "user", "content": "a dict"}),
        ("evil", Evil),
        ("evil_sequence", lambda: EvilSequence([UserMessage(content="x")])),
    ),
    "after_tool_result": (
        ("object", object),
        ("str", lambda: "not a ToolResult"),
        ("lock", threading.Lock),
        ("circular", circular),
        ("evil", Evil),
        ("huge_int", VALUES["huge_int"]),
        ("result_lock", lambda: ToolResult("replaced", details=threading.Lock())),
        ("result_circular", lambda: ToolResult("replaced", details=circular())),
        ("result_deep", lambda: ToolResult("replaced", details=deep())),
        ("result_generator", lambda: ToolResult("replaced", details=VALUES["generator"]())),
        ("result_huge_int", lambda: ToolResult("replaced", details={"n": 10**5000})),
    ),
    "on_event": (
        ("int", lambda: 42),
        ("object", object),
        ("evil", Evil),
        ("evil_awaitable", EvilAwaitable),
    ),
}
GARBAGE["subscriber"] = GARBAGE["on_event"]


def garbage_for(hook: str, index: int) -> tuple[str, Callable[[], Any]]:
    table = GARBAGE[hook]
    return table[index % len(table)]


def garbage_index(hook: str, label: str) -> int:
    """The index of the garbage named ``label`` in ``hook``'s table (for regressions)."""
    return [name for name, _ in GARBAGE[hook]].index(label)


# ------------------------------------------------------------------------------ plugins


@dataclass(frozen=True)
class Fired:
    """One hostile act of plugin code, where it happened."""

    hook: str
    plugin: str
    behaviour: str
    garbage: str | None
    run_id: str | None
    turn: int | None
    call_id: str | None
    at_event: int


def _perform(world: Any, hook: str, name: str, fault: rs.HostileFault, call_id: str | None) -> Any:
    behaviour = fault.behaviour
    label, factory = garbage_for(hook, fault.garbage) if behaviour == "garbage" else (None, None)
    state = world.agent.state
    world.hostile_fired.append(
        Fired(
            hook,
            name,
            behaviour,
            label,
            state.run_id,
            state.turn,
            call_id,
            len(world.recorder.events),
        )
    )
    switch: Switch = world.switch
    if behaviour in ("hang", "deaf", "deafer"):
        return switch.keep(hang(switch, behaviour))
    if behaviour == "bad_yield":
        return BadYield(switch)

    def act() -> Any:
        if behaviour == "raise_custom":
            raise HostileError(f"{name} {hook}")
        if behaviour == "generator_exit":
            raise GeneratorExit
        assert factory is not None
        return factory()

    if not fault.is_async:
        return act()

    async def later() -> Any:
        await asyncio.sleep(0)
        return act()

    return later()


_PLUGIN_HOOKS = ("before_tool_call", "transform_context", "after_tool_result", "on_event")


class HostilePlugin:
    """A plugin whose gates, transforms, result filters and observers turn hostile."""

    def __init__(self, name: str, faults: tuple[rs.HostileFault, ...], world: Any) -> None:
        self.name = name
        self._faults = {fault.hook: fault for fault in faults}
        self._calls: Counter[str] = Counter()
        self._world = world
        # only the hooks it turns hostile on are implemented: a hook it would answer
        # with None changes nothing, and its plain def would be handed to a worker thread
        # under the scenario's 10 ms deadline, where a loaded machine can miss it and add
        # a hook_error the scenario did not ask for
        for hook in _PLUGIN_HOOKS:
            if hook not in self._faults:
                setattr(self, hook, None)

    def _act(self, hook: str, call_id: str | None = None) -> Any:
        fault = self._faults.get(hook)
        index = self._calls[hook]
        self._calls[hook] += 1
        if fault is None or (fault.at is not None and fault.at != index):
            return None
        if self._world.switch.released:
            return None
        return _perform(self._world, hook, self.name, fault, call_id)

    @hookimpl
    def before_tool_call(self, call: Any, args: Any, tool: Tool, agent: Any, signal: Any) -> Any:
        return self._act("before_tool_call", call.id)

    @hookimpl
    def transform_context(self, messages: tuple[Any, ...], agent: Any, signal: Any) -> Any:
        return self._act("transform_context")

    @hookimpl
    def after_tool_result(self, call: Any, result: ToolResult, agent: Any, signal: Any) -> Any:
        return self._act("after_tool_result", call.id)

    @hookimpl
    def on_event(self, event: Any, agent: Any, signal: Any) -> Any:
        return self._act("on_event")


class HostileSubscriber:
    """A subscriber (``agent.subscribe``) that turns hostile on its ``at``-th event."""

    def __init__(self, index: int, fault: rs.HostileFault, world: Any) -> None:
        self.__qualname__ = f"hostile-subscriber{index}"  # its name in hook_error events
        self._fault = fault
        self._calls = 0
        self._world = world

    def __call__(self, event: Any, signal: Any) -> Any:
        index = self._calls
        self._calls += 1
        fault = self._fault
        if (fault.at is not None and fault.at != index) or self._world.switch.released:
            return None
        return _perform(self._world, "subscriber", self.__qualname__, fault, None)


# -------------------------------------------------------------------------------- tools


class NoArgs(BaseModel):
    pass


class JunkArgs(BaseModel):
    kind: str


def make_hostile_tools(world: Any) -> list[Tool]:
    """The hostile tools (see ``reliability_strategies.hostile_calls``)."""
    switch: Switch = world.switch

    def executed(ctx: ToolContext) -> None:
        state = world.agent.state
        world.executed.append((state.run_id, state.turn, ctx.tool_call_id))

    def hanging(behaviour: str) -> Callable[[NoArgs, ToolContext], Any]:
        async def execute(args: NoArgs, ctx: ToolContext) -> str:
            executed(ctx)
            await switch.keep(hang(switch, behaviour))
            return f"{SECRET} released"

        return execute

    def frozen(args: NoArgs, ctx: ToolContext) -> str:
        world.executed.append(("thread", None, ctx.tool_call_id))
        switch.thread_event.wait(60)
        return f"{SECRET} thawed"

    async def junk(args: JunkArgs, ctx: ToolContext) -> Any:
        executed(ctx)
        kind = args.kind
        if kind.startswith("progress_"):
            ctx.update(VALUES[kind.removeprefix("progress_")]())
            await asyncio.sleep(0)
            return f"{SECRET} progress"
        if kind.startswith("details_"):
            return ToolResult(f"{SECRET} details", details=VALUES[kind.removeprefix("details_")]())
        if kind == "raise_custom":
            raise HostileError("the junk tool")
        if kind == "generator_exit":
            raise GeneratorExit
        if kind == "model_with_lock":
            return LockModel(lock=threading.Lock())
        return VALUES[kind]()

    def sync_junk(args: JunkArgs, ctx: ToolContext) -> Any:
        world.executed.append(("thread", None, ctx.tool_call_id))
        if args.kind == "sync_raise_custom":
            raise HostileError("the sync junk tool")
        return VALUES["lock"]()

    def anything(args: dict[str, Any], ctx: ToolContext) -> str:
        world.executed.append(("thread", None, ctx.tool_call_id))
        return f"{SECRET} anything"

    timed = TOOL_TIMEOUT_S
    return [
        Tool("deaf", "swallows cancellation", NoArgs, hanging("deaf"), timeout_s=timed),
        Tool("deafer", "swallows everything", NoArgs, hanging("deafer"), timeout_s=timed),
        Tool("frozen", "blocks its thread", NoArgs, frozen, timeout_s=timed),
        Tool("forever", "awaits forever", NoArgs, hanging("hang")),
        Tool("deaf_forever", "swallows cancellation", NoArgs, hanging("deaf")),
        Tool("frozen_forever", "blocks its thread", NoArgs, frozen),
        Tool("junk", "returns junk", JunkArgs, junk),
        Tool("sync_junk", "returns junk from a thread", JunkArgs, sync_junk),
        Tool("anything", "any object", {"type": "object"}, anything),
    ]


# ------------------------------------------------------------------------------- checks


def _hook_name(hook: str) -> str:
    return "listener" if hook == "subscriber" else hook


TOOL_HOOKS = ("before_tool_call", "after_tool_result")
"""The hooks that only run inside a turn (a call of theirs always has a ``turn``)."""


def check_hostile(world: Any, number: int, mine: list[Any]) -> None:
    """What each hostile act of run ``number`` must have led to (``world.fail`` if not)."""
    run_id = mine[0].run_id
    end = mine[-1]
    aborted = bool(world.run_aborts) or end.reason == "aborted"
    spec: rs.HostileSpec = world.scenario.hostile
    for fired in world.hostile_fired:
        if fired.run_id != run_id:
            continue
        if fired.turn is None and aborted and fired.hook in TOOL_HOOKS:
            # a plain def started in its worker thread as the abort cut the wait for it:
            # it ran after its turn ended, its call already answered
            continue
        after = world.recorder.events[fired.at_event :]
        named = [
            e
            for e in after
            if e.type == "hook_error"
            and e.hook == _hook_name(fired.hook)
            and e.plugin == fired.plugin
            and e.run_id == run_id
        ]
        timed = fired.behaviour in rs.HANGS and not aborted and spec.hook_timeout_s is not None
        seen = world.recorder.events[fired.at_event - 1] if fired.at_event else None
        if fired.hook in ("on_event", "subscriber") and seen is not None:
            # after agent_end nothing may be emitted: that timeout can only be logged
            timed = timed and seen.type != "agent_end"
        if timed and not any("timed out after" in e.error for e in named):
            world.fail(f"no hook_error saying 'timed out after' for the hang {fired}")
        if fired.hook == "before_tool_call":
            _check_gate(world, mine, fired, named, aborted)
        elif fired.hook == "after_tool_result":
            _check_filter(world, mine, fired)
        elif (
            fired.hook == "transform_context"
            and fired.behaviour not in rs.HANGS
            and not aborted
            and not named
        ):
            world.fail(f"no hook_error for the failed transform {fired}")
    _check_arguments(world, mine, aborted)
    # a run that failed (a raising observer, say) answers the calls still in flight
    # itself ("Tool call not executed: ..."), before their timeout_s can pass
    _check_timeouts(world, mine, aborted or end.reason == "error")


def _ends(mine: list[Any], turn: int | None, call_id: str | None) -> list[Any]:
    return [
        e
        for e in mine
        if e.type == "tool_execution_end" and e.turn == turn and e.tool_call_id == call_id
    ]


def _check_gate(world: Any, mine: list[Any], fired: Fired, named: list[Any], aborted: bool) -> None:
    ends = _ends(mine, fired.turn, fired.call_id)
    if len(ends) != 1 or not ends[0].is_error:
        world.fail(f"a hostile gate did not block its call: {fired} {ends}")
    if (fired.run_id, fired.turn, fired.call_id) in world.executed:
        world.fail(f"a call ran although its gate was hostile: {fired}")
    block = fired.garbage is not None and fired.garbage.startswith("block_")
    if not block and not aborted and not named:
        world.fail(f"no hook_error naming the hostile gate {fired}")


def _check_filter(world: Any, mine: list[Any], fired: Fired) -> None:
    ends = _ends(mine, fired.turn, fired.call_id)
    replaced = fired.garbage is not None and fired.garbage.startswith("result_")
    if len(ends) != 1 or SECRET in ends[0].result.text:
        world.fail(f"a hostile result filter did not withhold the result: {fired} {ends}")
    if not replaced and not ends[0].is_error:
        world.fail(f"a hostile result filter's call did not end in error: {fired} {ends}")
    for event in mine:
        message = getattr(event, "message", None)
        if (
            event.type == "message_end"
            and getattr(message, "role", None) == "tool_result"
            and event.turn == fired.turn
            and message.tool_call_id == fired.call_id
            and SECRET in message.text
        ):
            world.fail(f"a withheld result reached the transcript: {fired}")


def _check_arguments(world: Any, mine: list[Any], aborted: bool) -> None:
    """Deep and huge arguments: refused with the limit named, never executed."""
    executed = {call_id for *_, call_id in world.executed}
    for event in mine:
        if event.type != "tool_execution_end":
            continue
        call_id, text = event.tool_call_id, event.result.text
        limits: tuple[str, ...] = ()
        if call_id.startswith("deep"):
            depth = int(call_id[4:].split("-", 1)[0])
            bare = "-bare-" in call_id
            if depth > 64 or bare:
                if not event.is_error or call_id in executed:
                    world.fail(f"arguments nested {depth} deep were not refused: {call_id}")
                if depth > 64 and not bare:  # (deep ones may be long too)
                    limits = ("max_argument_depth", "max_argument_bytes")
        elif call_id.startswith("huge-"):
            over = call_id.startswith(("huge-over-", "huge-far_over-"))
            if over:
                if not event.is_error or call_id in executed:
                    world.fail(f"arguments past the size limit were not refused: {call_id}")
                limits = ("max_argument_bytes",)
            elif "max_argument_bytes" in text:
                world.fail(f"arguments within the size limit were refused: {call_id}: {text}")
        named = any(limit in text for limit in limits)
        if limits and not aborted and event.tool_name != "nope" and not named:
            world.fail(f"the refusal of {call_id} does not name {limits[0]}: {text!r}")


def _check_timeouts(world: Any, mine: list[Any], interrupted: bool) -> None:
    """A timed hostile tool that ran, in a run neither aborted nor failed, and unfiltered,
    timed out."""
    if interrupted or world.filters_replace:
        return
    # a call id may come back in a later turn (blocked there, say): a call is matched by
    # its run and turn too, except a plain function's, which records none ("thread")
    executed = set(world.executed)
    for event in mine:
        if event.type != "tool_execution_end" or event.tool_name not in rs.TIMED_HOSTILE_TOOLS:
            continue
        call = event.tool_call_id
        ran = (event.run_id, event.turn, call) in executed or ("thread", None, call) in executed
        if ran and "timed out after" not in event.result.text:
            world.fail(f"a hostile tool past its timeout_s did not time out: {event.result.text!r}")
