"""Plugin loading cannot be silently subverted.

DESIGN §8: two installed distributions declaring one plugin name is a
``PluginLoadError`` naming both, and neither loads; ``required_plugins`` (settings and the
config file, never the environment) names plugins the agent must not start without: one
that is missing, disabled, shadowed or fails stops the agent with a ``PluginLoadError``
saying which, why and how to fix it; every plugin a control turns off is logged at
WARNING, listed in ``agent.plugins.disabled`` and named on one stderr line by
``mainspring run``/``chat``; an unregistered plugin leaves ``agent.plugins`` and
``mainspring plugins``, and a required one cannot be unregistered.

Installed plugins are real distributions: ``*.dist-info`` directories on ``sys.path``
(or ``PYTHONPATH`` for the CLI), found by ``importlib_metadata`` like pip-installed ones.
Each test sees only its own: every other distribution declaring ``mainspring`` entry
points is hidden behind a copy of its ``sys.path`` directory made of symlinks.
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
from typing import Any

import pytest

from mainspring import Agent, PluginLoadError, Settings, hookimpl
from mainspring.settings import load_settings
from mainspring.testing import FauxProvider, faux

ENV_VARS = (
    "MAINSPRING_PLUGINS",
    "MAINSPRING_DISABLE_PLUGINS",
    "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD",
    "MAINSPRING_CONFIG",
)

PLUGIN = '''
"""An installed plugin with one tool; importing it leaves a marker file."""
import pathlib
from mainspring import hookimpl, tool

pathlib.Path({marker!r}).write_text("imported")


@tool
def {tool}(text: str) -> str:
    """Answer."""
    return "{tool}:" + text


@hookimpl
def register_tools(agent):
    return [{tool}]
'''


class Site:
    """A directory of installed distributions."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.token = uuid.uuid4().hex[:8]
        self.modules: list[str] = []

    def install(
        self, dist: str, *, entry_point: str | None = None, source: str | None = None
    ) -> Path:
        """Install ``dist`` declaring ``entry_point`` (default: ``dist``); its marker file."""
        module = f"{dist.replace('-', '_')}_{self.token}"
        marker = self.root / f"{module}.imported"
        code = source or PLUGIN.format(marker=str(marker), tool=module)
        (self.root / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
        info = self.root / f"{dist.replace('-', '_')}-1.0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0.0\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[mainspring]\n{entry_point or dist} = {module}\n", encoding="utf-8"
        )
        (info / "RECORD").write_text("", encoding="utf-8")
        self.modules.append(module)
        importlib.invalidate_caches()
        return marker


def _declares_plugins(info: Path) -> bool:
    try:
        return "[mainspring]" in (info / "entry_points.txt").read_text(encoding="utf-8")
    except OSError:
        return False


def _hide_installed_plugins(paths: list[str], shadows: Path) -> list[str]:
    """``paths`` with each directory holding plugin distributions replaced by a symlink copy
    of it without them."""
    result: list[str] = []
    for index, entry in enumerate(paths):
        directory = Path(entry or ".")
        if not directory.is_dir():
            result.append(entry)
            continue
        hidden = [
            info
            for pattern in ("*.dist-info", "*.egg-info")
            for info in directory.glob(pattern)
            if _declares_plugins(info)
        ]
        if not hidden:
            result.append(entry)
            continue
        shadow = shadows / f"path{index}"
        shadow.mkdir()
        for child in directory.iterdir():
            if child not in hidden:
                (shadow / child.name).symlink_to(child)
        result.append(str(shadow))
    return result


@pytest.fixture(scope="module")
def clean_path(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """``sys.path`` as it is, minus every installed distribution with plugins."""
    return _hide_installed_plugins(list(sys.path), tmp_path_factory.mktemp("shadows"))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_path: list[str]) -> Iterator[Site]:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    root = tmp_path / "site-packages"
    root.mkdir()
    monkeypatch.setattr(sys, "path", [str(root), *clean_path])
    importlib.invalidate_caches()
    installed = Site(root)
    yield installed
    for module in installed.modules:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()


def build(*required: str, **kwargs: Any) -> Agent:
    kwargs.setdefault("provider", FauxProvider([faux.text("hi")]))
    kwargs.setdefault("model", "faux:test")
    if required:
        kwargs["settings"] = Settings(required_plugins=required)
    return Agent(**kwargs)


def refusal(*required: str, **kwargs: Any) -> str:
    with pytest.raises(PluginLoadError) as caught:
        build(*required, **kwargs)
    return str(caught.value)


def listed(agent: Agent) -> list[str]:
    return [info.name for info in agent.plugins.infos]


