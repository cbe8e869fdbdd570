"""The pack guarding real tools: mainspring-coding-tools, when it is installed.

The two plugins are independent distributions; this shows them layered in one agent. The
coding tools confine their own paths too; the pack adds the deny rules and the redaction,
and blocks before the tool is even called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mainspring_policy_pack
import pytest

from mainspring import Agent, Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

coding_tools = pytest.importorskip(
    "mainspring_coding_tools",
    reason="needs examples/mainspring-coding-tools: pip install --no-deps -e it",
)


async def test_the_pack_guards_the_coding_tools(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".env").write_text("OPENAI_API_KEY=sk-" + "k" * 40 + "\nDEBUG=1\n")
    provider = FauxProvider(
        [
            [
                faux.tool_call("read", {"path": ".env"}, id="read"),
                faux.tool_call("read", {"path": "../outside.txt"}, id="escape"),
                faux.tool_call("bash", {"command": "sudo cat /etc/shadow"}, id="sudo"),
                faux.tool_call("bash", {"command": "grep -c DEBUG .env"}, id="grep"),
            ],
            faux.text("done"),
        ]
    )
    options = {"workspace": str(workspace)}
    agent = Agent(
        model="faux:test",
        provider=provider,
        plugins=[coding_tools, mainspring_policy_pack],
        autoload=False,
        settings=Settings(
            plugin_options={"mainspring-coding-tools": options, "mainspring-policy-pack": options}
        ),
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("look around")

    check_event_grammar(recorder.events)
    decisions = {d.tool_call_id: (d.decision, d.plugin) for d in recorder.of_type("tool_decision")}
    assert decisions == {
        "read": ("allow", None),
        "escape": ("block", "mainspring-policy-pack"),
        "sudo": ("block", "mainspring-policy-pack"),
        "grep": ("allow", None),
    }
    read, escape, sudo, grep = recorder.messages("tool_result")
    assert read.text == "     1\tOPENAI_API_KEY=[REDACTED:api_key]\n     2\tDEBUG=1"
    assert "climbs out of the workspace" in escape.text
    assert "privilege-escalation" in sudo.text
    assert grep.text == "1\n[exit code: 0]"
    sent: Any = provider.requests[-1].messages
    assert "sk-kkkk" not in repr(sent)
