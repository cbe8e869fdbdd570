"""The pack decides by what tools declare, never by names: an MCP-filesystem-like server's
tools (which declare no roles) are sandboxed once the policy file gives their arguments
roles; a tool that declares no effect is asked about; bad words in the file are errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mainspring_policy_pack
import pytest

from mainspring import Agent, PluginLoadError, Settings, Tool
from mainspring.effects import effects_from_hints
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

PLUGIN = "mainspring-policy-pack"

FILESYSTEM_ROLES = """
[policy.tools.read_multiple_files]
args = {paths = "paths"}

[policy.tools.move_file]
args = {source = "path", destination = "path"}
"""


def _filesystem(executed: list[tuple[str, dict[str, Any]]]) -> list[Tool]:
    """Tools shaped like the MCP filesystem server's: JSON-Schema parameters, effects from
    their annotations, no roles."""

    def runner(name: str) -> Any:
        def execute(args: dict[str, Any], ctx: Any) -> str:
            executed.append((name, dict(args)))
            return "ok"

        return execute

    strings = {"type": "array", "items": {"type": "string"}}
    return [
        Tool(
            "read_multiple_files",
            "Read several files.",
            {"type": "object", "properties": {"paths": strings}, "required": ["paths"]},
            runner("read_multiple_files"),
            effects=effects_from_hints(read_only=True),
        ),
        Tool(
            "move_file",
            "Move a file.",
            {
                "type": "object",
                "properties": {"source": {"type": "string"}, "destination": {"type": "string"}},
                "required": ["source", "destination"],
            },
            runner("move_file"),
            effects=effects_from_hints(read_only=False, destructive=False),
        ),
    ]


async def _run(
    workspace: Path, steps: list[Any], config: Path | None
) -> tuple[EventRecorder, list[tuple[str, dict[str, Any]]]]:
    executed: list[tuple[str, dict[str, Any]]] = []
    options: dict[str, Any] = {"workspace": str(workspace)}
    if config is not None:
        options["config"] = str(config)
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        tools=_filesystem(executed),
        plugins=[mainspring_policy_pack],
        autoload=False,
        settings=Settings(plugin_options={PLUGIN: options}),
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("tidy the workspace")
    check_event_grammar(recorder.events)
    return recorder, executed


async def test_an_mcp_filesystem_servers_paths_stay_in_the_workspace(
    policy_world: Any, policy_file: Any
) -> None:
    ws, outside = policy_world.workspace, policy_world.outside
    steps = [
        [
            faux.tool_call(
                "read_multiple_files", {"paths": ["a.txt", str(outside / "secret.txt")]}, id="r1"
            ),
            faux.tool_call(
                "move_file",
                {"source": str(outside / "secret.txt"), "destination": "stolen.txt"},
                id="m1",
            ),
            faux.tool_call("move_file", {"source": "a.txt", "destination": "sub/a.txt"}, id="m2"),
            faux.tool_call("read_multiple_files", {"paths": ["a.txt", "sub/a.txt"]}, id="r2"),
        ],
        faux.text("done"),
    ]

    recorder, executed = await _run(ws, steps, policy_file(FILESYSTEM_ROLES))

    decisions = {d.tool_call_id: d for d in recorder.of_type("tool_decision")}
    assert decisions["r1"].decision == "block"
    assert "path argument 'paths'" in decisions["r1"].reason
    assert decisions["m1"].decision == "block"
    assert "path argument 'source'" in decisions["m1"].reason
    assert (decisions["m2"].decision, decisions["r2"].decision) == ("allow", "allow")
    assert [call for call, _ in executed] == ["move_file", "read_multiple_files"]
    assert (outside / "secret.txt").exists()


async def test_a_tool_that_declares_no_effect_is_asked_about(policy_world: Any) -> None:
    steps = [faux.tool_call("mystery", {}, id="c1"), faux.text("done")]
    ran: list[str] = []
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        tools=[Tool("mystery", "?", {"type": "object"}, lambda a, c: ran.append("x"))],
        plugins=[mainspring_policy_pack],
        autoload=False,
        settings=Settings(plugin_options={PLUGIN: {"workspace": str(policy_world.workspace)}}),
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("go")

    (request,) = recorder.of_type("tool_approval_request")
    assert "'mystery' declares no effect" in request.reason
    assert ran == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[policy.tools.move_file]\nargs = {source = "file"}\n', ["move_file", "'file'"]),
        ('[policy.tools.upload]\neffects = ["upload"]\n', ["upload", "'upload'"]),
        ('[policy]\nflow_roles = ["recipient"]\n', ["flow_roles", "recipient"]),
        ('[sandbox]\npath_arguments = ["paths"]\n', ["path_arguments", "roles"]),
        ('[shell]\ntools = ["sh"]\n', ["shell.tools", "effects"]),
    ],
)
def test_a_bad_word_in_the_file_stops_the_agent_naming_it(
    policy_world: Any, policy_file: Any, text: str, words: list[str]
) -> None:
    options = {"workspace": str(policy_world.workspace), "config": str(policy_file(text))}
    with pytest.raises(PluginLoadError) as raised:
        Agent(
            model="faux:test",
            provider=FauxProvider([]),
            plugins=[mainspring_policy_pack],
            autoload=False,
            settings=Settings(plugin_options={PLUGIN: options}),
        )
    for word in words:
        assert word in str(raised.value)


async def test_the_file_labels_results_of_tools_the_pack_does_not_own(
    policy_world: Any, policy_file: Any
) -> None:
    config = policy_file(
        FILESYSTEM_ROLES
        + 'results = {integrity = "untrusted", sources = ["files written by others"]}\n'
    )
    steps = [
        faux.tool_call("move_file", {"source": "a.txt", "destination": "b.txt"}),
        faux.text("ok"),
    ]

    recorder, _ = await _run(policy_world.workspace, steps, config)

    (message,) = recorder.messages("tool_result")
    assert message.labels is not None and message.labels.untrusted
    assert message.labels.sources == ("files written by others",)


def test_the_policy_guide_s_configuration_loads(policy_world: Any, tmp_path: Path) -> None:
    import re

    page = (Path(__file__).resolve().parents[3] / "docs" / "policy.md").read_text("utf-8")
    (block,) = re.findall(r"```toml\n(.*?)```", page, re.S)
    path = tmp_path / "guide.toml"
    path.write_text(block)

    policy = mainspring_policy_pack.load_policy(
        {"config": str(path), "workspace": str(policy_world.workspace)}
    )

    assert policy.untrusted_flow == "block"
    assert dict(policy.tools["move_file"].roles) == {"source": "path", "destination": "path"}
    labels = policy.tools["fetch"].results
    assert labels is not None and labels.untrusted
