"""``mainspring plugins`` / ``tools`` diagnose instead of refusing; ``tools show`` prints what
the model receives; output piped into ``head`` ends quietly; ``@tool`` warns about what
the model would miss."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_in_process import run_cli
from mainspring import tool

TOOLS_A = '''
from mainspring import hookimpl, tool

name = "bundle-a"

@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()

@hookimpl
def register_tools(agent):
    return [shout]
'''

TOOLS_B = TOOLS_A.replace("bundle-a", "bundle-b")

BROKEN = """
from mainspring import hookimpl

name = "broken-bundle"

@hookimpl
def register_tools(agent):
    raise RuntimeError("cannot reach the tool registry")
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "bundle_a.py").write_text(TOOLS_A)
    (tmp_path / "bundle_b.py").write_text(TOOLS_B)
    (tmp_path / "broken_bundle.py").write_text(BROKEN)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env)


def test_tools_lists_what_loads_and_names_every_broken_plugin_and_collision(
    env: dict[str, str],
) -> None:
    done = cli(
        env,
        "tools",
        "--plugin",
        "bundle_a",
        "--plugin",
        "bundle_b",
        "--plugin",
        "broken_bundle",
    )

    assert done.returncode == 2
    assert "broken: broken-bundle:" in done.stderr
    assert "cannot reach the tool registry" in done.stderr
    assert 'two tools are named "shout"' in done.stderr
    assert "shout  [bundle-a]" in done.stdout


def test_plugins_still_lists_with_a_broken_plugin(env: dict[str, str]) -> None:
    done = cli(env, "plugins", "--plugin", "broken_bundle")

    assert done.returncode == 2
    assert "broken: broken-bundle:" in done.stderr
    assert "session_writer" in done.stdout


def test_tools_show_prints_the_description_and_schema_the_model_receives(
    env: dict[str, str],
) -> None:
    done = cli(env, "tools", "show", "shout", "--plugin", "bundle_a")

    assert done.returncode == 0, done.stderr
    assert "Upper-case the text." in done.stdout
    schema = json.loads(done.stdout[done.stdout.index("{") :])
    assert schema["properties"]["text"]["type"] == "string"

    listed = json.loads(cli(env, "tools", "--json", "--schema", "--plugin", "bundle_a").stdout)
    assert listed[0]["parameters"]["required"] == ["text"]
    assert cli(env, "tools", "show", "nope", "--plugin", "bundle_a").returncode == 2


def test_tools_show_prints_effects_and_roles(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "mailer.py").write_text(
        """
from typing import Annotated
from mainspring import hookimpl, tool
from mainspring.effects import Role

name = "mailer"

@tool(effects=("send",))
def send_mail(to: Annotated[str, Role("principal")], body: str) -> str:
    \"\"\"Send a mail.\"\"\"
    return "sent"

@hookimpl
def register_tools(agent):
    return [send_mail]
"""
    )
    shown = cli(env, "tools", "show", "send_mail", "--plugin", "mailer")
    assert shown.returncode == 0, shown.stderr
    assert "effects: send" in shown.stdout
    assert "roles: to=principal" in shown.stdout
    data = json.loads(cli(env, "tools", "show", "send_mail", "--json", "--plugin", "mailer").stdout)
    assert data["effects"] == ["send"]
    assert data["roles"] == {"to": "principal"}


def test_output_piped_into_head_ends_quietly(env: dict[str, str]) -> None:
    done = subprocess.run(
        f"{sys.executable} -m mainspring plugins | head -1",
        shell=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )

    assert done.stdout.strip()
    assert "BrokenPipeError" not in done.stderr
    assert "Traceback" not in done.stderr


def test_tool_warns_about_a_missing_description_and_an_untyped_parameter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring")

    @tool
    def vague(thing):  # type: ignore[no-untyped-def]
        return thing

    events = {record.getMessage() for record in caplog.records}
    assert {"tool_without_description", "tool_parameter_untyped"} <= events
    assert vague.name == "vague"


def test_a_broken_installed_plugin_is_reported_once_without_a_plugin_disabled_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "acme_broken_listing.py").write_text("raise RuntimeError('broken on import')\n")
    info = site / "acme_broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mainspring]\nacme-broken = acme_broken_listing\n")
    env = {**env, "PYTHONPATH": os.pathsep.join([str(site), env["PYTHONPATH"]])}
    env.pop("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD")
    env["MAINSPRING_PLUGINS"] = "acme-broken"

    done = cli(env, "plugins")

    assert done.returncode == 2
    assert "broken: acme-broken:" in done.stderr and "broken on import" in done.stderr
    mentions = [line for line in done.stderr.splitlines() if "acme-broken" in line]
    assert not [line for line in mentions if "plugin disabled" in line], done.stderr
