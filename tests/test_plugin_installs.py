"""A plugin's capabilities are declared once, and a stale editable install is named.

Contract (``docs/capabilities.md``, ``mainspring.loading.installs``,
``mainspring.testing.check_entry_point``): an installed plugin declares its capabilities in
its distribution's metadata; an edit of an editable install's ``pyproject.toml`` that was
not reinstalled makes autoload's error say so, with the command that fixes it; and
``check_entry_point`` refuses exactly what autoload refuses, no more lenient.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mainspring import Agent, PluginLoadError
from mainspring.testing import FauxProvider, check_entry_point

GATE = '''
"""A tool and a gate that refuses every call."""
from mainspring import Block, hookimpl, tool

{declared}

@tool
def ok_{token}() -> str:
    """Answer ok."""
    return "ok"

@hookimpl
def register_tools(agent):
    return [ok_{token}]

@hookimpl
def before_tool_call(tool, args):
    return Block("never")
'''


class Editable:
    """A distribution installed in editable mode (its source directory and its metadata)."""

    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.token = uuid.uuid4().hex[:8]
        self.module = f"{name.replace('-', '_')}_{self.token}"
        self.site = root / "site-packages"
        self.source = root / "source"
        self.site.mkdir()
        self.source.mkdir()

    def write(
        self, installed: tuple[str, ...], edited: tuple[str, ...], declared: str = ""
    ) -> None:
        """Install with manifest ``installed``; then edit pyproject.toml to ``edited``."""
        (self.source / f"{self.module}.py").write_text(
            textwrap.dedent(GATE.format(declared=declared, token=self.token)), encoding="utf-8"
        )
        (self.site / f"{self.module}.pth").write_text(f"{self.source}\n", encoding="utf-8")
        info = self.site / f"{self.name.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {self.name}\nVersion: 0.1\n", encoding="utf-8"
        )
        (info / "direct_url.json").write_text(
            json.dumps({"url": self.source.as_uri(), "dir_info": {"editable": True}})
        )
        manifest = "".join(f"{self.name}.{item} = {self.module}\n" for item in installed)
        (info / "entry_points.txt").write_text(
            f"[mainspring]\n{self.name} = {self.module}\n\n[mainspring.capabilities]\n{manifest}",
            encoding="utf-8",
        )
        capabilities = "".join(f'"{self.name}.{item}" = "{self.module}"\n' for item in edited)
        (self.source / "pyproject.toml").write_text(
            f'[project]\nname = "{self.name}"\nversion = "0.1"\n\n'
            f'[project.entry-points.mainspring]\n"{self.name}" = "{self.module}"\n\n'
            f'[project.entry-points."mainspring.capabilities"]\n{capabilities}',
            encoding="utf-8",
        )
        importlib.invalidate_caches()


@pytest.fixture
def editable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Editable]:
    for var in ("MAINSPRING_DISABLE_PLUGINS", "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(var, raising=False)
    made = Editable(tmp_path, "acme-guard")
    monkeypatch.setenv("MAINSPRING_PLUGINS", made.name)
    monkeypatch.syspath_prepend(str(made.site))
    monkeypatch.syspath_prepend(str(made.source))  # what the .pth file does at start-up
    yield made
    sys.modules.pop(made.module, None)
    importlib.invalidate_caches()


def test_autoload_says_to_reinstall_a_stale_editable_install(editable: Editable) -> None:
    editable.write(installed=("tools",), edited=("tools", "gate"))

    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:t", provider=FauxProvider())

    message = str(caught.value)
    assert "before_tool_call" in message and "'gate'" in message
    assert "stale" in message and f'pip install -e "{editable.source}"' in message
    assert "acme-guard.gate" in message  # what the edit added


def test_a_current_editable_install_gets_no_reinstall_advice(editable: Editable) -> None:
    editable.write(installed=("tools",), edited=("tools",))

    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:t", provider=FauxProvider())

    assert "'gate'" in str(caught.value) and "reinstall" not in str(caught.value)


def test_check_entry_point_refuses_what_autoload_refuses(editable: Editable) -> None:
    # a module attribute that disagrees with the metadata: in-process it would load
    editable.write(("tools", "gate"), ("tools", "gate"), 'CAPABILITIES = ("tools",)')
    with pytest.raises(PluginLoadError, match="differ") as autoload:
        Agent(model="faux:t", provider=FauxProvider())

    with pytest.raises(AssertionError, match="autoload refuses acme-guard") as checked:
        check_entry_point("acme-guard")

    assert str(autoload.value) in str(checked.value)


def test_check_entry_point_says_to_reinstall_a_stale_editable_install(
    editable: Editable,
) -> None:
    editable.write(installed=("tools",), edited=("tools", "gate"))

    with pytest.raises(AssertionError, match="reinstall it: pip install -e"):
        check_entry_point("acme-guard")


def test_check_entry_point_passes_a_plugin_declared_in_its_metadata_only(
    editable: Editable, monkeypatch: pytest.MonkeyPatch
) -> None:
    editable.write(installed=("tools", "gate"), edited=("tools", "gate"))
    # the environment's allowlist does not matter to other installed plugins: they are off
    monkeypatch.delenv("MAINSPRING_PLUGINS")

    loaded = check_entry_point("acme-guard")

    assert list(loaded) == ["acme-guard"]
