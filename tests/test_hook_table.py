"""The hook table: each hook's rules as data, and the kernel applying them.

The table is the one statement of how a hook's results combine, what a failure and a
stall mean, where a plugin's plain ``def`` runs and which capability it needs; the hook
specs, the capability map and the loader all follow it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

from mainspring import Agent, Settings, hookimpl, tool
from mainspring.contract import hookspecs
from mainspring.contract.markers import PROJECT, observes_when
from mainspring.contract.table import HOOKS, Combine, Failure
from mainspring.events import HookErrorEvent
from mainspring.loading.capabilities import CAPABILITY_OF
from mainspring.settings import HookSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

HANG_GUARD_S = 10.0


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def make_agent(plugins: list[Any], steps: list[Any], timeout_s: float | None = 60.0) -> Agent:
    return Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        autoload=False,
        plugins=plugins,
        tools=[echo],
        settings=Settings(hooks=HookSettings(timeout_s=timeout_s, abort_grace_s=0.1)),
    )


def test_every_hook_spec_has_exactly_one_row_and_the_derived_sets_follow_it() -> None:
    specs = {
        name
        for name, value in vars(hookspecs).items()
        if callable(value) and hasattr(value, f"{PROJECT}_spec")
    }
    assert specs == set(HOOKS)
    assert {name for name, rules in HOOKS.items() if rules.sync} == hookspecs.SYNC_HOOKS
    assert set(HOOKS) - hookspecs.SYNC_HOOKS == hookspecs.ASYNC_HOOKS
    assert dict(CAPABILITY_OF) == {name: rules.capability for name, rules in HOOKS.items()}
    for name in hookspecs.ASYNC_HOOKS:
        assert inspect.iscoroutinefunction(getattr(hookspecs, name))


def test_the_rules_of_the_core_hooks() -> None:
    assert HOOKS["before_tool_call"].on_failure is Failure.BLOCK
    assert HOOKS["transform_context"].on_failure is Failure.SKIP
    assert HOOKS["after_tool_result"].on_failure is Failure.WITHHOLD
    assert HOOKS["should_stop_after_turn"].on_failure is Failure.FAIL_RUN
    assert HOOKS["on_event"].on_stall is Failure.SKIP
    assert HOOKS["compact"].combine is Combine.FIRST_RESULT
    # per-event and per-update hooks never hand a plain def to a thread
    assert not HOOKS["on_event"].threaded and not HOOKS["filter_tool_update"].threaded


def test_the_hook_reference_shows_the_table() -> None:
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "hooks.md").read_text(encoding="utf-8")
    for name, rules in HOOKS.items():
        assert f"| `{name}` |" in text
        assert rules.on_failure.value in text


class Gate:
    def __init__(self, name: str, seen: list[tuple[str, int]]) -> None:
        self.PLUGIN_NAME = name
        self.seen = seen

    @hookimpl
    def before_tool_call(self, call: Any) -> None:
        self.seen.append((self.PLUGIN_NAME, threading.get_ident()))


async def test_the_plain_def_gates_of_one_call_run_in_one_thread_hand_over_in_order() -> None:
    seen: list[tuple[str, int]] = []
    gates = [Gate(f"gate-{n}", seen) for n in range(4)]
    agent = make_agent(gates, [faux.tool_call("echo", {"text": "a"}), faux.text("ok")])

    outcome = await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert outcome.reason == "stop"
    # pluggy's order: the most recently registered first
    assert [name for name, _ in seen] == ["gate-3", "gate-2", "gate-1", "gate-0"]
    threads = {ident for _, ident in seen}
    assert len(threads) == 1 and threads != {threading.get_ident()}


async def test_a_block_stops_the_later_gates_of_the_same_hand_over() -> None:
    seen: list[str] = []

    class Recording:
        def __init__(self, name: str, verdict: Any) -> None:
            self.PLUGIN_NAME, self.verdict = name, verdict

        @hookimpl
        def before_tool_call(self, call: Any) -> Any:
            seen.append(self.PLUGIN_NAME)
            return self.verdict

    from mainspring import Block

    plugins = [Recording("last", None), Recording("blocker", Block("no")), Recording("first", None)]
    agent = make_agent(plugins, [faux.tool_call("echo", {"text": "a"}), faux.text("ok")])
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert seen == ["first", "blocker"]
    (decision,) = recorder.of_type("tool_decision")
    assert decision.decision == "block" and decision.plugin == "blocker"
    check_event_grammar(recorder.events)


async def test_a_stall_inside_a_hand_over_blames_the_one_running_and_the_rest_still_run() -> None:
    release = threading.Event()
    order: list[str] = []

    class Transform:
        def __init__(self, name: str, block: bool = False) -> None:
            self.PLUGIN_NAME, self.block = name, block

        @hookimpl
        def transform_context(self, messages: Any) -> None:
            order.append(self.PLUGIN_NAME)
            if self.block:
                release.wait()

    plugins = [Transform("after"), Transform("stuck", block=True), Transform("before")]
    agent = make_agent(plugins, [faux.text("answered")], timeout_s=0.2)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    try:
        outcome = await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)
    finally:
        release.set()

    assert outcome.reason == "stop" and outcome.text == "answered"
    (error,) = recorder.of_type(HookErrorEvent)
    assert error.plugin == "stuck" and "timed out after 0.2 s" in error.error
    assert order == ["before", "stuck", "after"]


async def test_an_observer_whose_predicate_is_false_is_not_called_for_the_run() -> None:
    calls: list[str] = []
    switch = {"on": False}

    class Observer:
        PLUGIN_NAME = "switchable"

        @hookimpl
        @observes_when(lambda agent: switch["on"])
        def on_event(self, event: Any) -> None:
            calls.append(event.type)

    agent = make_agent([Observer()], [faux.text("one"), faux.text("two")])
    await agent.prompt("first")
    assert calls == []

    switch["on"] = True
    await agent.prompt("second")
    assert calls[0] == "agent_start" and calls[-1] == "agent_end"


async def test_an_observer_predicate_that_raises_counts_as_true() -> None:
    calls: list[str] = []

    def broken(agent: Any) -> bool:
        raise RuntimeError("predicate failed")

    class Observer:
        PLUGIN_NAME = "broken-predicate"

        @hookimpl
        @observes_when(broken)
        def on_event(self, event: Any) -> None:
            calls.append(event.type)

    agent = make_agent([Observer()], [faux.text("one")])
    await agent.prompt("go")
    assert "agent_end" in calls
