"""A ``bash`` command cannot read the agent's keys through ``/proc``.

The agent is a real ``mainspring run`` process whose environment holds a (fake) API key.
The model has ``bash`` run a probe that walks up from its own process through every
ancestor it can see, reading ``/proc/<pid>/environ`` and every readable region of
``/proc/<pid>/mem``, and looks for the key, forwards and reversed. Sandboxed, no ancestor
holds it. Without ``unshare`` a warning says commands run unsandboxed.
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mainspring_coding_tools import sandbox
from mainspring_coding_tools.sandbox import sandbox_command

from mainspring import PluginLoadError

PROBE = r"""
import os
key = bytes.fromhex(open("key.hex").read())
needles = (key, key[::-1])
lines = []

def search(data):
    return any(needle in data for needle in needles)

def read_mem(pid):
    found, read = False, 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, OverflowError, ValueError):
                continue
            read += len(data)
            found = found or search(data)
    return found, read

pid = os.getppid()
while pid > 0:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read()
        in_environ = "yes" if search(environ) else "no"
    except OSError as error:
        in_environ = f"unreadable ({error.errno})"
    try:
        found, read = read_mem(pid)
        in_mem = f"{'yes' if found else 'no'} ({read} bytes read)"
    except OSError as error:
        in_mem = f"unreadable ({error.errno})"
    lines.append(f"ancestor {pid}: environ {in_environ}; mem {in_mem}")
    pid = int(fields[1])
open("report.txt", "w").write("\n".join(lines) + "\n")
print("probed", len(lines))
"""

MODEL = """
import sys
from mainspring import hookimpl
from mainspring.testing import FauxProvider, faux

name = "probing-model"

@hookimpl
def register_providers():
    command = sys.executable + " probe.py"
    return [FauxProvider([faux.tool_call("bash", {"command": command}), faux.text("done")],
                         name="scripted")]
"""


def probe_agent(tmp_path: Path, mode: str) -> tuple[str, str]:
    """Run the agent with a fake key; the probe's report and the agent's stderr."""
    key = "sk-proj-" + secrets.token_hex(24)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "probe.py").write_text(PROBE)
    (workspace / "key.hex").write_text(key.encode().hex())
    (tmp_path / "probing_model.py").write_text(MODEL)
    config = tmp_path / "config.toml"
    config.write_text(f'[plugin_options.mainspring-coding-tools]\nbash_sandbox = "{mode}"\n')
    env = {
        **os.environ,
        "OPENAI_API_KEY": key,
        "PYTHONPATH": str(tmp_path),
        "MAINSPRING_CONFIG": str(config),
        "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    # --yes: the command line asks before bash runs, and refuses when stdin is not a terminal
    args = [
        "run",
        "go",
        "--yes",
        "--plugin",
        "mainspring_coding_tools",
        "--plugin",
        "probing_model",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "mainspring", *args, "--model", "scripted:x"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert key not in done.stdout + done.stderr
    return (workspace / "report.txt").read_text(), done.stderr


def namespaces_or_skip() -> None:
    try:
        sandbox_command("namespaces")
    except ValueError as error:
        pytest.skip(str(error))


def test_a_sandboxed_command_finds_no_key_in_any_ancestor(tmp_path: Path) -> None:
    namespaces_or_skip()

    report, _ = probe_agent(tmp_path, "namespaces")

    ancestors = report.splitlines()
    # the first process of the namespace (the supervisor) is the last ancestor it sees
    assert ancestors and ancestors[-1].startswith("ancestor 1:"), report
    assert " yes" not in report, report


@pytest.mark.skipif(os.geteuid() != 0, reason="shows what a root command sees unsandboxed")
def test_unsandboxed_a_command_run_as_root_reads_the_key_the_control(tmp_path: Path) -> None:
    # the probe can find the key: what the sandbox takes away (the agent's dumpable flag
    # is clear, but root holds CAP_SYS_PTRACE)
    report, _ = probe_agent(tmp_path, "off")

    assert "environ yes" in report, report


@pytest.fixture
def without_unshare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The system directories searched for ``unshare`` hold none (one empty directory)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(sandbox, "UNSHARE_DIRS", (str(empty),))
    sandbox.namespaces.cache_clear()
    yield
    sandbox.namespaces.cache_clear()


async def test_without_unshare_a_warning_says_commands_run_unsandboxed(
    coding_call: Any, without_unshare: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring_coding_tools")

    (result,) = await coding_call(("bash", {"command": "echo $$"}))

    assert result.text != "1\n[exit code: 0]"  # not the first process of a namespace
    [warning] = [r.getMessage() for r in caplog.records if r.name == "mainspring_coding_tools"]
    assert "run without their own PID and mount namespace" in warning
    assert "unshare program (util-linux) is not in" in warning


async def test_without_unshare_namespaces_required_refuse_to_load(
    coding_call: Any, without_unshare: None
) -> None:
    with pytest.raises(PluginLoadError, match="bash_sandbox is 'namespaces', but"):
        await coding_call(("bash", {"command": "true"}), bash_sandbox="namespaces")


def test_unshare_is_never_taken_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    # a program a command could leave on the user's PATH: it passes the trial, then runs
    # every command unsandboxed
    trick = 'shift 6\ncase "$*" in *getpid*) echo 1; exit 0;; esac\nexec "$@"\n'
    (fake / "unshare").write_text("#!/bin/sh\n" + trick)
    (fake / "unshare").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    sandbox.namespaces.cache_clear()
    try:
        prefix, _ = sandbox.namespaces()
    finally:
        sandbox.namespaces.cache_clear()

    assert not prefix or not prefix[0].startswith(str(fake))


async def test_a_sandboxed_command_cannot_read_the_agents_data_directory(
    coding_call: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    namespaces_or_skip()
    data = tmp_path / "data"
    (data / "sessions").mkdir(parents=True)
    (data / "approval.key").write_text("0" * 64 + "\n")
    (data / "sessions" / "s.jsonl").write_text('{"type": "session"}\n')
    monkeypatch.setenv("MAINSPRING_DATA_DIR", str(data))
    command = f"ls -A {data}; cat {data}/approval.key; touch {data}/x; echo end"

    (sandboxed,) = await coding_call(("bash", {"command": command}), bash_sandbox="namespaces")

    assert "0" * 64 not in sandboxed.text and "sessions" not in sandboxed.text
    assert "end" in sandboxed.text  # the command ran, and saw an empty directory
    assert not (data / "x").exists()
    (control,) = await coding_call(("bash", {"command": command}), bash_sandbox="off")
    assert "0" * 64 in control.text  # what the sandbox hides
