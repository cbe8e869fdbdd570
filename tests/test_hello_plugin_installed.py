"""The example plugin, found through its real entry point (examples/mainspring-hello-plugin).

CI installs it (``./dev setup`` runs ``pip install --no-deps -e examples/*/``); without the
distribution installed these tests are skipped with the command that fixes that.
"""

from __future__ import annotations

from collections.abc import Iterator

import importlib_metadata
import pytest

from mainspring import Agent
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

DIST = "mainspring-hello-plugin"

try:
    VERSION = importlib_metadata.distribution(DIST).version
except importlib_metadata.PackageNotFoundError:
    VERSION = None

pytestmark = pytest.mark.skipif(
    VERSION is None,
    reason=f"{DIST} is not installed; run: .venv/bin/pip install -e examples/{DIST} --no-deps",
)


@pytest.fixture(autouse=True)
def _autoload_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (
        "MAINSPRING_PLUGINS",
        "MAINSPRING_DISABLE_PLUGINS",
        "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD",
    ):
        monkeypatch.delenv(var, raising=False)
    yield


def test_the_installed_example_is_autoloaded_through_its_entry_point() -> None:
    agent = Agent(provider=FauxProvider([]), model="faux:t")

    assert "greet" in [tool.name for tool in agent.state.tools]
    info = agent.plugins.info(DIST)
    assert info is not None
    assert info.source == "entrypoint"
    assert (info.distribution, info.version) == (DIST, VERSION)
    assert set(info.hooks) == {"register_tools", "before_tool_call"}
    assert agent.tool_owners["greet"] == DIST


async def test_the_installed_gate_blocks_under_its_entry_point_name() -> None:
    provider = FauxProvider([faux.tool_call("greet", {"name": "Voldemort"}), faux.text("ok")])
    agent = Agent(provider=provider, model="faux:t")
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("greet him")

    check_event_grammar(recorder.events)
    (decision,) = recorder.of_type("tool_decision")
    assert (decision.decision, decision.plugin) == ("block", DIST)


def test_the_installed_example_can_be_disabled_by_name() -> None:
    agent = Agent(provider=FauxProvider([]), model="faux:t", disable_plugins=[DIST])

    assert agent.plugins.info(DIST) is None
    assert "greet" not in [tool.name for tool in agent.state.tools]
