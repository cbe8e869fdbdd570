"""Hypothesis strategies for whole agent runs: scripts, faults, listeners, settings.

A :class:`Scenario` is plain data (its ``repr`` is what hypothesis prints for a failing
example); :mod:`harness` turns it into an agent, runs it and checks the invariants.

- Scripts are FauxProvider steps: replies of text, thinking and tool calls (known and
  unknown tools, valid, invalid and malformed JSON arguments, scripted and duplicate
  call ids, ``stop_reason`` forced to ``length``, ``stop``, ``tool_use``, even ``error``
  or ``aborted``), provider failures before and after partial output (retryable or not,
  context overflow), arbitrary exceptions, a stream cut without ``StreamDone``, and a step
  function that raises.
- :class:`HookFault`: one plugin hook misbehaving (raise, ``StopRun``, a wrong return
  type, an output that breaks the transcript invariants, ...) on every call or on its
  k-th call, synchronously or from an awaitable.
- :class:`ListenerSpec`: a subscriber acting on the k-th event of the first run (raise,
  abort from inside the run, abort from another task, steer, follow up, a late
  ``ctx.update``, a busy ``prompt()``/``reset()``, a slow await).
- :class:`HostileSpec`: hostile plugin code and tools (see :mod:`hostile`): gates,
  context transforms, result filters, observers and subscribers that hang (with or
  without honouring cancellation), raise ``BaseException`` subclasses or return garbage;
  tools that swallow cancellation, block a thread, return unserialisable values; calls
  with arguments nested hundreds deep or past the size limit; aborts at random times.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from mainspring.testing import faux

__all__ = [
    "HOOK_MODES",
    "HOSTILE_BEHAVIOURS",
    "HOSTILE_HOOKS",
    "JUNK_KINDS",
    "KNOWN_TOOLS",
    "LISTENER_ACTIONS",
    "HookFault",
    "HostileFault",
    "HostileSpec",
    "ListenerSpec",
    "PluginSpec",
    "RaisingStep",
    "Scenario",
    "examples",
    "hostile_scenarios",
    "scenarios",
    "steps",
]


def examples(weight: float) -> settings:
    """The loaded profile with ``max_examples`` scaled by ``weight``."""
    base = settings.default
    return settings(base, max_examples=max(10, int(base.max_examples * weight)))


# ----------------------------------------------------------------------------- scripts

KNOWN_TOOLS = (
    "echo",  # returns its text with a marker (checked for leaks through fail-closed filters)
    "slow",  # cooperative asyncio.sleep
    "fail",  # raises RuntimeError
    "cancelself",  # raises CancelledError on its own
    "stubborn",  # swallows cancellation and keeps sleeping for Scenario.stubborn_s
    "blocking",  # a sync tool: time.sleep in a worker thread
    "progress",  # ctx.update() n times
    "serial",  # sequential=True
    "timeout",  # timeout_s=0.005, sleeps longer
    "schema",  # a JSON-Schema (dict) tool
    "big",  # a result longer than max_result_chars
    "locker",  # holds ctx.file_lock on one shared path while it sleeps
)
UNKNOWN_TOOLS = ("nope", "")

_small_text = st.text(alphabet="abc xyz", max_size=10)
_ms = st.integers(0, 12)
_n = st.integers(0, 4)
_VALID_ARGS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "echo": st.fixed_dictionaries({"text": _small_text}),
    "fail": st.fixed_dictionaries({"text": _small_text}),
    "slow": st.fixed_dictionaries({"ms": _ms}),
    "stubborn": st.fixed_dictionaries({"ms": _ms}),
    "blocking": st.fixed_dictionaries({"ms": st.integers(0, 5)}),
    "serial": st.fixed_dictionaries({"ms": _ms}),
    "timeout": st.fixed_dictionaries({"ms": st.just(200)}),
    "progress": st.fixed_dictionaries({"n": _n}),
    "schema": st.fixed_dictionaries({"n": st.integers(-5, 5)}),
    "big": st.fixed_dictionaries({"n": _n}),
    "locker": st.fixed_dictionaries({"ms": st.integers(0, 5)}),
}
_INVALID_ARGS = st.sampled_from(
    [{}, {"text": 5}, {"ms": "soon"}, {"ms": -1}, {"ms": 10**9}, {"n": "x"}, {"n": [1]}]
)
_MALFORMED_ARGS = st.sampled_from(
    ['{"a": ', "{", "[1, 2]", '"text"', "null", "", "  ", '{"text": "a"}}', "nul", '{"ms": 1,}']
)


@st.composite
def tool_call_blocks(draw: st.DrawFn) -> faux.ToolCallBlock:
    name = draw(st.sampled_from(KNOWN_TOOLS + UNKNOWN_TOOLS))
    kind = draw(st.sampled_from(["valid", "valid", "valid", "invalid", "malformed"]))
    args: dict[str, Any] | str
    if kind == "valid":
        args = draw(_VALID_ARGS.get(name, st.just({})))
    elif kind == "invalid":
        args = draw(_INVALID_ARGS)
    else:
        args = draw(_MALFORMED_ARGS)
    call_id = draw(st.sampled_from([None, None, None, "dup", "dup", "x1", ""]))
    return faux.tool_call(name, args, id=call_id)


_text_blocks = st.builds(faux.text, st.text(alphabet="hello wrd", max_size=20))
_thinking_blocks = st.builds(
    faux.thinking,
    st.text(alphabet="hmm ", max_size=12),
    st.sampled_from([None, None, "sig"]),
)
blocks = st.one_of(tool_call_blocks(), tool_call_blocks(), _text_blocks, _thinking_blocks)
_block_lists = st.lists(blocks, max_size=4)
_partial_blocks = st.lists(blocks, max_size=3)

_stop_reasons = st.sampled_from(
    [None, None, None, None, None, None, "length", "stop", "tool_use", "error", "aborted"]
)


@dataclass(frozen=True)
class RaisingStep:
    """A step function that raises instead of returning a step (a provider bug)."""

    def __call__(self, request: Any) -> Any:
        raise RuntimeError("injected: the step function raised")


_replies = st.builds(
    lambda bs, stop: faux.reply(*bs, stop_reason=stop), _block_lists, _stop_reasons
)
_errors = st.builds(
    lambda retryable, overflow, after: faux.error(
        "injected provider error",
        retryable=retryable,
        status_code=529 if retryable else 400,
        context_overflow=overflow,
        after=after,
    ),
    st.booleans(),
    st.sampled_from([False, False, False, True]),
    _partial_blocks,
)
_raises = st.builds(
    lambda exc, after: faux.raises(exc, after=after),
    st.sampled_from([RuntimeError, ValueError, TimeoutError, asyncio.CancelledError]),
    _partial_blocks,
)
_cuts = st.builds(lambda bs: faux.cut(*bs), _partial_blocks)

step = st.one_of(
    _replies,
    _replies,
    _replies,
    _errors,
    _raises,
    _cuts,
    st.just(RaisingStep()),
)
steps = st.lists(step, max_size=6)


# ------------------------------------------------------------------------------ plugins

HOOK_MODES: dict[str, tuple[str, ...]] = {
    "transform_context": ("identity", "custom", "raise", "stop", "break", "wrong_type"),
    "convert_to_llm": ("identity", "custom", "raise", "stop", "break", "wrong_type"),
    "before_tool_call": ("block", "raise", "stop", "wrong_type"),
    "after_tool_result": ("replace", "raise", "stop", "wrong_type"),
    "should_stop_after_turn": ("true", "raise", "stop"),
    "on_event": ("raise", "stop"),
    "count_tokens": ("huge", "raise", "stop", "wrong_type"),
    "compact": ("keep", "raise", "stop", "wrong_type", "broken", "slow"),
}
SYNC_ONLY_HOOKS = frozenset({"count_tokens"})


@dataclass(frozen=True)
class HookFault:
    """``hook`` behaves as ``mode`` on its ``at``-th call (0-based; ``None``: every call).

    ``is_async``: the implementation returns an awaitable that misbehaves after a yield.
    """

    hook: str
    mode: str
    at: int | None = None
    is_async: bool = False


@dataclass(frozen=True)
class PluginSpec:
    """An in-process plugin named ``name`` implementing every hook; ``faults`` misbehave."""

    name: str
    faults: tuple[HookFault, ...] = ()


@st.composite
def hook_faults(draw: st.DrawFn) -> HookFault:
    hook = draw(st.sampled_from(sorted(HOOK_MODES)))
    mode = draw(st.sampled_from(HOOK_MODES[hook]))
    top = 30 if hook == "on_event" else 4
    at = draw(st.one_of(st.integers(0, top), st.integers(0, top), st.none()))
    is_async = hook not in SYNC_ONLY_HOOKS and (mode == "slow" or draw(st.booleans()))
    return HookFault(hook, mode, at, is_async)


@st.composite
def plugin_specs(draw: st.DrawFn, max_plugins: int = 2) -> tuple[PluginSpec, ...]:
    count = draw(st.integers(0, max_plugins))
    return tuple(
        PluginSpec(
            f"fault{index}",
            tuple(draw(st.lists(hook_faults(), max_size=3, unique_by=lambda f: f.hook))),
        )
        for index in range(count)
    )


# ---------------------------------------------------------------------------- listeners

LISTENER_ACTIONS = (
    "raise",
    "abort",
    "abort_external",
    "steer",
    "follow_up",
    "late_update",
    "busy",
    "slow",
)


@dataclass(frozen=True)
class ListenerSpec:
    """A subscriber doing ``action`` when it sees event number ``at`` of the first run."""

    at: int
    action: str
    is_async: bool = False


listener_specs = st.builds(
    ListenerSpec,
    st.one_of(st.integers(0, 12), st.integers(0, 45)),
    st.sampled_from(LISTENER_ACTIONS),
    st.booleans(),
)


# ---------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    """One generated run (and an optional second run on the same agent)."""

    steps: tuple[Any, ...]
    plugins: tuple[PluginSpec, ...] = ()
    listeners: tuple[ListenerSpec, ...] = ()
    steer_before: int = 0
    follow_up_before: int = 0
    max_attempts: int = 1
    chunk_size: int = 4
    delay_s: float = 0.0
    stubborn_s: float = 0.005
    abort_grace_s: float = 0.25
    external_yields: int = 0
    steering_mode: str = "one-at-a-time"
    follow_up_mode: str = "one-at-a-time"
    small_window: bool = False
    second_run: bool = True
    second_run_kind: str = "prompt"  # or "resume"
    cancel_caller_at: int | None = None  # cancel the task awaiting prompt() at this event
    hostile: HostileSpec | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    with_plugins: bool = True,
    with_listeners: bool = True,
    max_plugins: int = 2,
) -> Scenario:
    return Scenario(
        steps=tuple(draw(steps)),
        plugins=draw(plugin_specs(max_plugins)) if with_plugins else (),
        listeners=tuple(draw(st.lists(listener_specs, max_size=3))) if with_listeners else (),
        steer_before=draw(st.integers(0, 2)),
        follow_up_before=draw(st.integers(0, 2)),
        max_attempts=draw(st.integers(0, 2)),
        chunk_size=draw(st.sampled_from([1, 4, 64])),
        delay_s=draw(st.sampled_from([0.0, 0.0, 0.0005])),
        stubborn_s=draw(st.sampled_from([0.0, 0.002, 0.01])),
        external_yields=draw(st.integers(0, 3)),
        steering_mode=draw(st.sampled_from(["one-at-a-time", "all"])),
        follow_up_mode=draw(st.sampled_from(["one-at-a-time", "all"])),
        small_window=draw(st.booleans()),
        second_run=draw(st.booleans()),
        second_run_kind=draw(st.sampled_from(["prompt", "resume"])),
    )


# ----------------------------------------------------------------- hostile plugins, tools

HOSTILE_HOOKS = (
    "before_tool_call",
    "transform_context",
    "after_tool_result",
    "on_event",
    "subscriber",  # agent.subscribe(...)
)
HOSTILE_BEHAVIOURS = (
    "hang",  # awaits forever, honours cancellation
    "deaf",  # awaits forever, catches CancelledError and awaits again
    "deafer",  # ... and ignores GeneratorExit when closed
    "bad_yield",  # a raw awaitable yielding garbage to the event loop, swallowing all
    "raise_custom",  # raises a BaseException subclass of its own
    "generator_exit",  # raises GeneratorExit
    "garbage",  # returns a value no contract allows (see hostile.GARBAGE)
)
HANGS = frozenset({"hang", "deaf", "deafer", "bad_yield"})
"""Behaviours that never finish on their own: only a deadline or an abort ends them."""

JUNK_KINDS = (
    "object",
    "lock",
    "bytes",
    "circular",
    "generator",
    "set",
    "weird_keys",
    "huge_int",
    "model_with_lock",
    "details_object",
    "details_lock",
    "details_bytes",
    "details_circular",
    "details_deep",
    "details_generator",
    "details_weird_keys",
    "details_huge_int",
    "progress_object",
    "progress_lock",
    "progress_circular",
    "progress_deep",
    "progress_huge_int",
    "raise_custom",
    "generator_exit",
    "sync_raise_custom",
)
"""What the ``junk`` tool returns (or raises, or reports as progress)."""

ARGUMENT_DEPTHS = (2, 63, 64, 65, 100, 500, 600, 1500, 5000)
"""Nesting depths of scripted tool-call arguments (the limit is 64: deeper is refused)."""

TIMED_HOSTILE_TOOLS = ("deaf", "deafer", "frozen")
"""Hostile tools with a small ``timeout_s``: their deadline must hold."""
UNTIMED_HOSTILE_TOOLS = ("forever", "deaf_forever", "frozen_forever")
"""Hostile tools without a deadline: only an abort ends them (scripted only with one)."""


@dataclass(frozen=True)
class HostileFault:
    """``hook`` behaves as ``behaviour`` on its ``at``-th call (0-based; ``None``: every
    call, over the agent's life). ``is_async``: it misbehaves in an awaitable (hangs are
    always awaitable). ``garbage`` picks the garbage value (modulo the hook's table).
    """

    hook: str
    behaviour: str
    at: int | None = None
    is_async: bool = True
    garbage: int = 0


@dataclass(frozen=True)
class HostileSpec:
    """The hostile side of a scenario and the settings that bound it.

    ``plugins``: one hostile plugin per entry (``hostile0``, ``hostile1``...), each with its
    faults; ``subscribers``: one hostile subscriber per fault. ``abort_after_s``: every run
    is aborted this long after it starts (loop clock), if it is still going. Runs settle
    within ``hook_grace_s``/``Scenario.abort_grace_s`` (plus scheduling) of any abort.
    """

    plugins: tuple[tuple[HostileFault, ...], ...] = ()
    subscribers: tuple[HostileFault, ...] = ()
    hook_timeout_s: float | None = 0.02
    hook_grace_s: float = 0.01
    abort_after_s: float | None = None
    max_argument_bytes: int = 4096


@st.composite
def hostile_faults(draw: st.DrawFn, hook: str) -> HostileFault:
    behaviour = draw(st.sampled_from(HOSTILE_BEHAVIOURS))
    top = 40 if hook in ("on_event", "subscriber") else 3
    at = draw(st.one_of(st.integers(0, top), st.integers(0, top), st.none()))
    is_async = behaviour in HANGS or draw(st.booleans())
    return HostileFault(hook, behaviour, at, is_async, draw(st.integers(0, 99)))


@st.composite
def _hostile_plugin(draw: st.DrawFn) -> tuple[HostileFault, ...]:
    hooks = draw(
        st.lists(
            st.sampled_from(HOSTILE_HOOKS[:-1]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    return tuple(draw(hostile_faults(hook)) for hook in hooks)


def _nested(depth: int, kind: str) -> str:
    """Argument JSON nesting objects/arrays ``depth`` levels deep, the top level included."""
    if kind == "arrays":
        return '{"x": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    if kind == "objects":
        return '{"a": ' * depth + "1" + "}" * depth
    return "[" * depth + "]" * depth  # not even an object


def _sized(size: int) -> str:
    """Argument JSON of exactly ``size`` characters (at least 9)."""
    return '{"s": "' + "x" * (size - 9) + '"}'


def _ids(draw: st.DrawFn, name: str) -> str:
    return f"{name}-{draw(st.integers(0, 10**6))}"


@st.composite
def hostile_calls(draw: st.DrawFn, untimed: bool, max_bytes: int) -> faux.ToolCallBlock:
    kind = draw(st.sampled_from(["tool", "tool", "junk", "junk", "junk", "deep", "huge"]))
    if kind == "tool":
        names = TIMED_HOSTILE_TOOLS + (UNTIMED_HOSTILE_TOOLS if untimed else ())
        name = draw(st.sampled_from(names))
        return faux.tool_call(name, {}, id=_ids(draw, name))
    if kind == "junk":
        junk = draw(st.sampled_from(JUNK_KINDS))
        name = "sync_junk" if junk.startswith("sync_") else "junk"
        return faux.tool_call(name, {"kind": junk}, id=_ids(draw, name))
    target = draw(st.sampled_from(["anything", "anything", "echo", "nope"]))
    if kind == "deep":
        depth = draw(st.sampled_from(ARGUMENT_DEPTHS))
        shape = draw(st.sampled_from(["arrays", "objects", "bare"]))
        return faux.tool_call(target, _nested(depth, shape), id=f"deep{depth}-{_ids(draw, shape)}")
    # sizes relative to HostileSpec.max_argument_bytes (the JSON text, in characters)
    label, size = draw(
        st.sampled_from(
            [
                ("under", max_bytes // 2),
                ("at", max_bytes),
                ("over", max_bytes + 1),
                ("far_over", max_bytes * 4),
            ]
        )
    )
    return faux.tool_call(target, _sized(size), id=f"huge-{label}-{_ids(draw, target)}")


@st.composite
def hostile_scenarios(draw: st.DrawFn, *, tools_only: bool = False) -> Scenario:
    """A generated scenario with hostile plugins, subscribers and tools (and the usual
    faults at lower rates). ``tools_only``: no hostile plugin code, only hostile tools and
    arguments.
    """
    base = draw(scenarios(max_plugins=1))
    abort_after_s = draw(st.sampled_from([None, None, None, 0.0, 0.001, 0.004, 0.01, 0.03, 0.08]))
    hook_timeout_s = draw(st.sampled_from([0.005, 0.02, 0.05, None]))
    if hook_timeout_s is None and abort_after_s is None:
        abort_after_s = draw(st.sampled_from([0.01, 0.05]))
    untimed = abort_after_s is not None
    max_bytes = draw(st.sampled_from([512, 4096]))
    plugins: tuple[tuple[HostileFault, ...], ...] = ()
    subscribers: tuple[HostileFault, ...] = ()
    if not tools_only:
        plugins = tuple(draw(st.lists(_hostile_plugin(), max_size=2)))
        subscribers = tuple(draw(st.lists(hostile_faults("subscriber"), max_size=2)))
    replies = draw(
        st.lists(
            st.builds(
                lambda calls, others: faux.reply(*calls, *others),
                st.lists(hostile_calls(untimed, max_bytes), min_size=1, max_size=3),
                st.lists(blocks, max_size=1),
            ),
            min_size=1,
            max_size=3,
        )
    )
    # hostile replies first, then (part of) the generated script
    script = (*replies, *base.steps[: draw(st.integers(0, 2))])
    return Scenario(
        steps=script,
        plugins=base.plugins,
        listeners=base.listeners[:1],
        steer_before=base.steer_before,
        follow_up_before=base.follow_up_before,
        max_attempts=base.max_attempts,
        chunk_size=draw(st.sampled_from([256, 2048])),
        stubborn_s=base.stubborn_s,
        abort_grace_s=draw(st.sampled_from([0.0, 0.005, 0.02])),
        external_yields=base.external_yields,
        second_run=base.second_run,
        second_run_kind=base.second_run_kind,
        cancel_caller_at=draw(st.one_of(st.none(), st.none(), st.none(), st.integers(0, 40))),
        hostile=HostileSpec(
            plugins=plugins,
            subscribers=subscribers,
            hook_timeout_s=hook_timeout_s,
            hook_grace_s=draw(st.sampled_from([0.0, 0.005, 0.02])),
            abort_after_s=abort_after_s,
            max_argument_bytes=max_bytes,
        ),
    )
