"""Plugin loading is paid once per process; the plugin set can change after construction.

- The entry-point scan is made once per process and redone when ``sys.path`` changes or
  a distribution is installed into or removed from one of its directories, or on demand
  (``rescan_installed_plugins``).
- A plugin registered or unregistered after the agent was built takes effect on the next
  run: the compiled call plans are rebuilt.
- An implementation of a hook this kernel does not know loads when it is marked
  ``optionalhook=True`` (pluggy's ``check_pending`` rule) and is ignored.
- The bundled providers are built on first use: an agent that never uses the local
  provider never imports its module.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import importlib_metadata
import pytest

from mainspring import Agent, Block, PluginLoadError, hookimpl, tool
from mainspring.loading.loader import rescan_installed_plugins
from mainspring.testing import EventRecorder, FauxProvider, faux

ENV_VARS = (
    "MAINSPRING_PLUGINS",
    "MAINSPRING_DISABLE_PLUGINS",
    "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD",
)

PLUGIN = """
from mainspring import hookimpl

@hookimpl
def on_event(event):
    pass
"""


class Site:
    """Installed distributions in a directory on ``sys.path``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.token = uuid.uuid4().hex[:8]
        self.modules: list[str] = []

    def install(self, dist: str) -> None:
        module = f"{dist.replace('-', '_')}_{self.token}"
        self.modules.append(module)
        (self.root / f"{module}.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
        info = self.root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[mainspring]\n{dist} = {module}\n", encoding="utf-8"
        )
        importlib.invalidate_caches()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    # every installed distribution is scanned; only these test plugins are imported
    monkeypatch.setenv("MAINSPRING_PLUGINS", "acme-once,acme-first,acme-second,acme-rescan")
    root = tmp_path / "site-packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    installed = Site(root)
    yield installed
    for module in installed.modules:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the entry-point scans (calls of ``importlib_metadata.entry_points``)."""
    calls: list[str] = []
    real = importlib_metadata.entry_points

    def counting(**params: Any) -> Any:
        calls.append(params.get("group", ""))
        return real(**params)

    monkeypatch.setattr(importlib_metadata, "entry_points", counting)
    return calls


def installed(agent: Agent) -> set[str]:
    return {info.name for info in agent.plugins.infos if info.source == "entrypoint"}


def test_installed_plugins_are_scanned_once_per_process(site: Site, scans: list[str]) -> None:
    site.install("acme-once")
    first = Agent(model="faux:t", provider=FauxProvider())
    assert "acme-once" in installed(first)
    count = len(scans)
    assert count >= 1
    for _ in range(5):
        again = Agent(model="faux:t", provider=FauxProvider())
        assert "acme-once" in installed(again)
    assert len(scans) == count


def test_a_distribution_installed_later_is_found(site: Site, scans: list[str]) -> None:
    site.install("acme-first")
    assert "acme-second" not in installed(Agent(model="faux:t", provider=FauxProvider()))
    site.install("acme-second")  # changes the sys.path directory
    assert {"acme-first", "acme-second"} <= installed(
        Agent(model="faux:t", provider=FauxProvider())
    )


def test_a_directory_change_that_installs_nothing_costs_no_rescan(
    site: Site, scans: list[str]
) -> None:
    # Importing a plugin module writes its __pycache__ beside it (unless bytecode writing
    # is off), which changes the directory's time: not a reason to scan again.
    site.install("acme-once")
    Agent(model="faux:t", provider=FauxProvider())
    count = len(scans)
    (site.root / "__pycache__").mkdir(exist_ok=True)
    (site.root / "notes.txt").write_text("not a distribution", encoding="utf-8")
    for _ in range(3):
        assert "acme-once" in installed(Agent(model="faux:t", provider=FauxProvider()))
    assert len(scans) == count


def test_a_path_entry_that_is_a_file_or_vanishes_is_skipped(
    site: Site, scans: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.install("acme-once")
    Agent(model="faux:t", provider=FauxProvider())
    count = len(scans)
    archive = tmp_path / "plugins.zip"
    archive.write_bytes(b"not a directory")
    monkeypatch.syspath_prepend(str(archive))
    monkeypatch.syspath_prepend(str(tmp_path / "gone"))
    assert "acme-once" in installed(Agent(model="faux:t", provider=FauxProvider()))
    assert len(scans) == count + 1  # sys.path changed: scanned once more, not refused


def test_a_reinstall_of_the_same_version_is_scanned_again(site: Site, scans: list[str]) -> None:
    site.install("acme-once")
    Agent(model="faux:t", provider=FauxProvider())
    count = len(scans)
    info = site.root / "acme_once-1.0.dist-info"
    (info / "entry_points.txt").unlink()
    (info / "METADATA").unlink()
    info.rmdir()
    site.install("acme-once")  # the same name, a new directory
    later = info.stat().st_mtime_ns + 10**9  # a second later: file times may be coarse
    for changed in (info, site.root):
        os.utime(changed, ns=(later, later))
    assert "acme-once" in installed(Agent(model="faux:t", provider=FauxProvider()))
    assert len(scans) == count + 1


def test_a_rescan_on_demand(site: Site, scans: list[str]) -> None:
    site.install("acme-rescan")
    Agent(model="faux:t", provider=FauxProvider())
    count = len(scans)
    rescan_installed_plugins()
    Agent(model="faux:t", provider=FauxProvider())
    assert len(scans) == count + 1


# == the plugin set after construction ==================================================


class Shouter:
    """Upper-cases the prompt the model sees and watches the events."""

    name = "shouter"

    def __init__(self) -> None:
        self.events: list[str] = []

    @hookimpl
    def transform_context(self, messages: tuple[Any, ...]) -> tuple[Any, ...]:
        last = messages[-1]
        return (*messages[:-1], last.model_copy(update={"content": str(last.content).upper()}))

    @hookimpl
    def on_event(self, event: Any) -> None:
        self.events.append(event.type)


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


class Gate:
    name = "gate"

    @hookimpl
    def before_tool_call(self, call: Any) -> Block:
        return Block("not now")


async def test_a_plugin_registered_after_construction_acts_on_the_next_run() -> None:
    provider = FauxProvider([faux.text("one"), faux.text("two"), faux.text("three")])
    agent = Agent(model="faux:t", provider=provider, autoload=False)
    await agent.prompt("first")  # compiles the call plans
    assert provider.requests[-1].messages[-1].content == "first"

    plugin = Shouter()
    agent.plugins.pm.register(plugin, name="shouter")
    await agent.prompt("second")
    assert provider.requests[-1].messages[-1].content == "SECOND"
    assert "agent_end" in plugin.events
    assert agent.plugins.info("shouter") is not None

    agent.plugins.unregister("shouter")
    seen = len(plugin.events)
    await agent.prompt("third")
    assert provider.requests[-1].messages[-1].content == "third"
    assert len(plugin.events) == seen


async def test_a_gate_registered_after_construction_blocks_the_next_call() -> None:
    provider = FauxProvider(
        [faux.tool_call("echo", {"text": "a"}), "ok", faux.tool_call("echo", {"text": "b"}), "ok"]
    )
    agent = Agent(model="faux:t", provider=provider, tools=[echo], autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    assert [e.is_error for e in recorder.of_type("tool_execution_end")] == [False]

    agent.plugins.pm.register(Gate(), name="gate")
    recorder.clear()
    await agent.prompt("again")
    [end] = recorder.of_type("tool_execution_end")
    assert end.is_error
    assert [d.plugin for d in recorder.of_type("tool_decision")] == ["gate"]


async def test_a_token_counter_registered_later_decides_the_next_compaction() -> None:
    class Huge:
        name = "huge"

        @hookimpl
        def count_tokens(self, messages: tuple[Any, ...]) -> int:
            return 10**9

    provider = FauxProvider([faux.text("one"), faux.text("two")])
    agent = Agent(model="faux:t", provider=provider, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("first")
    assert recorder.of_type("compaction_start") == []
    agent.plugins.pm.register(Huge(), name="huge")
    await agent.prompt("second")
    [start] = recorder.of_type("compaction_start")
    assert start.tokens_before == 10**9


# == optional hooks =====================================================================


class FromTheFuture:
    """Written for a newer mainspring: one hook this kernel does not know."""

    name = "future"

    def __init__(self) -> None:
        self.events: list[str] = []

    @hookimpl(optionalhook=True)
    def on_plan_approved(self, plan: Any) -> None:
        raise AssertionError("never called by this kernel")

    @hookimpl
    def on_event(self, event: Any) -> None:
        self.events.append(event.type)


async def test_an_unknown_optional_hook_is_ignored() -> None:
    plugin = FromTheFuture()
    agent = Agent(
        model="faux:t", provider=FauxProvider([faux.text("hi")]), plugins=[plugin], autoload=False
    )
    info = agent.plugins.info("future")
    assert info is not None and info.hooks == ("on_event",)
    await agent.prompt("go")
    assert plugin.events[-1] == "agent_end"


def test_an_unknown_hook_without_optionalhook_is_still_refused() -> None:
    class Typo:
        name = "typo"

        @hookimpl
        def on_evnt(self, event: Any) -> None:
            pass

    with pytest.raises(PluginLoadError, match="on_evnt") as caught:
        Agent(model="faux:t", provider=FauxProvider(), plugins=[Typo()], autoload=False)
    assert caught.value.plugin == "typo"
    assert "optionalhook=True" in str(caught.value)


def test_a_late_plugin_with_an_unknown_hook_is_refused_and_not_kept() -> None:
    class Typo:
        name = "late-typo"

        @hookimpl
        def on_evnt(self, event: Any) -> None:
            pass

    agent = Agent(model="faux:t", provider=FauxProvider(), autoload=False)
    with pytest.raises(PluginLoadError, match="on_evnt"):
        agent.plugins.pm.register(Typo(), name="late-typo")
    assert agent.plugins.info("late-typo") is None
    assert agent.plugins.pm.get_plugin("late-typo") is None


# == providers built on first use =======================================================


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=True,
        capture_output=True,
        text=True,
        env={"MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"},
    )
    return done.stdout.strip()


def test_the_local_provider_module_is_imported_only_when_used() -> None:
    out = _fresh(
        """
        import asyncio, sys
        from mainspring import Agent
        agent = Agent(model="faux:t")
        agent.provider.append("hi")
        asyncio.run(agent.prompt("go"))
        print(agent.state.messages[-1].content[0].text,
              "mainspring.providers.local" in sys.modules,
              "mainspring.providers.openai" in sys.modules)
        Agent(model="openai:gpt-x")
        print("mainspring.providers.local" in sys.modules,
              "mainspring.providers.openai" in sys.modules)
        Agent(model="local:smollm2-135m")
        print("mainspring.providers.local" in sys.modules)
        """
    )
    assert out.splitlines() == ["hi False False", "False True", "True"]


def test_a_lazy_provider_reads_like_the_provider_it_stands_for() -> None:
    agent = Agent(model="faux:t", autoload=False)
    faux_provider = agent.providers["faux"]
    assert faux_provider.name == "faux"
    assert "openai" in agent.providers
    openai = agent.providers["openai"]
    assert "built on first use" in repr(openai)
    assert getattr(openai, "base_url", "").startswith("http")
    assert "OpenAIProvider" in repr(openai)
