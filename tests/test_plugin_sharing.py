"""Agents loading the same plugin objects share one read-only plugin manager.

- Two agents built from the same plugins share their registration; neither holds a
  manager of its own until it asks for one (``agent.plugins.pm``).
- A plugin one agent registers, unregisters or blocks, on its manager or through a
  plugin's view, is never seen by another agent; both agents' runs keep the event grammar.
- The shared manager refuses every change.
- What differs per agent stays per agent: granted capabilities (narrowing), views,
  ``disable_plugins``, plugin order.
- A module plugin whose hook implementation was replaced since is registered again, so a
  new agent calls the new implementation.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from mainspring import Agent, Block, Settings, hookimpl, tool
from mainspring.events import ToolDecision
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def build(plugins: list[Any] = (), **kwargs: Any) -> Agent:  # type: ignore[assignment]
    kwargs.setdefault(
        "provider", FauxProvider([faux.tool_call("echo", {"text": "a"}), faux.text("ok")])
    )
    return Agent(model="faux:test", autoload=False, plugins=list(plugins), tools=[echo], **kwargs)


async def run(agent: Agent) -> EventRecorder:
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    return recorder


class Watcher:
    """Counts the events it observes."""

    name = "watcher"

    def __init__(self) -> None:
        self.seen = 0

    @hookimpl
    def on_event(self, event: Any) -> None:
        self.seen += 1


class Guard:
    """Blocks every tool call."""

    name = "guard"
    CAPABILITIES = ("gate",)

    @hookimpl
    def before_tool_call(self, call: Any) -> Block:
        return Block("guarded")


def decisions(recorder: EventRecorder) -> list[str]:
    return [event.decision for event in recorder.of_type(ToolDecision)]


def test_agents_with_the_same_plugins_share_one_manager() -> None:
    watcher = Watcher()
    first, second = build([watcher]), build([watcher])
    assert first.plugins.registration is second.plugins.registration
    assert first.plugins.manager() is second.plugins.manager()
    assert build([Watcher()]).plugins.registration is not first.plugins.registration


async def test_a_plugin_one_agent_registers_is_not_seen_by_another() -> None:
    first, second = build(), build()
    guard = Guard()
    first.plugins.pm.register(guard, name="guard")

    assert first.plugins.info("guard") is not None
    assert second.plugins.info("guard") is None
    assert second.plugins.manager().get_plugin("guard") is None
    assert decisions(await run(first)) == ["block"]
    assert decisions(await run(second)) == ["allow"]


async def test_a_plugin_one_agent_unregisters_or_blocks_stays_in_another() -> None:
    watcher = Watcher()
    first, second, third = build([watcher]), build([watcher]), build([watcher])
    first.plugins.unregister("watcher")
    second.plugins.pm.set_blocked("watcher")

    await run(first)
    await run(second)
    assert watcher.seen == 0
    await run(third)
    assert watcher.seen > 0
    assert third.plugins.info("watcher") is not None
    assert [info.name for info in first.plugins.infos] == [
        info.name for info in third.plugins.infos if info.name != "watcher"
    ]


async def test_a_plugin_registered_through_a_view_stays_in_its_agent() -> None:
    class Registrar:
        name = "registrar"
        CAPABILITIES = ("tools", "register", "gate")

        def __init__(self) -> None:
            self.register = False

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            if self.register:
                agent.register_plugin(Guard())
            return []

    registrar = Registrar()
    settings = Settings.model_validate(
        {"plugins": {"registrar": {"capabilities": ["tools", "register", "gate"]}}}
    )
    plain = build([registrar], settings=settings)
    registrar.register = True
    registering = build([registrar], settings=settings)

    assert registering.plugins.info("guard") is not None
    assert plain.plugins.info("guard") is None
    assert decisions(await run(registering)) == ["block"]
    assert decisions(await run(plain)) == ["allow"]


def test_the_shared_manager_refuses_every_change() -> None:
    agent = build()
    shared = agent.plugins.registration.manager
    with pytest.raises(RuntimeError, match="shared by agents"):
        shared.register(Guard(), name="guard")
    with pytest.raises(RuntimeError, match="shared by agents"):
        shared.unregister(name="event_log")
    with pytest.raises(RuntimeError, match="shared by agents"):
        shared.set_blocked("event_log")
    assert shared.get_plugin("event_log") is not None


async def test_narrowing_stays_per_agent_on_a_shared_manager() -> None:
    guard = Guard()
    narrowed = build(
        [guard], settings=Settings.model_validate({"plugins": {"guard": {"capabilities": []}}})
    )
    full = build([guard])
    assert narrowed.plugins.registration is full.plugins.registration
    assert narrowed.plugins.info("guard").granted == frozenset()  # type: ignore[union-attr]
    assert decisions(await run(narrowed)) == ["allow"]
    assert decisions(await run(full)) == ["block"]


def test_each_plugin_gets_its_own_agents_view() -> None:
    views: list[Any] = []

    class Viewer:
        name = "viewer"

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            views.append(agent)
            return []

    viewer = Viewer()
    first, second = build([viewer]), build([viewer])
    assert first.plugins.registration is second.plugins.registration
    assert views == [first.view_for("viewer"), second.view_for("viewer")]
    assert views[0] is not views[1]


def test_disabled_plugins_and_order_are_the_agents_own() -> None:
    watcher, guard = Watcher(), Guard()
    full = build([watcher, guard])
    without = build([watcher, guard], disable_plugins=["event_log"])
    reordered = build([guard, watcher])

    assert without.plugins.registration is not full.plugins.registration
    assert "event_log" in [info.name for info in full.plugins.infos]
    assert "event_log" not in [info.name for info in without.plugins.infos]
    assert [info.name for info in full.plugins.infos][-2:] == ["watcher", "guard"]
    assert [info.name for info in reordered.plugins.infos][-2:] == ["guard", "watcher"]


async def test_a_replaced_hook_implementation_reaches_the_next_agent() -> None:
    calls: list[str] = []
    module = types.ModuleType("acme_counter")

    @hookimpl
    def on_event(event: Any) -> None:
        calls.append("old")

    @hookimpl
    def replaced(event: Any) -> None:
        calls.append("new")

    module.on_event = on_event  # type: ignore[attr-defined]
    before = build([module])
    module.on_event = replaced  # type: ignore[attr-defined]
    after = build([module])

    assert after.plugins.registration is not before.plugins.registration
    await run(after)
    assert set(calls) == {"new"}
    calls.clear()
    await run(before)
    assert set(calls) == {"old"}
