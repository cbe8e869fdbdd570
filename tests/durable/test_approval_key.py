"""The approval channel is closed to the model: decisions are signed with a key tools
never see.

``mainspring runs approve`` run with the environment the coding tools give their shell
(no ``HOME``, no ``XDG_*``, no ``MAINSPRING_*``), even with the database named, has no
key and is refused (exit 2); a decision signed with a key of the sender's own making is
ignored by the run, which goes on waiting and takes the decision signed with the
workers' key.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mainspring.durable import Runs

PROMPT = "Do the three steps."


def _cli(url: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mainspring", *args, "--database", url],
        capture_output=True,
        text=True,
        timeout=120,
        env={"MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1", **env},
    )


def _tool_shell_environment() -> dict[str, str]:
    """What the coding tools' bash keeps: no home, no data or config directories, no
    mainspring settings."""
    dropped = ("HOME", "XDG_")
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(dropped) and not k.startswith("MAINSPRING_")
    }


def _asked(runs: Runs, run_id: str) -> bool:
    return any(e["type"] == "tool_approval_request" for e in runs.events(run_id))


def test_a_decision_needs_the_workers_approval_key(workers: Any, tmp_path: Path) -> None:
    forged = tmp_path / "forged.key"
    forged.write_text("f" * 64)
    with Runs(workers.url) as runs:
        run_id = runs.submit(PROMPT)
        workers.start("w1", ASK="1")
        workers.wait(lambda: _asked(runs, run_id), 60, "the approval request")
        shell = _tool_shell_environment()
        keyless = _cli(workers.url, "runs", "approve", run_id, "c1", "--allow", env=shell)
        assert keyless.returncode == 2, keyless.stderr
        assert keyless.stderr.startswith("mainspring: error: no approval key location")
        with_forged = {**shell, "MAINSPRING_APPROVAL_KEY_FILE": str(forged)}
        sent = _cli(workers.url, "runs", "approve", run_id, "c1", "--allow",
                    "--reason", "forged", env=with_forged)  # fmt: skip
        assert sent.returncode == 0, sent.stderr  # sent, and ignored by the run
        legit = _cli(workers.url, "runs", "approve", run_id, "c1", "--deny",
                     "--reason", "legit", env=dict(os.environ))  # fmt: skip
        assert legit.returncode == 0, legit.stderr
        outcome = runs.result(run_id, timeout_s=120)
        assert outcome["reason"] == "stop"
        decisions = [e for e in runs.events(run_id) if e["type"] == "tool_decision"]
    assert [(e["decision"], e["reason"]) for e in decisions if e["tool_call_id"] == "c1"] == [
        ("block", "legit")
    ]
    assert "c1 append start" not in (workers.directory / "tools.log").read_text()
