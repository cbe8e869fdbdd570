"""Installed plugins: real distributions with ``mainspring`` entry points.

Each test builds ``*.dist-info`` directories (METADATA, entry_points.txt, RECORD) and
their modules in a temporary directory on ``sys.path``, so ``importlib_metadata`` finds
them exactly as it finds pip-installed packages.

DESIGN §8: entry-point group ``mainspring`` (the entry point name is the distribution
name); installed plugins load after the built-ins, sorted by name, before ``plugins=``;
the controls (``autoload=False`` / ``MAINSPRING_DISABLE_PLUGIN_AUTOLOAD=1``, allowlist
``MAINSPRING_PLUGINS`` with set-but-empty = none, denylist ``disable_plugins=`` /
``MAINSPRING_DISABLE_PLUGINS``) apply before any plugin module is imported; a plugin that
fails to load stops the agent (``PluginLoadError`` naming the entry point, distribution,
version and cause, and how to disable it); two plugins registering one tool name is a
``PluginLoadError`` naming both.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mainspring import Agent, PluginLoadError, hookimpl
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

ENV_VARS = (
    "MAINSPRING_PLUGINS",
    "MAINSPRING_DISABLE_PLUGINS",
    "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD",
)

GOOD_PLUGIN = '''
"""A well-behaved plugin: one tool."""
from mainspring import hookimpl, tool


@tool(effects=("none",))  # declared, so an installed policy pack need not ask about it
def {tool}(text: str) -> str:
    """Answer with a pong."""
    return "pong:" + text


@hookimpl
def register_tools(agent):
    return [{tool}]
'''

BROKEN_ON_IMPORT = '''
"""A plugin whose import fails; it leaves a marker so tests can see it was imported."""
import pathlib

pathlib.Path({marker!r}).write_text("imported")
raise RuntimeError("broken on import: missing configuration")
'''


@dataclass
class Site:
    """A directory of installed distributions, on ``sys.path`` for one test."""

    root: Path
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    modules: list[str] = field(default_factory=list)

    def install(
        self,
        dist: str,
        source: str,
        *,
        version: str = "1.0.0",
        attribute: str | None = None,
        entry_point: str | None = None,
    ) -> str:
        """Create distribution ``dist`` whose entry point loads a new module; its name."""
        module = f"{dist.replace('-', '_')}_{self.token}"
        self.modules.append(module)
        (self.root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = self.root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
        )
        target = f"{module}:{attribute}" if attribute else module
        (info / "entry_points.txt").write_text(
            f"[mainspring]\n{entry_point or dist} = {target}\n", encoding="utf-8"
        )
        (info / "RECORD").write_text(
            f"{module}.py,,\n{info.name}/METADATA,,\n{info.name}/entry_points.txt,,\n"
            f"{info.name}/RECORD,,\n",
            encoding="utf-8",
        )
        importlib.invalidate_caches()
        return module

    def good(self, dist: str, tool: str, **kwargs: Any) -> str:
        return self.install(dist, GOOD_PLUGIN.format(tool=tool), **kwargs)

    def broken(self, dist: str, **kwargs: Any) -> Path:
        """A distribution whose module raises on import; returns its marker file."""
        marker = self.root / f"{dist}.imported"
        self.install(dist, BROKEN_ON_IMPORT.format(marker=str(marker)), **kwargs)
        return marker

    def imported(self, module_prefix: str) -> bool:
        return any(
            name.startswith(module_prefix.replace("-", "_")) and name.endswith(self.token)
            for name in sys.modules
        )


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    root = tmp_path / "site-packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    installed = Site(root)
    yield installed
    for module in installed.modules:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()


def build(**kwargs: Any) -> Agent:
    kwargs.setdefault("provider", FauxProvider([faux.text("hi")]))
    kwargs.setdefault("model", "faux:test")
    return Agent(**kwargs)


def acme(agent: Agent) -> list[str]:
    """The names of this test's installed plugins, in load order."""
    return [
        info.name
        for info in agent.plugins.infos
        if info.source == "entrypoint" and info.name.startswith("acme-")
    ]


def tool_names(agent: Agent) -> set[str]:
    return {t.name for t in agent.state.tools}


# == discovery ==========================================================================


