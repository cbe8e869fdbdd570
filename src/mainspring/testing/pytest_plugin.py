"""The pytest plugin of the testing kit: fixtures for testing a plugin in-process.

Installed with mainspring and registered through the ``pytest11`` entry point, so its
fixtures are available in every test session of an environment where mainspring is
installed, with nothing to enable (``-p no:mainspring.testing.pytest_plugin`` turns
it off; a ``pytest_plugins`` line naming the module is harmless). It imports
nothing from mainspring until a fixture is used.

Fixtures:

- ``faux_provider``: an empty :class:`~mainspring.testing.FauxProvider`; script it with
  ``faux_provider.extend([...])`` (the reply builders are ``mainspring.testing.faux``,
  which this fixture's name leaves free to import as ``faux``).
- ``recorder``: an :class:`~mainspring.testing.EventRecorder`.
- ``agent``: an :class:`~mainspring.Agent` on ``faux_provider`` with ``recorder``
  subscribed and installed plugins not autoloaded. After the test, the recorded events
  are checked with :func:`~mainspring.testing.check_event_grammar`. It is built from four
  fixtures, each of which a test module or ``conftest.py`` may override, and each of
  which a marker sets for one test:

  ============== ===================================== ============== ===============
  fixture        marker                                default        becomes
  ============== ===================================== ============== ===============
  agent_plugins  ``mainspring_plugins(*plugins)``      ``[]``         ``plugins=``
  agent_tools    ``mainspring_tools(*tools)``          ``[]``         ``tools=``
  agent_settings ``mainspring_settings(settings)``     ``None``       ``settings=``
  agent_model    ``mainspring_model("faux:id")``       ``faux:test``  ``model=``
  ============== ===================================== ============== ===============

  A marker that a fixture of the same name overrides (a module's ``agent_settings``
  fixture, say, which does not read the marker) would be ignored silently: the ``agent``
  fixture warns with :class:`MarkerOverriddenWarning` instead. Unless its settings set
  ``approvals.timeout_s``, the ``agent`` fixture's calls waiting for approval are blocked
  after :data:`TEST_APPROVAL_TIMEOUT_S` seconds, not the production 300.

- ``faux``: the former name of ``faux_provider``, kept working; it warns with a
  ``DeprecationWarning`` because it hides the ``faux`` reply builders in a test.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..agent import Agent
    from ..settings import Settings
    from .faux import FauxProvider
    from .recorder import EventRecorder

__all__ = [
    "TEST_APPROVAL_TIMEOUT_S",
    "MarkerOverriddenWarning",
    "agent",
    "agent_model",
    "agent_plugins",
    "agent_settings",
    "agent_tools",
    "faux",
    "faux_provider",
    "recorder",
]

_MARKERS = (
    "mainspring_plugins(*plugins): in-process plugins of the `agent` fixture",
    "mainspring_tools(*tools): tools of the `agent` fixture",
    "mainspring_settings(settings): the Settings of the `agent` fixture",
    "mainspring_model(model): the model of the `agent` fixture (default faux:test)",
)


TEST_APPROVAL_TIMEOUT_S = 5.0
"""How long the ``agent`` fixture's calls wait for an approval (unless its settings say)."""


class MarkerOverriddenWarning(UserWarning):
    """A ``mainspring_*`` marker was ignored: a fixture of the same name overrides it."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers that configure the ``agent`` fixture."""
    for line in _MARKERS:
        config.addinivalue_line("markers", line)


def _marker(request: pytest.FixtureRequest, name: str) -> pytest.Mark | None:
    mark: pytest.Mark | None = request.node.get_closest_marker(name)
    return mark


@pytest.fixture
def faux_provider() -> FauxProvider:
    """An empty scripted provider; ``extend`` it with replies before prompting."""
    from .faux import FauxProvider

    return FauxProvider()


