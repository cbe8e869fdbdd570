"""``check_entry_point``: the smoke test every installed plugin should have."""

from __future__ import annotations

from typing import Any

__all__ = ["check_entry_point"]


def check_entry_point(distribution: str, *, group: str = "mainspring") -> dict[str, Any]:
    """Autoload the installed ``distribution``'s plugins the way an agent does for a user.

    An agent is built with installed plugins autoloaded and every installed plugin of
    another distribution turned off, so its plugins pass through the very checks autoload
    makes (the capability manifest in the distribution's metadata, hook signatures, tools
    built without collisions), and nothing else. Before that, the distribution must be
    installed and declare at least one entry point in the ``mainspring`` group; after
    it, each plugin must implement at least one hook. Returns the loaded plugin objects by
    entry-point name.

    Raises ``AssertionError`` saying what is wrong; when the distribution is an editable
    install whose ``pyproject.toml`` was edited since, it says to reinstall it. Typical
    use, in the plugin's tests::

        def test_the_entry_point_loads() -> None:
            check_entry_point("my-plugin")
    """
    from importlib_metadata import PackageNotFoundError
    from importlib_metadata import distribution as find

    from ..agent import Agent
    from ..contract.errors import PluginLoadError
    from ..contract.markers import implemented_hooks
    from ..loading import installed, normalise, stale_install
    from .faux import FauxProvider

    try:
        found = find(distribution)
    except PackageNotFoundError:
        raise AssertionError(
            f"{distribution} is not installed (pip install -e . in its directory)"
        ) from None
    stale = stale_install(found)
    points = [ep for ep in found.entry_points if ep.group == group]
    if not points:
        raise AssertionError(
            stale
            or f"{distribution} declares no entry point in the {group!r} group: add "
            f'[project.entry-points.{group}] {distribution} = "<module>" to its pyproject.toml'
        )
    own = {normalise(ep.name) for ep in points}
    others = sorted({name for name in installed() if name not in own})
    try:
        agent = Agent(
            model="faux:test", provider=FauxProvider(), autoload=True, disable_plugins=others
        )
    except PluginLoadError as error:  # already says when the install is stale
        raise AssertionError(f"autoload refuses {distribution}: {error}") from error
    except Exception as error:
        text = f"an agent does not start with {distribution}: {type(error).__name__}: {error}"
        raise AssertionError(f"{text}. {stale}" if stale else text) from error
    loaded = {
        info.name: info.plugin
        for info in agent.plugins.infos
        if info.source == "entrypoint" and normalise(info.name) in own
    }
    for point in points:
        if point.name not in loaded:
            why = [item.reason for item in agent.plugins.disabled if item.name == point.name]
            raise AssertionError(
                f"entry point {point.name} = {point.value!r} of {distribution} was not "
                f"loaded: turned off by {why[0] if why else 'another distribution of that name'}"
            )
        if not implemented_hooks(loaded[point.name]):
            raise AssertionError(
                f"entry point {point.name} = {point.value!r} of {distribution} implements "
                "no hook (is every hook function decorated with @mainspring.hookimpl?)"
            )
    return loaded