async def test_an_installed_plugin_is_found_loaded_and_its_tool_works(site: Site) -> None:
    site.good("acme-good", "acme_ping", version="1.2.3")
    provider = FauxProvider([faux.tool_call("acme_ping", {"text": "hi"}), faux.text("done")])

    agent = build(provider=provider)

    assert acme(agent) == ["acme-good"]
    info = agent.plugins.info("acme-good")
    assert info.source == "entrypoint"
    assert (info.distribution, info.version) == ("acme-good", "1.2.3")
    assert info.hooks == ("register_tools",)
    assert info.tools == ("acme_ping",)
    assert "acme_ping" in tool_names(agent)
    assert agent.tool_owners["acme_ping"] == "acme-good"

    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("ping")

    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.text == "pong:hi" and not result.is_error


def test_an_entry_point_may_name_an_object_in_a_module(site: Site) -> None:
    site.install(
        "acme-object",
        '''
        from mainspring import hookimpl, tool

        @tool
        def acme_obj_tool(x: int) -> str:
            """A tool."""
            return str(x)

        class Plugin:
            name = "ignored-for-entry-points"

            @hookimpl
            def register_tools(self):
                return [acme_obj_tool]

        plugin = Plugin()
        ''',
        attribute="plugin",
    )

    agent = build()

    assert acme(agent) == ["acme-object"]  # named by its entry point
    assert "acme_obj_tool" in tool_names(agent)


def test_installed_plugins_load_sorted_by_name_between_builtins_and_in_process(
    site: Site,
) -> None:
    for dist, tool in [("acme-zeta", "z_tool"), ("acme-alpha", "a_tool"), ("acme-mid", "m_tool")]:
        site.good(dist, tool)

    class InProcess:
        @hookimpl
        def on_event(self):
            pass

    agent = build(plugins=[InProcess()])
    sources = [info.source for info in agent.plugins.infos]

    assert acme(agent) == ["acme-alpha", "acme-mid", "acme-zeta"]
    assert sources == sorted(sources, key=["builtin", "entrypoint", "inprocess"].index)
    assert agent.plugins.infos[-1].name == "InProcess"


def test_an_in_process_plugin_named_like_an_installed_one_gets_a_suffix(site: Site) -> None:
    site.good("acme-good", "acme_ping")

    class Clash:
        name = "acme-good"

        @hookimpl
        def on_event(self):
            pass

    agent = build(plugins=[Clash()])

    assert agent.plugins.info("acme-good").source == "entrypoint"
    assert agent.plugins.info("acme-good-2").source == "inprocess"


# == failures stop the agent ============================================================


def test_a_plugin_that_fails_to_import_stops_the_agent(site: Site) -> None:
    marker = site.broken("acme-broken", version="0.3.1")

    with pytest.raises(PluginLoadError) as caught:
        build()

    error = caught.value
    message = str(error)
    assert marker.exists()  # it was really imported
    assert "acme-broken" in message  # the entry point and distribution
    assert "0.3.1" in message  # the version
    assert "broken on import: missing configuration" in message  # the cause
    assert "disable_plugins" in message and "MAINSPRING_DISABLE_PLUGINS" in message
    assert (error.plugin, error.distribution, error.version) == (
        "acme-broken",
        "acme-broken",
        "0.3.1",
    )
    assert isinstance(error.__cause__, RuntimeError)


def test_an_entry_point_naming_a_missing_attribute_stops_the_agent(site: Site) -> None:
    site.install("acme-typo", "x = 1\n", attribute="plugn")

    with pytest.raises(PluginLoadError) as caught:
        build()

    assert caught.value.plugin == "acme-typo"
    assert "acme-typo" in str(caught.value)


def test_an_installed_plugin_failing_validation_names_its_distribution(site: Site) -> None:
    site.install(
        "acme-async-tools",
        """
        from mainspring import hookimpl

        @hookimpl
        async def register_tools(agent):
            return []
        """,
        version="2.0.0",
    )

    with pytest.raises(PluginLoadError) as caught:
        build()

    error = caught.value
    message = str(error)
    assert error.plugin == "acme-async-tools"
    assert (error.distribution, error.version) == ("acme-async-tools", "2.0.0")
    assert "register_tools" in message
    assert "disable_plugins" in message and "MAINSPRING_DISABLE_PLUGINS" in message
    assert "2.0.0" in message  # which installed version is at fault


