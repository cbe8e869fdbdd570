"""Manifests in installed distributions' metadata, and the plugin naming rule.

Contract (``docs/capabilities.md``, ``mainspring.loading.capabilities``): an installed
plugin's distribution may declare its capabilities in the ``mainspring.capabilities``
entry-point group (one ``PLUGIN.CAPABILITY`` entry each), read without importing the
plugin: unknown names refuse it before its import, a hook outside it refuses it, and a
``CAPABILITIES`` attribute that disagrees with it refuses it. ``mainspring plugins`` names a
plugin that fails to import with the capabilities its distribution declares. An operator's
narrowing of a required plugin's gate is refused; of another plugin's gate it is an ERROR.
A plugin passed in-process that an installed entry point names has that entry point's name.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_in_process import run_cli
from mainspring import Agent, PluginLoadError, Settings
from mainspring.testing import FauxProvider, faux

GATE = '''
"""A gate that refuses every call, and a tool to call."""
from mainspring import Block, hookimpl, tool

{manifest}

@tool
def {tool}() -> str:
    """Answer ok."""
    return "ok"

@hookimpl
def register_tools(agent):
    return [{tool}]

@hookimpl
def before_tool_call(tool, args):
    return Block("never")
'''

BROKEN = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
raise RuntimeError("broken on import")
"""


class Site:
    """Installed distributions (``*.dist-info`` and a module each) in a ``sys.path`` dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.token = uuid.uuid4().hex[:8]
        self.modules: list[str] = []

    def install(
        self, dist: str, source: str, manifest: tuple[str, ...] | None, attribute: str = ""
    ) -> str:
        module = f"{dist.replace('-', '_')}_{self.token}"
        self.modules.append(module)
        (self.root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = self.root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8"
        )
        target = f"{module}:{attribute}" if attribute else module
        text = f"[mainspring]\n{dist} = {target}\n"
        if manifest is not None:
            entries = "".join(f"{dist}.{item} = {module}\n" for item in manifest)
            text += f"\n[mainspring.capabilities]\n{entries}"
        (info / "entry_points.txt").write_text(text, encoding="utf-8")
        importlib.invalidate_caches()
        return module

    def gate(self, dist: str, manifest: tuple[str, ...] | None, declared: str = "") -> str:
        tool = f"ok_{self.token}"
        return self.install(dist, GATE.format(manifest=declared, tool=tool), manifest)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    for var in ("MAINSPRING_DISABLE_PLUGINS", "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MAINSPRING_PLUGINS", "acme-gate,acme-broken,acme-object")
    root = tmp_path / "site-packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    installed = Site(root)
    yield installed
    for module in installed.modules:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()


def build(settings: Settings | None = None) -> Agent:
    return Agent(model="faux:t", provider=FauxProvider([faux.text("hi")]), settings=settings)


def test_the_distributions_manifest_is_the_plugins_manifest(site: Site) -> None:
    site.gate("acme-gate", ("tools", "gate"))

    info = build().plugins.info("acme-gate")

    assert info is not None and info.declared == frozenset({"tools", "gate"})


def test_a_hook_outside_the_distributions_manifest_is_a_load_error(site: Site) -> None:
    site.gate("acme-gate", ("tools",))

    with pytest.raises(PluginLoadError) as caught:
        build()

    message = str(caught.value)
    assert "'acme-gate'" in message and "before_tool_call" in message and "'gate'" in message
    assert "--no-plugin acme-gate" in message


def test_an_unknown_capability_is_refused_before_the_plugin_is_imported(site: Site) -> None:
    marker = site.root / "imported"
    site.install("acme-broken", BROKEN.format(marker=str(marker)), ("tools", "telepathy"))

    with pytest.raises(PluginLoadError, match="telepathy"):
        build()

    assert not marker.exists()


def test_a_module_manifest_that_differs_from_the_distributions_is_a_load_error(
    site: Site,
) -> None:
    site.gate(
        "acme-gate", ("tools", "gate"), declared='CAPABILITIES = ("tools", "gate", "observe")'
    )

    with pytest.raises(PluginLoadError, match="differ"):
        build()


def test_narrowing_a_required_plugins_gate_is_refused(site: Site) -> None:
    site.gate("acme-gate", ("tools", "gate"))
    settings = Settings.model_validate(
        {"required_plugins": ["acme-gate"], "plugins": {"acme-gate": {"capabilities": ["tools"]}}}
    )

    with pytest.raises(PluginLoadError, match="required_plugins") as caught:
        build(settings)

    assert "'gate'" in str(caught.value)


async def test_narrowing_a_gate_away_is_an_error_in_the_log_and_the_gate_never_runs(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.gate("acme-gate", ("tools", "gate"))
    # the grant's name is compared the way plugin names are
    settings = Settings.model_validate({"plugins": {"Acme_Gate": {"capabilities": ["tools"]}}})
    tool = f"ok_{site.token}"
    agent = Agent(
        model="faux:t",
        provider=FauxProvider([faux.tool_call(tool, {}), faux.text("done")]),
        settings=settings,
    )
    decisions: list[str] = []
    agent.subscribe(lambda event, signal: decisions.append(getattr(event, "decision", "")))

    await agent.prompt("go")

    assert "block" not in decisions
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any("plugin_protection_off" in r.getMessage() for r in errors)


OBJECT = """
from mainspring import hookimpl

class Plugin:
    @hookimpl
    def on_event(self, event):
        pass

plugin = Plugin()
"""


def test_an_in_process_plugin_an_entry_point_names_has_its_name(site: Site) -> None:
    module = site.install("acme-object", OBJECT, None, attribute="plugin")
    imported = importlib.import_module(module)

    agent = Agent(
        model="faux:t", provider=FauxProvider(), autoload=False, plugins=[imported.plugin]
    )

    assert agent.plugins.infos[-1].name == "acme-object"
    assert agent.plugins.infos[-1].source == "inprocess"


def test_plugins_names_a_broken_plugin_with_its_declared_capabilities(site: Site) -> None:
    marker = site.root / "imported"
    site.install("acme-broken", BROKEN.format(marker=str(marker)), ("tools", "observe"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site.root), *sys.path]))
    env["MAINSPRING_PLUGINS"] = "acme-broken"

    def plugins(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(["plugins", *args], env)

    done = plugins()
    assert done.returncode == 2
    assert "broken: acme-broken:" in done.stderr and "broken on import" in done.stderr
    assert "declared capabilities: observe, tools" in done.stderr
    assert "--no-plugin acme-broken" in done.stderr
    assert "session_writer" in done.stdout

    rows = {row["name"]: row for row in json.loads(plugins("--json").stdout)}
    broken = rows["acme-broken"]
    assert "broken on import" in broken["error"]
    assert broken["capabilities"]["declared"] == ["observe", "tools"]
    assert rows["session_writer"]["error"] is None


def test_another_distribution_cannot_widen_a_plugins_manifest(site: Site) -> None:
    site.gate("acme-gate", ("tools",))  # its own manifest leaves out the gate it implements
    widener = site.root / "acme_widener-1.0.dist-info"
    widener.mkdir()
    (widener / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-widener\nVersion: 1.0\n", encoding="utf-8"
    )
    (widener / "entry_points.txt").write_text(
        "[mainspring.capabilities]\nacme-gate.gate = os\nacme-gate.observe = os\n",
        encoding="utf-8",
    )
    importlib.invalidate_caches()

    with pytest.raises(PluginLoadError) as caught:
        build()  # the widening entries are ignored: the gate is still undeclared

    message = str(caught.value)
    assert "'acme-gate'" in message and "before_tool_call" in message and "'gate'" in message
