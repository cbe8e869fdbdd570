"""``check_entry_point``: the smoke test every installed plugin should have."""

from __future__ import annotations

from typing import Any

__all__ = ["check_entry_point"]


def check_entry_point(distribution: str, *, group: str = "mainspring") -> dict[str, Any]:
    """Load the installed ``distribution``'s entry points in ``group`` and start an agent.

    What autoloading does for a user, checked in a test: the distribution is installed,
    it declares at least one entry point in the ``mainspring`` group, each one imports and
    implements at least one hook, and an agent starts with them (hook signatures valid,
    tools built without collisions). Returns the loaded plugin objects by entry-point name.

    Raises ``AssertionError`` saying what is wrong. Typical use, in the plugin's tests::

        def test_the_entry_point_loads() -> None:
            check_entry_point("my-plugin")
    """
    from importlib_metadata import PackageNotFoundError
    from importlib_metadata import distribution as find

    from ..kernel.agent import Agent
    from ..plugin_hooks import implemented_hooks
    from .faux import FauxProvider

    try:
        found = find(distribution)
    except PackageNotFoundError:
        raise AssertionError(
            f"{distribution} is not installed (pip install -e . in its directory)"
        ) from None
    points = [ep for ep in found.entry_points if ep.group == group]
    if not points:
        raise AssertionError(
            f"{distribution} declares no entry point in the {group!r} group: add "
            f'[project.entry-points.{group}] {distribution} = "<module>" to its pyproject.toml'
        )
    loaded: dict[str, Any] = {}
    for point in points:
        try:
            plugin = point.load()
        except Exception as error:
            raise AssertionError(
                f"entry point {point.name} = {point.value!r} of {distribution} does not "
                f"load: {type(error).__name__}: {error}"
            ) from error
        if not implemented_hooks(plugin):
            raise AssertionError(
                f"entry point {point.name} = {point.value!r} of {distribution} implements "
                "no hook (is every hook function decorated with @mainspring.hookimpl?)"
            )
        loaded[point.name] = plugin
    try:
        Agent(
            model="faux:test",
            provider=FauxProvider(),
            plugins=list(loaded.values()),
            autoload=False,
        )
    except Exception as error:
        raise AssertionError(
            f"an agent does not start with {distribution}: {type(error).__name__}: {error}"
        ) from error
    return loaded
