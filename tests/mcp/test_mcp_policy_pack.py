"""The policy pack gates and redacts MCP tools exactly as native ones."""

from __future__ import annotations

from pathlib import Path

import mainspring_policy_pack
from mcp_helpers import run_agent

from mainspring import Settings
from mainspring.events import ToolExecutionEnd, ToolExecutionUpdate
from mainspring.testing import faux

PACK = "mainspring-policy-pack"


# an MCP server's tools declare no argument roles: the pack's policy file gives them
POLICY = """
[policy.tools.read]
effects = ["read"]
args = {path = "path"}

[policy.tools.secret]
effects = ["read"]

[policy.tools.leaky_progress]
effects = ["read"]
"""


def with_pack(settings: Settings, workspace: Path) -> Settings:
    config = workspace / "policy.toml"
    config.write_text(POLICY)
    options = {"workspace": str(workspace), "config": str(config)}
    return settings.model_copy(update={"plugin_options": {PACK: options}})


async def test_the_sandbox_gate_blocks_an_mcp_tool(shared_server: Settings, tmp_path: Path) -> None:
    run = await run_agent(
        [
            faux.tool_call("read", {"path": "/etc/shadow"}),
            faux.tool_call("read", {"path": "notes.txt"}),
            faux.text("ok"),
        ],
        with_pack(shared_server, tmp_path),
        plugins=[mainspring_policy_pack],
    )
    blocked, allowed = run.recorder.messages("tool_result")
    assert blocked.is_error and "outside the workspace" in blocked.text
    assert allowed.is_error is False and allowed.text == "contents of notes.txt"
    decisions = [(d.tool_name, d.decision) for d in run.recorder.of_type("tool_decision")]
    assert decisions == [("read", "block"), ("read", "allow")]


async def test_results_and_progress_of_an_mcp_tool_are_redacted(
    shared_server: Settings, tmp_path: Path
) -> None:
    run = await run_agent(
        [faux.tool_call("secret", {}), faux.tool_call("leaky_progress", {}), faux.text("ok")],
        with_pack(shared_server, tmp_path),
        plugins=[mainspring_policy_pack],
    )
    secret, _ = run.recorder.messages("tool_result")
    assert "AKIAIOSFODNN7EXAMPLE" not in secret.text and "[REDACTED" in secret.text
    ends = run.recorder.of_type(ToolExecutionEnd)
    assert all("AKIAIOSFODNN7EXAMPLE" not in end.result.text for end in ends)
    (update,) = run.recorder.of_type(ToolExecutionUpdate)
    assert "AKIAIOSFODNN7EXAMPLE" not in str(update.partial_result)
    assert "[REDACTED" in str(update.partial_result)
    # nor did the model see it
    assert "AKIAIOSFODNN7EXAMPLE" not in str(run.provider.requests[-1].messages)
