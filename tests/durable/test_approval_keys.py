"""Approvals are keyed by run, call id and the digest of the call's exact arguments.

A decision sent before its call asks is kept until it asks; a decision for the same call
id with other arguments never decides it (models reuse call ids); a decision is exactly
allow or deny; a call that is not waiting, or a settled run, is refused (exit 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from mainspring.durable import ApprovalRefused, Runs

PROMPT = "Do the three steps."
C1_ARGUMENTS = {"text": "step 1 " + "x" * 40}  # what the scripted model sends as c1


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mainspring", *args, "--database", url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


def test_an_early_decision_is_kept_and_one_for_other_arguments_decides_nothing(
    workers: Any,
) -> None:
    with Runs(workers.url) as runs:
        run_id = runs.submit(PROMPT)
        other = json.dumps({"text": "git push --force"})
        exact = json.dumps(C1_ARGUMENTS)
        for decision, arguments, reason in (
            ("--deny", other, "wrong"),
            ("--allow", exact, "early"),
        ):
            sent = _cli(workers.url, "runs", "approve", run_id, "c1", decision,
                        "--arguments", arguments, "--reason", reason)  # fmt: skip
            assert sent.returncode == 0, sent.stderr
        not_asked = _cli(workers.url, "runs", "approve", run_id, "c2", "--allow")
        assert not_asked.returncode == 2
        assert not_asked.stderr.startswith("mainspring: error: ")
        assert "no call c2 waiting" in not_asked.stderr
        workers.start("w1", ASK="1")
        outcome = runs.result(run_id, timeout_s=120)
        assert outcome["reason"] == "stop"
        decisions = [e for e in runs.events(run_id) if e["type"] == "tool_decision"]
        assert [(e["decision"], e["reason"]) for e in decisions if e["tool_call_id"] == "c1"] == [
            ("allow", "early")
        ]
        with pytest.raises(ApprovalRefused, match="settled"):
            runs.approve(run_id, "c1", "allow")
    assert "c1 append done" in (workers.directory / "tools.log").read_text()
    settled = _cli(workers.url, "runs", "approve", run_id, "c1", "--deny")
    assert settled.returncode == 2
    assert "has settled" in settled.stderr
    unknown = _cli(workers.url, "runs", "approve", "nope", "c1", "--allow")
    assert unknown.returncode == 2


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
@pytest.mark.parametrize("decision", ["false", "true", True, False, "Allow", "", None])
def test_a_decision_is_exactly_allow_or_deny(workers: Any, decision: Any) -> None:
    with Runs(workers.url) as runs:
        run_id = runs.submit(PROMPT)
        with pytest.raises(ValueError, match='"allow" or "deny"'):
            runs.approve(run_id, "c1", decision, arguments=C1_ARGUMENTS)
