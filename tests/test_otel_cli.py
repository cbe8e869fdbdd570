"""``mainspring run --trace`` and tracing configured by ``OTEL_*`` variables in the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTED = '''
from mainspring import hookimpl, tool
from mainspring.testing import FauxProvider, faux

@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()

name = "scripted"

@hookimpl
def register_providers():
    return [FauxProvider([faux.tool_call("shout", {"text": "hi"}), faux.text("said HI")],
                         name="scripted")]

@hookimpl
def register_tools(agent):
    return [shout]
'''


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    (tmp_path / "scripted_plugin.py").write_text(SCRIPTED)
    (tmp_path / "config.toml").write_text("")  # not the user's configuration
    return tmp_path


def _run(plugin_dir: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["MAINSPRING_CONFIG"] = str(plugin_dir / "config.toml")
    env.update(environ)
    command = ["run", "say hi", "--plugin", "scripted_plugin", "--model", "scripted:x", *args]
    return subprocess.run(
        [sys.executable, "-m", "mainspring", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_trace_prints_the_span_tree_on_stderr(plugin_dir: Path) -> None:
    done = _run(plugin_dir, "--trace")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("trace "))
    tree = lines[start + 1 :]
    assert tree[0].startswith("invoke_agent  ") and tree[0].endswith("stop")
    assert tree[1].startswith("├─ chat x  ") and "tool_use" in tree[1] and "tokens " in tree[1]
    assert tree[2].startswith("├─ execute_tool shout  ")
    assert tree[3].startswith("└─ chat x  ") and tree[3].endswith("stop")
    assert len(tree) == 4
    assert "said HI" in done.stdout


def test_without_trace_nothing_is_printed(plugin_dir: Path) -> None:
    done = _run(plugin_dir)
    assert done.returncode == 0, done.stderr
    assert "invoke_agent" not in done.stderr + done.stdout


def test_otel_variables_turn_tracing_on_with_the_exporter_they_name(plugin_dir: Path) -> None:
    done = _run(plugin_dir, OTEL_TRACES_EXPORTER="console")
    assert done.returncode == 0, done.stderr
    for name in ('"invoke_agent"', '"chat x"', '"execute_tool shout"'):
        assert name in done.stdout  # the SDK's console exporter writes JSON to stdout


def test_an_exporter_that_is_not_installed_is_a_usage_error(plugin_dir: Path) -> None:
    done = _run(plugin_dir, OTEL_TRACES_EXPORTER="nowhere")
    assert done.returncode == 2
    assert "'nowhere', which is not installed" in done.stderr