# == one name, two distributions ========================================================


def test_two_distributions_declaring_one_plugin_name_is_an_error_naming_both(
    site: Site,
) -> None:
    genuine = site.install("acme-pack")
    impostor = site.install("acme-impostor", entry_point="acme-pack")

    with pytest.raises(PluginLoadError) as caught:
        build()

    message = str(caught.value)
    assert caught.value.plugin == "acme-pack"
    assert "acme-pack 1.0.0" in message and "acme-impostor 1.0.0" in message
    assert not genuine.exists() and not impostor.exists()  # neither was imported


def test_names_that_differ_only_in_spelling_are_one_plugin_name(site: Site) -> None:
    site.install("acme-pack")
    site.install("acme-impostor", entry_point="ACME_pack")

    message = refusal()

    assert "acme-pack" in message and "acme-impostor" in message


def test_a_denied_duplicated_name_loads_neither_and_is_no_error(site: Site) -> None:
    genuine = site.install("acme-pack")
    site.install("acme-impostor", entry_point="acme-pack")

    agent = build(disable_plugins=["acme-pack"])

    assert "acme-pack" not in listed(agent)
    assert not genuine.exists()
    off = {(item.name, item.distribution) for item in agent.plugins.disabled}
    assert {("acme-pack", "acme-pack"), ("acme-pack", "acme-impostor")} <= off


# == required plugins ===================================================================


def test_an_installed_required_plugin_lets_the_agent_start(site: Site) -> None:
    site.install("acme-policy")

    agent = build("acme-policy")

    info = agent.plugins.info("acme-policy")
    assert info is not None and info.source == "entrypoint"


def test_a_required_plugin_that_is_not_installed_stops_the_agent(site: Site) -> None:
    message = refusal("acme-policy")

    assert "required plugin 'acme-policy' is not installed" in message
    assert "pip install acme-policy" in message
    assert "required_plugins" in message


@pytest.mark.parametrize(
    ("how", "control", "fix"),
    [
        ("option", "disable_plugins", "remove it from disable_plugins="),
        ("denylist", "MAINSPRING_DISABLE_PLUGINS", "remove it from MAINSPRING_DISABLE_PLUGINS"),
        ("allowlist", "MAINSPRING_PLUGINS", "add it to MAINSPRING_PLUGINS"),
        ("autoload", "autoload=False", "autoload=True"),
        ("autoload-env", "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", "unset"),
    ],
)
def test_a_disabled_required_plugin_stops_the_agent_naming_the_control(
    site: Site, monkeypatch: pytest.MonkeyPatch, how: str, control: str, fix: str
) -> None:
    marker = site.install("acme-policy")
    site.install("acme-other")
    kwargs: dict[str, Any] = {}
    if how == "option":
        kwargs["disable_plugins"] = ["acme-policy"]
    elif how == "denylist":
        monkeypatch.setenv("MAINSPRING_DISABLE_PLUGINS", "acme-policy")
    elif how == "allowlist":
        monkeypatch.setenv("MAINSPRING_PLUGINS", "acme-other")
    elif how == "autoload":
        kwargs["autoload"] = False
    else:
        monkeypatch.setenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", "1")

    message = refusal("acme-policy", **kwargs)

    assert f"required plugin 'acme-policy' is disabled by {control}" in message
    assert fix in message
    assert not marker.exists()


def test_a_disabled_required_builtin_stops_the_agent(site: Site) -> None:
    message = refusal("max_turns", disable_plugins=["max-turns"])

    assert "required plugin 'max_turns' is disabled by disable_plugins" in message


def test_requiring_an_essential_builtin_is_always_met(site: Site) -> None:
    agent = build("convert_to_llm", disable_plugins=["convert_to_llm"], autoload=False)

    assert "convert_to_llm" in listed(agent)


def test_a_required_name_declared_by_another_distribution_is_shadowed(site: Site) -> None:
    impostor = site.install("acme-impostor", entry_point="acme-policy")

    message = refusal("acme-policy")

    assert "required plugin 'acme-policy' is shadowed" in message
    assert "acme-impostor 1.0.0" in message
    assert not impostor.exists()


def test_a_required_name_declared_twice_is_shadowed_naming_both(site: Site) -> None:
    site.install("acme-policy")
    site.install("acme-impostor", entry_point="acme-policy")

    message = refusal("acme-policy")

    assert "required plugin 'acme-policy' is shadowed" in message
    assert "acme-policy 1.0.0" in message and "acme-impostor 1.0.0" in message