@pytest.fixture
def faux(faux_provider: FauxProvider) -> FauxProvider:
    """Deprecated name of ``faux_provider`` (it hides the ``faux`` reply builders)."""
    warnings.warn(
        "the `faux` fixture is deprecated: use `faux_provider` (and import the reply "
        "builders as `from mainspring.testing import faux`)",
        DeprecationWarning,
        stacklevel=2,
    )
    return faux_provider


@pytest.fixture
def recorder() -> EventRecorder:
    """A subscriber that keeps every event."""
    from .recorder import EventRecorder

    return EventRecorder()


@pytest.fixture
def agent_plugins(request: pytest.FixtureRequest) -> list[Any]:
    """The in-process plugins of ``agent``: the ``mainspring_plugins`` marker's, or none."""
    mark = _marker(request, "mainspring_plugins")
    return list(mark.args) if mark else []


@pytest.fixture
def agent_tools(request: pytest.FixtureRequest) -> list[Any]:
    """Extra tools of ``agent``: the ``mainspring_tools`` marker's, or none."""
    mark = _marker(request, "mainspring_tools")
    return list(mark.args) if mark else []


@pytest.fixture
def agent_settings(request: pytest.FixtureRequest) -> Settings | None:
    """The settings of ``agent``: the ``mainspring_settings`` marker's, or the defaults."""
    mark = _marker(request, "mainspring_settings")
    if mark is None:
        return None
    (settings,) = mark.args
    result: Settings = settings
    return result


@pytest.fixture
def agent_model(request: pytest.FixtureRequest) -> Any:
    """The model of ``agent``: the ``mainspring_model`` marker's, or ``"faux:test"``."""
    mark = _marker(request, "mainspring_model")
    return mark.args[0] if mark else "faux:test"


def _first(args: tuple[Any, ...]) -> Any:
    return args[0] if args else None


def _same(value: Any, wanted: Any) -> bool:
    if isinstance(value, list) and isinstance(wanted, list):
        return len(value) == len(wanted) and all(a is b for a, b in zip(value, wanted, strict=True))
    return value is wanted or bool(value == wanted)


def _warn_overridden(request: pytest.FixtureRequest, given: dict[str, tuple[Any, Any]]) -> None:
    """Warn for each marker whose value the fixture of the same name did not use."""
    for marker, (value, expected) in given.items():
        mark = _marker(request, marker)
        if mark is None or _same(value, expected(mark.args)):
            continue
        fixture = "agent_" + marker.removeprefix("mainspring_")
        warnings.warn(
            f"@pytest.mark.{marker} is ignored: a fixture named {fixture!r} (in the test "
            "module or a conftest.py) overrides the one that reads the marker; remove one "
            "of the two, or read the marker in that fixture",
            MarkerOverriddenWarning,
            stacklevel=2,
        )


@pytest.fixture
def agent(
    request: pytest.FixtureRequest,
    faux_provider: FauxProvider,
    recorder: EventRecorder,
    agent_plugins: list[Any],
    agent_tools: list[Any],
    agent_settings: Settings | None,
    agent_model: Any,
) -> Iterator[Agent]:
    """An agent on ``faux_provider`` with ``recorder`` subscribed; grammar-checked after."""
    from ..agent import Agent
    from ..settings import Settings
    from .grammar import check_event_grammar

    _warn_overridden(
        request,
        {
            "mainspring_plugins": (agent_plugins, list),
            "mainspring_tools": (agent_tools, list),
            "mainspring_settings": (agent_settings, _first),
            "mainspring_model": (agent_model, _first),
        },
    )
    settings = agent_settings or Settings()
    if "timeout_s" not in settings.approvals.model_fields_set:
        approvals = settings.approvals.model_copy(update={"timeout_s": TEST_APPROVAL_TIMEOUT_S})
        settings = settings.model_copy(update={"approvals": approvals})
    built = Agent(
        model=agent_model,
        provider=faux_provider,
        plugins=agent_plugins,
        tools=agent_tools,
        settings=settings,
        autoload=False,
    )
    built.subscribe(recorder)
    yield built
    if recorder.events:
        check_event_grammar(recorder.events)
