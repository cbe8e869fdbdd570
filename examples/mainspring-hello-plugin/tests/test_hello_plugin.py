"""Tests for mainspring-hello-plugin, in-process: no installation, no network.

The plugin module is passed to ``Agent(plugins=[...])`` with ``autoload=False`` (so
whatever else is installed stays out of the way), and ``FauxProvider`` plays the model:
each step of its script is one model reply.
"""

from __future__ import annotations

from typing import Any

import mainspring_hello_plugin
import pytest
from mainspring_hello_plugin import PLUGIN_NAME

import mainspring
from mainspring import Agent, Settings
from mainspring.testing import (
    EventRecorder,
    FauxProvider,
    check_entry_point,
    check_event_grammar,
    faux,
)

PLUGIN = "mainspring-hello-plugin"  # one name in-process and installed: its PLUGIN_NAME


async def run(steps: list[Any], settings: Settings | None = None) -> tuple[Agent, EventRecorder]:
    """Prompt an agent with only this plugin; return it and the events it emitted."""
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        plugins=[mainspring_hello_plugin],
        autoload=False,
        settings=settings,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("please greet")
    check_event_grammar(recorder.events)
    return agent, recorder


def test_the_plugin_contributes_the_greet_tool() -> None:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([]),
        plugins=[mainspring_hello_plugin],
        autoload=False,
    )

    assert [tool.name for tool in agent.state.tools] == ["greet"]
    assert agent.tool_owners["greet"] == PLUGIN
    info = agent.plugins.info(PLUGIN)
    assert info is not None
    assert set(info.hooks) == {"register_tools", "before_tool_call"}


async def test_greet_greets() -> None:
    _, recorder = await run([faux.tool_call("greet", {"name": "Ada"}), faux.text("Done.")])

    (decision,) = recorder.of_type("tool_decision")
    assert decision.decision == "allow"
    (end,) = recorder.of_type("tool_execution_end")
    assert end.result.text == "Hello, Ada!"
    assert not end.is_error


async def test_the_gate_refuses_voldemort() -> None:
    agent, recorder = await run(
        [faux.tool_call("greet", {"name": "Voldemort"}), faux.text("I won't, then.")]
    )

    (decision,) = recorder.of_type("tool_decision")
    assert decision.decision == "block"
    assert decision.plugin == PLUGIN
    assert "Voldemort" in decision.reason
    (result,) = recorder.messages("tool_result")
    assert result.is_error
    assert "will not greet Voldemort" in result.text
    # the refusal is an ordinary tool result: the run goes on and ends normally
    assert recorder.of_type("agent_end")[0].reason == "stop"
    assert agent.state.messages[-1].text == "I won't, then."


async def test_the_gate_ignores_case_and_spaces() -> None:
    _, recorder = await run([faux.tool_call("greet", {"name": " voldemort "}), faux.text("ok")])

    assert recorder.of_type("tool_decision")[0].decision == "block"


async def test_the_refused_name_is_configurable() -> None:
    settings = Settings(plugin_options={"mainspring-hello-plugin": {"refuse": "Moriarty"}})
    _, recorder = await run(
        [
            [
                faux.tool_call("greet", {"name": "Moriarty"}),
                faux.tool_call("greet", {"name": "Voldemort"}),
            ],
            faux.text("ok"),
        ],
        settings=settings,
    )

    decisions = [d.decision for d in recorder.of_type("tool_decision")]
    assert decisions == ["block", "allow"]
    texts = [m.text for m in recorder.messages("tool_result")]
    assert texts[1] == "Hello, Voldemort!"


@mainspring.tool
def shout(name: str) -> str:
    """Shout a name."""
    return name.upper()


# The pytest plugin of mainspring.testing (registered when mainspring is installed) gives
# an `agent` on a scripted `faux_provider` with a `recorder` subscribed, and checks the
# event grammar after the test; markers choose its plugins, tools, settings and model.


@pytest.mark.mainspring_plugins(mainspring_hello_plugin)
@pytest.mark.mainspring_tools(shout)
async def test_the_gate_leaves_other_tools_alone(agent, faux_provider, recorder) -> None:
    faux_provider.extend([faux.tool_call("shout", {"name": "Voldemort"}), faux.text("ok")])

    await agent.prompt("shout")

    assert recorder.of_type("tool_decision")[0].decision == "allow"
    assert recorder.of_type("tool_execution_end")[0].result.text == "VOLDEMORT"


@pytest.mark.mainspring_plugins(mainspring_hello_plugin)
@pytest.mark.mainspring_settings(Settings(plugin_options={PLUGIN_NAME: {"refuse": "Ada"}}))
async def test_the_configured_name_is_refused(agent, faux_provider, recorder) -> None:
    faux_provider.extend([faux.tool_call("greet", {"name": "Ada"}), faux.text("ok")])

    await agent.prompt("greet Ada")

    assert recorder.of_type("tool_decision")[0].decision == "block"


def test_the_entry_point_loads() -> None:
    """The smoke test every plugin should have: installed, it loads as autoload would."""
    loaded = check_entry_point(PLUGIN_NAME)
    assert loaded == {PLUGIN_NAME: mainspring_hello_plugin}