def test_an_in_process_plugin_does_not_stand_in_for_a_required_one(site: Site) -> None:
    class StandIn:
        name = "acme-policy"

        @hookimpl
        def on_event(self) -> None:
            pass

    message = refusal("acme-policy", plugins=[StandIn()])

    assert "required plugin 'acme-policy' is not installed" in message
    assert "in-process plugin" in message


def test_a_required_plugin_that_fails_to_load_says_it_is_required(site: Site) -> None:
    site.install("acme-policy", source="raise RuntimeError('policy file missing')\n")

    message = refusal("acme-policy")

    assert "policy file missing" in message
    assert "required_plugins" in message
    assert "pip install --force-reinstall acme-policy" in message
    assert "To start without it" not in message  # disabling would not get it started


def test_every_problem_with_required_plugins_is_reported_at_once(site: Site) -> None:
    message = refusal("acme-policy", "acme-audit", "max_turns", disable_plugins=["max_turns"])

    assert "'acme-policy' is not installed" in message
    assert "'acme-audit' is not installed" in message
    assert "'max_turns' is disabled" in message


def test_required_plugins_come_from_the_config_file_not_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('required_plugins = ["mainspring-policy-pack"]\n')
    env = {
        "MAINSPRING_CONFIG": str(config),
        "MAINSPRING_REQUIRED_PLUGINS": "",
        "MAINSPRING_REQUIRED_PLUGINS_OFF": "1",
    }

    assert load_settings(environ=env).required_plugins == ("mainspring-policy-pack",)
    assert load_settings(environ={"XDG_CONFIG_HOME": str(tmp_path / "none")}).required_plugins == ()


def test_a_required_plugin_cannot_be_unregistered(site: Site) -> None:
    site.install("acme-policy")
    agent = build("acme-policy")

    with pytest.raises(PluginLoadError, match="required"):
        agent.plugins.unregister("acme-policy")
    with pytest.raises(PluginLoadError, match="required"):
        agent.plugins.pm.unregister(name="acme-policy")
    with pytest.raises(PluginLoadError, match="required"):
        agent.plugins.pm.set_blocked("acme-policy")

    assert "acme-policy" in listed(agent)
    assert agent.plugins.pm.get_plugin("acme-policy") is not None


def test_an_essential_builtin_cannot_be_unregistered(site: Site) -> None:
    agent = build(autoload=False)

    with pytest.raises(PluginLoadError, match="essential"):
        agent.plugins.unregister("convert_to_llm")
    with pytest.raises(PluginLoadError, match="essential"):
        agent.plugins.pm.unregister(name="token_estimate")

    assert {"convert_to_llm", "token_estimate"} <= set(listed(agent))


# == turned-off plugins are logged ======================================================


