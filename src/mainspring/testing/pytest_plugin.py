"""An opt-in pytest plugin for testing plugins without installing them.

Enable it in a ``conftest.py``::

    pytest_plugins = ["mainspring.testing.pytest_plugin"]

Fixtures:

- ``faux``: an empty :class:`~mainspring.testing.FauxProvider`; script it with
  ``faux.append(...)`` (or ``faux.extend``) before prompting.
- ``recorder``: an :class:`~mainspring.testing.EventRecorder`.
- ``agent``: an :class:`~mainspring.Agent` on ``faux`` with the recorder subscribed,
  installed plugins not autoloaded; plugins under test are added with
  ``agent_plugins`` (override that fixture, or mark a test
  ``@pytest.mark.mainspring_plugins(my_plugin)``). After the test, the recorded events
  are checked with :func:`~mainspring.testing.check_event_grammar`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ..kernel.agent import Agent
from .faux import FauxProvider
from .grammar import check_event_grammar
from .recorder import EventRecorder

__all__ = ["agent", "agent_plugins", "faux", "recorder"]


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``mainspring_plugins`` marker."""
    config.addinivalue_line(
        "markers", "mainspring_plugins(*plugins): plugins registered on the `agent` fixture"
    )


@pytest.fixture
def faux() -> FauxProvider:
    """An empty scripted provider."""
    return FauxProvider()


@pytest.fixture
def recorder() -> EventRecorder:
    """A subscriber that keeps every event."""
    return EventRecorder()


@pytest.fixture
def agent_plugins(request: pytest.FixtureRequest) -> list[Any]:
    """The in-process plugins of the ``agent`` fixture (from the marker by default)."""
    marker = request.node.get_closest_marker("mainspring_plugins")
    return list(marker.args) if marker else []


@pytest.fixture
def agent(faux: FauxProvider, recorder: EventRecorder, agent_plugins: list[Any]) -> Iterator[Agent]:
    """An agent on ``faux`` with ``recorder`` subscribed; grammar-checked afterwards."""
    built = Agent(model="faux:test", provider=faux, plugins=agent_plugins, autoload=False)
    built.subscribe(recorder)
    yield built
    if recorder.events:
        check_event_grammar(recorder.events)
