"""Gates see the tool object the plugin registered, in a worker as in-process.

A gate that blocks one tool by identity (``if tool is APPEND``, as the plugin template
does) blocks its call under a worker too: the durable wrapping keeps the object.
"""

from __future__ import annotations

from typing import Any

import pytest

from mainspring.durable import Runs


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_gates_see_the_tool_object_the_plugin_registered(workers: Any) -> None:
    with Runs(workers.url) as runs:
        run_id = runs.submit("Do the three steps.")
        workers.start("w1", GATE="1")
        outcome = runs.result(run_id, timeout_s=120)
        decisions = [e for e in runs.events(run_id) if e["type"] == "tool_decision"]
    assert outcome["reason"] == "stop"
    assert [(e["tool_call_id"], e["decision"]) for e in decisions] == [
        ("c0", "allow"),
        ("c1", "block"),
        ("c2", "allow"),
    ]
    assert "c1 append start" not in (workers.directory / "tools.log").read_text()