def test_each_plugin_turned_off_is_logged_at_warning_with_its_control(
    site: Site, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring")
    site.install("acme-policy")
    site.install("acme-audit")
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGINS", "acme-policy")

    agent = build(disable_plugins=["acme-audit", "event_log"])

    logged = {
        (record.plugin, record.reason, record.levelno)  # type: ignore[attr-defined]
        for record in caplog.records
        if record.getMessage() == "plugin_disabled"
    }
    assert logged == {
        ("acme-policy", "MAINSPRING_DISABLE_PLUGINS", logging.WARNING),
        ("acme-audit", "disable_plugins", logging.WARNING),
        ("event_log", "disable_plugins", logging.WARNING),
    }
    off = {(item.name, item.source, item.reason) for item in agent.plugins.disabled}
    assert ("acme-policy", "entrypoint", "MAINSPRING_DISABLE_PLUGINS") in off
    assert ("event_log", "builtin", "disable_plugins") in off


def test_plugins_left_out_by_the_allowlist_or_the_autoload_switch_are_logged(
    site: Site, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring")
    site.install("acme-policy")
    monkeypatch.setenv("MAINSPRING_PLUGINS", "")
    build()
    monkeypatch.delenv("MAINSPRING_PLUGINS")
    monkeypatch.setenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", "1")
    build()

    reasons = [
        record.reason  # type: ignore[attr-defined]
        for record in caplog.records
        if record.getMessage() == "plugin_disabled" and record.plugin == "acme-policy"  # type: ignore[attr-defined]
    ]
    assert reasons == ["MAINSPRING_PLUGINS", "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"]


# == unregistering ======================================================================


class Extra:
    name = "extra"

    @hookimpl
    def on_event(self) -> None:
        pass


def test_an_unregistered_plugin_is_no_longer_listed(site: Site) -> None:
    agent = build(plugins=[Extra()], autoload=False)
    changes: list[str] = []
    agent.plugins.on_change(lambda: changes.append("changed"))

    removed = agent.plugins.unregister("extra")

    assert isinstance(removed, Extra)
    assert "extra" not in listed(agent)
    assert agent.plugins.pm.get_plugin("extra") is None
    assert changes == ["changed"]
    with pytest.raises(KeyError):
        agent.plugins.unregister("extra")


def test_unregistering_through_the_manager_also_updates_the_list(site: Site) -> None:
    agent = build(autoload=False)

    agent.plugins.pm.unregister(name="event_log")
    agent.plugins.pm.set_blocked("session_writer")

    assert "event_log" not in listed(agent)
    assert "session_writer" not in listed(agent)


def test_a_plugin_registered_later_is_validated_and_listed(site: Site) -> None:
    agent = build(autoload=False)

    class Bad:
        @hookimpl
        async def register_tools(self, agent: Any) -> list[Any]:
            return []

    agent.plugins.pm.register(Extra(), name="late")
    with pytest.raises(PluginLoadError, match="register_tools"):
        agent.plugins.pm.register(Bad(), name="bad")

    info = agent.plugins.info("late")
    assert info is not None and info.source == "inprocess" and info.hooks == ("on_event",)
    assert "bad" not in listed(agent) and agent.plugins.pm.get_plugin("bad") is None


# == the command line ===================================================================

SCRIPTED = """
from mainspring import hookimpl
from mainspring.testing import FauxProvider, faux

name = "scripted"


@hookimpl
def register_providers():
    return [FauxProvider([faux.text("done")], name="scripted")]
"""

REMOVER = """
from mainspring import hookimpl

name = "remover"


@hookimpl
def register_tools(agent):
    agent.unregister_plugin("event_log")
    return []
"""

REMOVER_GRANT = """
[plugins.remover]
capabilities = ["tools", "register"]
"""


def _cli(
    site: Site, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -S -m mainspring ARGS``: no site-packages but the test's clean path."""
    full = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    full["PYTHONPATH"] = os.pathsep.join(entry for entry in sys.path if entry)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-S", "-m", "mainspring", *args],
        capture_output=True,
        text=True,
        env=full,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def _off_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("mainspring: plugins off:")]


@pytest.mark.parametrize("command", ["run", "chat"])
def test_run_and_chat_name_the_plugins_turned_off_on_one_stderr_line(
    site: Site, command: str
) -> None:
    site.install("acme-policy")
    (site.root / "scripted_plugin.py").write_text(SCRIPTED)
    args = [command, *(["hi"] if command == "run" else []), "--model", "scripted:x"]
    args += ["--plugin", "scripted_plugin", "--no-plugin", "max_turns"]

    done = _cli(site, *args, env={"MAINSPRING_DISABLE_PLUGINS": "acme-policy,event_log"})

    assert _off_lines(done.stderr) == [
        "mainspring: plugins off: max_turns (--no-plugin); "
        "event_log, acme-policy (MAINSPRING_DISABLE_PLUGINS)"
    ], done.stderr


def test_run_names_plugins_kept_out_by_the_autoload_switch(site: Site) -> None:
    site.install("acme-policy")
    (site.root / "scripted_plugin.py").write_text(SCRIPTED)

    done = _cli(
        site,
        *("run", "hi", "--model", "scripted:x", "--plugin", "scripted_plugin"),
        env={"MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )

    [line] = _off_lines(done.stderr)
    assert "acme-policy" in line and line.endswith("(MAINSPRING_DISABLE_PLUGIN_AUTOLOAD)")


def test_a_required_plugin_turned_off_on_the_command_line_exits_2(
    site: Site, tmp_path: Path
) -> None:
    site.install("acme-policy")
    config = tmp_path / "config.toml"
    config.write_text('required_plugins = ["acme-policy"]\n')

    done = _cli(
        site, "run", "hi", "--no-plugin", "acme-policy", env={"MAINSPRING_CONFIG": str(config)}
    )

    assert done.returncode == 2
    assert "required plugin 'acme-policy' is disabled by disable_plugins" in done.stderr


def test_mainspring_plugins_does_not_list_an_unregistered_plugin(site: Site) -> None:
    (site.root / "remover_plugin.py").write_text(REMOVER)
    config = site.root / "config.toml"
    config.write_text(REMOVER_GRANT)

    done = _cli(
        site,
        "plugins",
        "--json",
        "--plugin",
        "remover_plugin",
        env={"MAINSPRING_CONFIG": str(config)},
    )

    assert done.returncode == 0, done.stderr
    names = [row["name"] for row in json.loads(done.stdout)]
    assert "remover" in names and "event_log" not in names
