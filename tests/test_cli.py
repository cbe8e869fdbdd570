"""The ``mainspring`` command (run in the test process: :mod:`cli_in_process`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_in_process import run_cli

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
                         name="scripted"),
            FauxProvider([faux.error("the model is down")], name="broken")]

@hookimpl
def register_tools(agent):
    return [shout]
'''


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    (tmp_path / "scripted_plugin.py").write_text(SCRIPTED)
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('nope')\n")
    return tmp_path


def _cli(plugin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), env.get("PYTHONPATH", "")])
    env["MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return run_cli(args, env)


def test_run_streams_text_and_tool_lines(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "run", "say hi", "--plugin", "scripted_plugin", "--model", "scripted:x")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "said HI"
    assert '• shout {"text": "hi"} ok' in done.stderr


def test_run_json_prints_the_event_stream(plugin_dir: Path) -> None:
    done = _cli(
        plugin_dir,
        "run",
        "say hi",
        "--json",
        "--plugin",
        "scripted_plugin",
        "--model",
        "scripted:x",
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    types = [event["type"] for event in events]
    assert types[0] == "agent_start"
    assert types[-1] == "agent_end"
    assert "tool_execution_end" in types
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert events[-1]["reason"] == "stop"


def test_run_ending_in_error_exits_1(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "run", "hi", "--plugin", "scripted_plugin", "--model", "broken:x")
    assert done.returncode == 1
    assert "the model is down" in done.stderr


def test_unknown_provider_exits_2(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "run", "hi", "--model", "nowhere:x")
    assert done.returncode == 2
    assert 'unknown provider "nowhere"' in done.stderr


def test_broken_plugin_exits_2(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "plugins", "--plugin", "broken_plugin")
    assert done.returncode == 2
    assert "nope" in done.stderr


def test_bad_usage_exits_2(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "run")
    assert done.returncode == 2


def test_plugins_json_lists_builtins_and_in_process_plugins(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "plugins", "--json", "--plugin", "scripted_plugin")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["convert_to_llm"]["source"] == "builtin"
    assert rows["convert_to_llm"]["essential"] is True
    assert rows["scripted"]["source"] == "inprocess"
    assert rows["scripted"]["tools"] == ["shout"]
    assert "register_tools" in rows["scripted"]["hooks"]


def test_no_plugin_disables_a_builtin(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "plugins", "--json", "--no-plugin", "max_turns")
    names = [row["name"] for row in json.loads(done.stdout)]
    assert "max_turns" not in names
    assert "convert_to_llm" in names


def test_tools_lists_each_tool_with_its_plugin(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "tools", "--json", "--plugin", "scripted_plugin")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"tool": "shout", "plugin": "scripted", "description": "Upper-case the text."}
    ]


def test_session_records_and_resumes(plugin_dir: Path, tmp_path: Path) -> None:
    session = tmp_path / "run.jsonl"
    args = ["--plugin", "scripted_plugin", "--model", "scripted:x", "--session", str(session)]
    first = _cli(plugin_dir, "run", "say hi", *args)
    assert first.returncode == 0, first.stderr
    lines = session.read_text().splitlines()
    assert json.loads(lines[0])["model"] == "scripted:x"
    assert len(lines) == 1 + 4
    # the scripted provider starts its script again in the new process: the resumed
    # transcript is sent with the new prompt, and the run appends to the same file
    second = _cli(plugin_dir, "run", "again", *args)
    assert second.returncode == 0, second.stderr
    assert len(session.read_text().splitlines()) == 1 + 4 + 4


def test_corrupt_session_exits_2(plugin_dir: Path, tmp_path: Path) -> None:
    session = tmp_path / "bad.jsonl"
    session.write_text("this is not a session\n")
    done = _cli(plugin_dir, "run", "hi", "--session", str(session))
    assert done.returncode == 2
    assert "bad.jsonl:1" in done.stderr


CUT_PLUGIN = """
from mainspring import hookimpl
from mainspring.testing import FauxProvider, faux

name = "cut"

@hookimpl
def register_providers():
    return [FauxProvider([faux.reply(faux.text("Once upon a"), stop_reason="length")], name="cut")]
"""


def test_a_reply_cut_at_the_output_limit_says_so_and_exits_3(plugin_dir: Path) -> None:
    (plugin_dir / "cut_plugin.py").write_text(CUT_PLUGIN)
    done = _cli(plugin_dir, "run", "tell a story", "--plugin", "cut_plugin", "--model", "cut:x")

    assert done.returncode == 3, done.stderr
    assert "Once upon a" in done.stdout
    assert "cut off at the model's output-token limit" in done.stderr


def test_an_empty_model_is_a_usage_error(plugin_dir: Path) -> None:
    done = _cli(plugin_dir, "run", "hi", "--model", "")

    assert done.returncode == 2
    assert "--model is empty" in done.stderr
