"""API keys are read once into memory and leave the process environment.

A ``mainspring run`` whose environment holds a (fake) key: a plain Python tool (no
scrubbing of its own) finds the key neither in ``os.environ`` nor in the environment of a
program it starts, the process is not dumpable (``/proc/<pid>/environ`` and ``mem`` refuse
other processes of the user), and a provider built then still has the key.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from mainspring.providers.keys import api_key, forget_api_keys

PLUGIN = '''
import ctypes, json, os, subprocess
from mainspring import hookimpl, tool
from mainspring.providers.openai import OpenAIProvider
from mainspring.testing import FauxProvider, faux

name = "key-hunter"

@tool
def hunt() -> str:
    """Look for the key."""
    key = bytes.fromhex(open("key.hex").read()).decode()
    child = subprocess.run(["env"], capture_output=True, text=True).stdout
    report = {
        "environ": key in json.dumps(dict(os.environ)),
        "child": key in child,
        "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
        "provider_has_key": OpenAIProvider().credentials_problem() is None,
    }
    open("report.json", "w").write(json.dumps(report))
    return "hunted"

@hookimpl
def register_tools(agent):
    return [hunt]

@hookimpl
def register_providers():
    return [FauxProvider([faux.tool_call("hunt", {}), faux.text("done")], name="scripted")]
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_tool_finds_no_key_in_the_environment_and_the_provider_still_has_it(
    tmp_path: Path,
) -> None:
    key = "sk-proj-" + secrets.token_hex(24)
    (tmp_path / "key.hex").write_text(key.encode().hex())
    (tmp_path / "key_hunter.py").write_text(PLUGIN)
    env = {
        **os.environ,
        "OPENAI_API_KEY": key,
        "PYTHONPATH": str(tmp_path),
        "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    args = ["run", "go", "--plugin", "key_hunter", "--model", "scripted:x", "--yes"]
    done = subprocess.run(
        [sys.executable, "-m", "mainspring", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report == {"environ": False, "child": False, "dumpable": 0, "provider_has_key": True}


def test_a_key_is_taken_once_and_a_new_value_replaces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-first")
    assert api_key("OPENAI_API_KEY") == "sk-first"
    assert "OPENAI_API_KEY" not in os.environ
    assert api_key("OPENAI_API_KEY") == "sk-first"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-second")
    assert api_key("OPENAI_API_KEY") == "sk-second"
    forget_api_keys()
    assert api_key("OPENAI_API_KEY") is None