def test_an_installed_plugin_whose_register_tools_raises_says_how_to_disable_it(
    site: Site,
) -> None:
    site.install(
        "acme-raising-tools",
        """
        from mainspring import hookimpl

        @hookimpl
        def register_tools(agent):
            raise RuntimeError("API token missing")
        """,
        version="0.9.0",
    )

    with pytest.raises(PluginLoadError) as caught:
        build()

    error = caught.value
    message = str(error)
    assert error.plugin == "acme-raising-tools"
    assert "API token missing" in message
    assert "disable_plugins" in message and "MAINSPRING_DISABLE_PLUGINS" in message
    assert error.distribution == "acme-raising-tools"
    assert "0.9.0" in message


def test_two_installed_plugins_with_one_tool_name_is_an_error_naming_both(site: Site) -> None:
    site.good("acme-search-a", "search")
    site.good("acme-search-b", "search")

    with pytest.raises(PluginLoadError) as caught:
        build()

    message = str(caught.value)
    assert "search" in message
    assert "acme-search-a" in message and "acme-search-b" in message


# == denylist ===========================================================================


def test_a_denied_broken_plugin_is_never_imported(site: Site) -> None:
    marker = site.broken("acme-broken")
    site.good("acme-good", "acme_ping")

    agent = build(disable_plugins=["acme-broken"])

    assert not marker.exists()
    assert not site.imported("acme_broken")
    assert acme(agent) == ["acme-good"]


def test_the_denylist_environment_variable_keeps_a_plugin_from_being_imported(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = site.broken("acme-broken")
    site.good("acme-good", "acme_ping")
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGINS", "acme-other,acme-broken")

    agent = build()

    assert not marker.exists()
    assert acme(agent) == ["acme-good"]


def test_the_denylist_matches_normalised_names(site: Site) -> None:
    marker = site.broken("acme-broken")

    build(disable_plugins=["ACME_broken"])

    assert not marker.exists()


def test_denying_a_plugin_that_is_not_installed_is_harmless(site: Site) -> None:
    site.good("acme-good", "acme_ping")

    agent = build(disable_plugins=["acme-not-installed"])

    assert acme(agent) == ["acme-good"]


# == allowlist ==========================================================================


def test_the_allowlist_loads_only_the_named_plugins(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = site.broken("acme-broken")
    site.good("acme-good", "acme_ping")
    site.good("acme-other", "acme_other")
    monkeypatch.setenv("MAINSPRING_PLUGINS", "acme-good,acme-other")

    agent = build()

    assert not marker.exists()
    loaded = [i.name for i in agent.plugins.infos if i.source == "entrypoint"]
    assert loaded == ["acme-good", "acme-other"]  # nothing else installed either


def test_an_allowlist_set_but_empty_loads_no_installed_plugin(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = site.broken("acme-broken")
    site.good("acme-good", "acme_ping")
    monkeypatch.setenv("MAINSPRING_PLUGINS", "")

    agent = build()

    assert not marker.exists()
    assert [i for i in agent.plugins.infos if i.source == "entrypoint"] == []
    assert "acme_ping" not in tool_names(agent)


def test_without_an_allowlist_every_installed_plugin_loads(site: Site) -> None:
    site.good("acme-one", "one_tool")
    site.good("acme-two", "two_tool")

    agent = build()

    assert acme(agent) == ["acme-one", "acme-two"]
    assert {"one_tool", "two_tool"} <= tool_names(agent)


def test_the_denylist_wins_over_the_allowlist(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = site.broken("acme-broken")
    monkeypatch.setenv("MAINSPRING_PLUGINS", "acme-broken")

    agent = build(disable_plugins=["acme-broken"])

    assert not marker.exists()
    assert acme(agent) == []


# == autoload ===========================================================================


def test_autoload_false_imports_no_installed_plugin(site: Site) -> None:
    marker = site.broken("acme-broken")
    site.good("acme-good", "acme_ping")

    class InProcess:
        @hookimpl
        def on_event(self):
            pass

    agent = build(autoload=False, plugins=[InProcess()])

    assert not marker.exists()
    assert not site.imported("acme_good")
    assert [i for i in agent.plugins.infos if i.source == "entrypoint"] == []
    assert agent.plugins.info("InProcess") is not None  # in-process plugins still load


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_the_autoload_environment_switch_imports_no_installed_plugin(
    site: Site, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    marker = site.broken("acme-broken")
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", value)

    agent = build()

    assert not marker.exists()
    assert [i for i in agent.plugins.infos if i.source == "entrypoint"] == []


@pytest.mark.parametrize("value", ["", "0"])
def test_the_autoload_switch_off_values_keep_autoload(
    site: Site, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    site.good("acme-good", "acme_ping")
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", value)

    assert acme(build()) == ["acme-good"]
