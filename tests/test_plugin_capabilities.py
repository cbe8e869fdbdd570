"""Capability manifests: a plugin declares what it does; the loader and the operator hold it.

Contract (``mainspring.loading.capabilities``, ``docs/capabilities.md``): a hook outside a
plugin's ``CAPABILITIES`` is a load error naming plugin, hook and capability; a plugin
without a manifest loads as undeclared unless ``[plugins] require_manifest``; the config
file's ``[plugins.NAME] capabilities`` narrows a plugin, whose other hooks are never called.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import run_cli
from mainspring import Agent, PluginLoadError, Settings, hookimpl, tool
from mainspring.events import ToolExecutionEnd
from mainspring.settings import load_settings
from mainspring.testing import FauxProvider, faux


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


class Bundle:
    """A tool bundle that also wants to read the conversation."""

    name = "bundle"
    CAPABILITIES = ("tools", "observe", "context")

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def register_tools(self) -> list[Any]:
        return [ping]

    @hookimpl
    def on_event(self, event: Any) -> None:
        self.seen.append(event.type)

    @hookimpl
    def transform_context(self, messages: Any) -> None:
        self.seen.append("context")


def build(plugins: list[Any], settings: Settings | None = None) -> Agent:
    steps = [faux.tool_call("ping", {}), faux.text("done")]
    return Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        autoload=False,
        plugins=plugins,
        settings=settings,
    )


def test_a_hook_outside_the_manifest_is_a_load_error() -> None:
    class Sneaky:
        name = "sneaky"
        CAPABILITIES = ("tools",)

        @hookimpl
        def on_event(self, event: Any) -> None:
            pass

    with pytest.raises(PluginLoadError) as caught:
        build([Sneaky()])
    message = str(caught.value)
    assert "'sneaky'" in message and "on_event" in message and "'observe'" in message
    assert caught.value.plugin == "sneaky"


@pytest.mark.parametrize("manifest", [("tools", "telepathy"), "tools"])
def test_a_malformed_manifest_is_a_load_error(manifest: Any) -> None:
    class Odd:
        name = "odd"
        CAPABILITIES = manifest

        @hookimpl
        def register_tools(self) -> list[Any]:
            return []

    with pytest.raises(PluginLoadError, match="odd"):
        build([Odd()])


def test_a_plugin_without_a_manifest_loads_as_undeclared() -> None:
    class Plain:
        name = "plain"

        @hookimpl
        def on_event(self, event: Any) -> None:
            pass

    agent = build([Plain()])
    info = agent.plugins.info("plain")
    assert info is not None and info.declared is None and info.granted is None
    builtin = agent.plugins.info("session_writer")
    assert builtin is not None and builtin.declared == frozenset({"observe"})


def test_manifests_can_be_required() -> None:
    class Plain:
        name = "plain"

        @hookimpl
        def on_event(self, event: Any) -> None:
            pass

    settings = Settings.model_validate({"plugins": {"require_manifest": True}})
    with pytest.raises(PluginLoadError, match="require_manifest"):
        build([Plain()], settings)
    build([Bundle()], settings)  # declared plugins and the built-ins load


async def test_the_operator_narrows_a_plugin_and_its_other_hooks_are_never_called(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bundle = Bundle()
    settings = Settings.model_validate({"plugins": {"bundle": {"capabilities": ["tools"]}}})
    agent = build([bundle], settings)

    outcome = await agent.prompt("go")

    assert outcome.text == "done"
    assert bundle.seen == []
    info = agent.plugins.info("bundle")
    assert info is not None and info.granted == frozenset({"tools"})
    assert "ping" in agent.tool_owners


async def test_without_a_grant_the_declared_hooks_run() -> None:
    bundle = Bundle()
    agent = build([bundle])
    recorded: list[Any] = []
    agent.subscribe(lambda event, signal: recorded.append(event))

    await agent.prompt("go")

    assert "context" in bundle.seen and "agent_end" in bundle.seen
    assert any(isinstance(e, ToolExecutionEnd) for e in recorded)


def test_the_config_file_sets_the_policy(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[plugins]\nrequire_manifest = true\n\n[plugins.bundle]\ncapabilities = ["tools"]\n'
    )
    settings = load_settings(config, environ={})

    assert settings.plugins.require_manifest is True
    assert settings.plugins.grants["bundle"].capabilities == ("tools",)


def test_plugins_lists_declared_and_granted_capabilities(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[plugins.event_log]\ncapabilities = ["tools"]\n')
    env = dict(os.environ, MAINSPRING_CONFIG=str(config), MAINSPRING_DISABLE_PLUGIN_AUTOLOAD="1")
    done = run_cli(["plugins", "--json"], env)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["event_log"]["capabilities"] == {"declared": ["observe"], "granted": []}
    assert rows["session_writer"]["capabilities"]["declared"] == ["observe"]


class Watcher:
    """Declares only observation, and watches."""

    name = "watcher"
    CAPABILITIES = ("observe",)

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def on_event(self, event: Any) -> None:
        self.seen.append(event.type)


def test_a_plugin_registered_later_is_held_to_its_manifest() -> None:
    class Sneaky:
        name = "sneaky"
        CAPABILITIES = ("observe",)

        @hookimpl
        def transform_context(self, messages: Any) -> None:
            pass

    agent = build([])

    with pytest.raises(PluginLoadError, match="transform_context"):
        agent.plugins.pm.register(Sneaky())

    assert agent.plugins.info("sneaky") is None
    assert agent.plugins.pm.get_plugin("sneaky") is None


async def test_a_plugin_registered_later_is_narrowed_by_the_config_file() -> None:
    settings = Settings.model_validate({"plugins": {"watcher": {"capabilities": ["tools"]}}})
    agent = build([], settings)
    watcher = Watcher()
    agent.plugins.pm.register(watcher, name="watcher")

    await agent.prompt("go")

    info = agent.plugins.info("watcher")
    assert info is not None and info.granted == frozenset()
    assert watcher.seen == []


def test_a_grant_naming_no_plugin_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.model_validate({"plugins": {"watchr": {"capabilities": ["tools"]}}})

    build([Watcher()], settings)

    assert any(
        record.getMessage() == "plugin_grant_unused" and record.plugin == "watchr"  # type: ignore[attr-defined]
        for record in caplog.records
    )


def test_a_tool_name_collision_says_how_to_disable_a_plugin() -> None:
    class Twin:
        name = "twin"
        CAPABILITIES = ("tools",)

        @hookimpl
        def register_tools(self) -> list[Any]:
            return [ping]

    with pytest.raises(PluginLoadError) as caught:
        build([Bundle(), Twin()])

    message = str(caught.value)
    assert "'bundle'" in message and "'twin'" in message
    assert "--no-plugin twin" in message


def test_every_hook_needs_exactly_one_capability_and_the_docs_list_it() -> None:
    from mainspring.contract import hookspecs
    from mainspring.loading.capabilities import CAPABILITY_OF

    assert set(CAPABILITY_OF) == hookspecs.ASYNC_HOOKS | hookspecs.SYNC_HOOKS
    table = (Path(__file__).resolve().parent.parent / "docs" / "capabilities.md").read_text()
    rows = {
        line.split("|")[1].strip(" `"): line.split("|")[2]
        for line in table.splitlines()
        if line.startswith("| `")
    }
    for hook, capability in CAPABILITY_OF.items():
        assert f"`{hook}`" in rows[capability], f"{hook} is not listed under {capability}"
