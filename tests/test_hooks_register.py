"""register_tools and register_providers: collected once per agent, failures stop it.

Hook table (DESIGN §6, §8): once per agent, in the constructor; all results are
collected; synchronous hooks (an ``async def`` implementation is a load error); an
implementation that raises is a ``PluginLoadError`` naming the plugin; two tools with one
name are a ``PluginLoadError`` naming both plugins.
"""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import Agent, Model, PluginLoadError, Settings, Tool, ToolResult, hookimpl, tool
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


def make_tool(name: str, reply: str = "ok") -> Tool:
    async def execute(args: Any, ctx: Any) -> ToolResult:
        return ToolResult(f"{reply}:{args['value']}")

    return Tool(
        name,
        f"The {name} tool.",
        {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
        execute,
    )


def build(plugins: list[Any], **kwargs: Any) -> Agent:
    kwargs.setdefault("provider", FauxProvider([]))
    kwargs.setdefault("model", "faux:test")
    return Agent(plugins=plugins, autoload=False, **kwargs)


def tool_names(agent: Agent) -> list[str]:
    return [t.name for t in agent.state.tools]


# == register_tools =====================================================================


@tool
def weather(city: str) -> str:
    """Tell the weather of a city."""
    return f"sunny in {city}"


class WeatherPlugin:
    name = "weather"

    @hookimpl
    def register_tools(self):
        return [weather]


def test_a_plugins_tools_are_the_agents_tools_with_their_owner() -> None:
    agent = build([WeatherPlugin()])

    assert "weather" in tool_names(agent)
    assert agent.tool_owners["weather"] == "weather"
    info = agent.plugins.info("weather")
    assert info is not None
    assert info.tools == ("weather",)
    assert "register_tools" in info.hooks


async def test_a_registered_tool_is_offered_to_the_model_and_runs() -> None:
    provider = FauxProvider([faux.tool_call("weather", {"city": "Oslo"}), faux.text("done")])
    agent = build([WeatherPlugin()], provider=provider)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("weather?")

    check_event_grammar(recorder.events)
    assert [s.name for s in provider.requests[0].tools] == ["weather"]
    (result,) = recorder.messages("tool_result")
    assert result.text == "sunny in Oslo" and not result.is_error


def test_all_plugins_tools_are_collected_in_load_order() -> None:
    class A:
        name = "a"

        @hookimpl
        def register_tools(self):
            return (make_tool("a1"), make_tool("a2"))  # any sequence

    class B:
        name = "b"

        @hookimpl
        def register_tools(self):
            return [make_tool("b1")]

    class Nothing:
        @hookimpl
        def register_tools(self):
            return None

    agent = build([A(), Nothing(), B()], tools=[make_tool("own")])

    assert tool_names(agent) == ["a1", "a2", "b1", "own"]
    assert agent.tool_owners == {"a1": "a", "a2": "a", "b1": "b", "own": "tools="}


def test_register_tools_gets_the_agent_with_its_settings_ready() -> None:
    seen: dict[str, Any] = {}

    class Configurable:
        name = "configurable"

        @hookimpl
        def register_tools(self, agent):
            seen["agent"] = agent
            options = agent.settings.plugin_options.get("configurable", {})
            return [make_tool(options.get("tool_name", "default_name"))]

    settings = Settings(plugin_options={"configurable": {"tool_name": "renamed"}})
    agent = build([Configurable()], settings=settings)

    # a plugin sees the agent through its own view
    assert seen["agent"] is agent.view_for("configurable")
    assert tool_names(agent) == ["renamed"]


def test_register_tools_is_called_once_per_agent() -> None:
    calls: list[Any] = []

    class Counting:
        @hookimpl
        def register_tools(self, agent):
            calls.append(agent)
            return [make_tool(f"t{len(calls)}")]

    plugin = Counting()
    first, second = build([plugin]), build([plugin])

    assert calls == [first.view_for("Counting"), second.view_for("Counting")]
    assert tool_names(first) == ["t1"] and tool_names(second) == ["t2"]


def test_two_plugins_with_one_tool_name_is_a_load_error_naming_both() -> None:
    class First:
        name = "first-pack"

        @hookimpl
        def register_tools(self):
            return [make_tool("search")]

    class Second:
        name = "second-pack"

        @hookimpl
        def register_tools(self):
            return [make_tool("search")]

    with pytest.raises(PluginLoadError) as caught:
        build([First(), Second()])

    message = str(caught.value)
    assert "search" in message
    assert "first-pack" in message and "second-pack" in message


def test_a_plugin_tool_clashing_with_an_agent_tool_is_a_load_error() -> None:
    with pytest.raises(PluginLoadError) as caught:
        build([WeatherPlugin()], tools=[make_tool("weather")])

    assert "weather" in str(caught.value)


def test_a_raising_register_tools_is_a_load_error_naming_the_plugin() -> None:
    class Broken:
        name = "broken-tools"

        @hookimpl
        def register_tools(self):
            raise ImportError("optional dependency 'lxml' missing")

    with pytest.raises(PluginLoadError) as caught:
        build([Broken()])

    assert caught.value.plugin == "broken-tools"
    assert "broken-tools" in str(caught.value)
    assert "lxml" in str(caught.value)


@pytest.mark.parametrize("wrong", [["not a tool"], [weather, 42], "weather"])
def test_register_tools_returning_non_tools_is_a_load_error(wrong: Any) -> None:
    class Wrong:
        name = "wrong-tools"

        @hookimpl
        def register_tools(self):
            return wrong

    with pytest.raises(PluginLoadError) as caught:
        build([Wrong()])

    assert caught.value.plugin == "wrong-tools"


def test_an_async_register_tools_is_a_load_error_naming_the_plugin() -> None:
    class AsyncTools:
        name = "async-tools"

        @hookimpl
        async def register_tools(self):
            return [make_tool("never")]

    with pytest.raises(PluginLoadError) as caught:
        build([AsyncTools()])

    assert caught.value.plugin == "async-tools"
    assert "async-tools" in str(caught.value)
    assert "register_tools" in str(caught.value)


# == register_providers =================================================================


class EchoProvider:
    """A provider that answers with the last user message."""

    def __init__(self, name: str = "echo", prefix: str = "echo") -> None:
        self.name = name
        self.prefix = prefix
        self.models = {"big": Model(provider=name, id="big", context_window=1_000_000)}

    async def stream(self, request: Any, signal: Any) -> Any:
        delegate = FauxProvider([faux.text(f"{self.prefix}: {request.messages[-1].content}")])
        async for event in delegate.stream(request, signal):
            yield event


def test_a_registered_provider_resolves_model_strings() -> None:
    class Echo:
        name = "echo-plugin"

        @hookimpl
        def register_providers(self):
            return [EchoProvider()]

    agent = Agent(model="echo:big", plugins=[Echo()], autoload=False)

    assert isinstance(agent.providers["echo"], EchoProvider)
    assert agent.state.model.provider == "echo"
    assert agent.state.model.context_window == 1_000_000  # from its catalogue
    assert "register_providers" in agent.plugins.info("echo-plugin").hooks


async def test_a_registered_provider_serves_the_run() -> None:
    class Echo:
        @hookimpl
        def register_providers(self):
            return (EchoProvider(),)

    agent = Agent(model="echo:any-id", plugins=[Echo()], autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("ping")

    check_event_grammar(recorder.events)
    assert agent.state.messages[-1].text == "echo: ping"


def test_a_later_plugins_provider_replaces_an_earlier_one_of_the_same_name() -> None:
    def plugin(label: str) -> Any:
        class P:
            name = label

            @hookimpl
            def register_providers(self):
                return [EchoProvider(prefix=label)]

        return P()

    agent = Agent(model="echo:big", plugins=[plugin("early"), plugin("late")], autoload=False)

    assert agent.providers["echo"].prefix == "late"


def test_a_plugin_provider_may_replace_a_builtin_one() -> None:
    class MyFaux:
        @hookimpl
        def register_providers(self):
            return [EchoProvider(name="faux")]

    agent = Agent(model="faux:big", plugins=[MyFaux()], autoload=False)

    assert isinstance(agent.providers["faux"], EchoProvider)


def test_an_unknown_provider_is_a_configuration_error_at_construction() -> None:
    with pytest.raises(ValueError, match="nosuch"):
        Agent(model="nosuch:model", autoload=False)


def test_a_raising_register_providers_is_a_load_error_naming_the_plugin() -> None:
    class Broken:
        name = "broken-providers"

        @hookimpl
        def register_providers(self):
            raise RuntimeError("bad config")

    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:test", plugins=[Broken()], autoload=False)

    assert caught.value.plugin == "broken-providers"
    assert "bad config" in str(caught.value)


@pytest.mark.parametrize("wrong", [["a string"], [object()], 5])
def test_register_providers_returning_non_providers_is_a_load_error(wrong: Any) -> None:
    class Wrong:
        name = "wrong-providers"

        @hookimpl
        def register_providers(self):
            return wrong

    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:test", plugins=[Wrong()], autoload=False)

    assert caught.value.plugin == "wrong-providers"


def test_an_async_register_providers_is_a_load_error() -> None:
    class AsyncProviders:
        @hookimpl
        async def register_providers(self):
            return []

    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:test", plugins=[AsyncProviders()], autoload=False)

    assert caught.value.plugin == "AsyncProviders"
    assert "register_providers" in str(caught.value)
