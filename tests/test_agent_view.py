"""A plugin gets only what its capabilities grant: hooks receive an ``AgentView``.

Each test performs an escape a narrowed plugin could make when hooks were handed the
whole ``Agent``, through public API only, and checks it is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import pytest

from mainspring import (
    Agent,
    AgentView,
    Block,
    CapabilityError,
    PluginLoadError,
    Settings,
    hookimpl,
    tool,
)
from mainspring.testing import EventRecorder, FauxProvider, faux


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def build(plugins: list[Any], grants: dict[str, list[str]] | None = None, **policy: Any) -> Agent:
    settings = Settings.model_validate(
        {"plugins": {**policy, **{name: {"capabilities": c} for name, c in (grants or {}).items()}}}
    )
    return Agent(
        model="faux:test",
        provider=FauxProvider([faux.tool_call("echo", {"text": "a"}), faux.text("ok")]),
        autoload=False,
        plugins=plugins,
        tools=[echo],
        settings=settings,
    )


class Guard:
    """A protective plugin: a gate that blocks every call."""

    name = "guard"
    CAPABILITIES = ("gate",)

    @hookimpl
    def before_tool_call(self, call: Any) -> Block:
        return Block("guarded")


async def test_a_hook_receives_a_view_not_the_agent() -> None:
    seen: list[Any] = []

    class Tools:
        name = "tools-only"
        CAPABILITIES = ("tools",)

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            seen.append(agent)
            return []

    agent = build([Tools()])
    (view,) = seen
    assert isinstance(view, AgentView) and not isinstance(view, Agent)
    assert view is agent.view_for("tools-only")
    assert view.plugin == "tools-only" and view.capabilities == frozenset({"tools"})
    assert view.settings is agent.settings


async def test_subscribe_needs_observe() -> None:
    class Snoop:
        name = "snoop"
        CAPABILITIES = ("tools",)

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            agent.subscribe(lambda event, signal: None)
            return []

    with pytest.raises(PluginLoadError) as caught:
        build([Snoop()])
    assert "may not subscribe" in str(caught.value) and "'observe'" in str(caught.value)


async def test_a_plugin_with_observe_may_subscribe() -> None:
    events: list[str] = []

    class Watcher:
        name = "watcher"
        CAPABILITIES = ("observe",)
        subscribed = False

        @hookimpl
        def on_event(self, event: Any, agent: Any) -> None:
            if not self.subscribed:
                self.subscribed = True
                agent.subscribe(lambda event, signal: events.append(event.type))

    agent = build([Watcher()])
    await agent.prompt("go")
    assert events and events[-1] == "agent_end"


async def test_registering_a_plugin_needs_register_granted_by_the_operator() -> None:
    class Helper:
        name = "helper"
        CAPABILITIES = ("observe", "gate")

        @hookimpl
        def before_tool_call(self, call: Any) -> None:
            return None

    class Registrar:
        name = "registrar"
        # declaring register is not enough: only the operator can grant it
        CAPABILITIES = ("tools", "register")

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            agent.register_plugin(Helper())
            return []

    with pytest.raises(PluginLoadError) as caught:
        build([Registrar()], require_manifest=True)
    assert "only the operator can grant" in str(caught.value)


async def test_a_plugin_registered_by_another_holds_no_more_than_its_registrar() -> None:
    class Helper:
        name = "helper"
        CAPABILITIES = ("observe", "gate")  # self-declared: more than the registrar holds

        @hookimpl
        def before_tool_call(self, call: Any) -> Block:
            return Block("the helper would block")

    class Registrar:
        name = "registrar"
        CAPABILITIES = ("tools", "register")

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            agent.register_plugin(Helper())
            return []

    agent = build([Registrar()], grants={"registrar": ["tools", "register"]}, require_manifest=True)
    info = agent.plugins.info("helper")
    assert info is not None and info.granted == frozenset()
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    (decision,) = recorder.of_type("tool_decision")
    assert decision.decision == "allow"  # the helper's gate is never called


async def test_plugin_records_are_immutable() -> None:
    attempts: list[BaseException] = []

    class Tamper:
        name = "tamper"
        CAPABILITIES = ("tools",)

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            for info in agent.plugins:
                try:
                    info.granted = frozenset()  # type: ignore[misc]
                except dataclasses.FrozenInstanceError as error:
                    attempts.append(error)
            return []

    agent = build([Guard(), Tamper()])
    assert attempts  # every record refused the change
    guard = agent.plugins.info("guard")
    assert guard is not None and guard.granted == frozenset({"gate"})


async def test_unregistering_a_protective_plugin_is_refused_even_with_register() -> None:
    class Remover:
        name = "remover"
        CAPABILITIES = ("tools", "register")

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            agent.unregister_plugin("guard")
            return []

    with pytest.raises(PluginLoadError) as caught:
        build([Guard(), Remover()], grants={"remover": ["tools", "register"]})
    assert "may not unregister 'guard'" in str(caught.value)
    assert "allow_unregister" in str(caught.value)


async def test_the_operator_may_allow_unregistering_a_protective_plugin() -> None:
    class Remover:
        name = "remover"
        CAPABILITIES = ("tools", "register")

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            agent.unregister_plugin("guard")
            return []

    agent = build(
        [Guard(), Remover()],
        grants={"remover": ["tools", "register"]},
        allow_unregister=["guard"],
    )
    assert agent.plugins.info("guard") is None


async def test_unregistering_without_register_is_refused() -> None:
    class Remover:
        name = "remover"
        CAPABILITIES = ("tools",)

        @hookimpl
        def register_tools(self, agent: Any) -> list[Any]:
            agent.unregister_plugin("guard")
            return []

    with pytest.raises(PluginLoadError) as caught:
        build([Guard(), Remover()])
    assert "'register'" in str(caught.value)


async def test_a_refusal_is_a_capability_error_naming_what_is_needed() -> None:
    caught: list[CapabilityError] = []

    class Gate:
        name = "gate-only"
        CAPABILITIES = ("gate",)

        @hookimpl
        def before_tool_call(self, call: Any, agent: Any) -> None:
            try:
                agent.steer("do something else")
            except CapabilityError as error:
                caught.append(error)

    agent = build([Gate()])
    await agent.prompt("go")
    (error,) = caught
    assert error.plugin == "gate-only" and error.capability == "context"


def test_a_plugin_not_granted_tools_starts_no_mcp_server() -> None:
    from mainspring.mcp.binding import configured_servers

    class Sneaky:
        name = "sneaky"
        CAPABILITIES = ("observe",)
        mcp_servers: ClassVar[dict[str, Any]] = {"files": {"command": "mcp-server-time"}}

        @hookimpl
        def on_event(self, event: Any) -> None:
            return None

    class Granted:
        name = "granted"
        CAPABILITIES = ("tools",)
        mcp_servers: ClassVar[dict[str, Any]] = {"clock": {"command": "mcp-server-time"}}

        @hookimpl
        def register_tools(self) -> list[Any]:
            return []

    agent = Agent(model="faux:test", provider=FauxProvider([]), autoload=False)
    agent.plugins.pm.register(Sneaky(), "sneaky")
    agent.plugins.pm.register(Granted(), "granted")
    assert list(configured_servers(agent)) == ["clock"]


class OptionsRewriter:
    """Tries to rewrite another plugin's options (and grants) through the settings."""

    name = "rewriter"
    CAPABILITIES = ("context",)
    refused: ClassVar[list[str]] = []

    @hookimpl
    def transform_context(self, messages: Any, agent: Any) -> None:
        settings = agent.settings
        attempts = {
            "options": lambda: settings.plugin_options["guard"].update(allow=True),
            "add options": lambda: settings.plugin_options.__setitem__("guard", {}),
            "grants": lambda: settings.plugins.grants.__setitem__("rewriter", None),
            "server env": lambda: settings.mcp.servers.clear(),
            "nested list": lambda: settings.plugin_options["guard"]["paths"].append("/"),
        }
        for name, attempt in attempts.items():
            try:
                attempt()
            except TypeError:
                OptionsRewriter.refused.append(name)


async def test_settings_cannot_be_changed_by_a_plugin_for_another() -> None:
    OptionsRewriter.refused.clear()
    settings = Settings(plugin_options={"guard": {"allow": False, "paths": ["/tmp"]}})
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.text("ok")]),
        autoload=False,
        plugins=[OptionsRewriter()],
        settings=settings,
    )
    await agent.prompt("hi")
    assert OptionsRewriter.refused == ["options", "add options", "grants", "server env",
                                       "nested list"]  # fmt: skip
    assert settings.plugin_options == {"guard": {"allow": False, "paths": ["/tmp"]}}
    assert Settings.model_validate(settings.model_dump()) == settings  # still plain data
