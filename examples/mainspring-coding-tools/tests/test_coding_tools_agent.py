"""The plugin in an agent: registration, the workspace setting, parallel edits, a full run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import importlib_metadata
import mainspring_coding_tools
import pytest

from mainspring import Agent, ModelRequest, PluginLoadError, Settings, ToolResultMessage
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

PLUGIN = "mainspring-coding-tools"


def _agent(**kwargs: Any) -> Agent:
    return Agent(
        model="faux:test",
        provider=FauxProvider([]),
        plugins=[mainspring_coding_tools],
        autoload=False,
        **kwargs,
    )


# -- registration and configuration ------------------------------------------------------


def test_the_plugin_registers_six_tools_under_its_name(coding_ws: Path) -> None:
    agent = _agent(settings=Settings(plugin_options={PLUGIN: {"workspace": str(coding_ws)}}))

    assert [tool.name for tool in agent.state.tools] == list(mainspring_coding_tools.TOOL_NAMES)
    assert set(agent.tool_owners.values()) == {PLUGIN}
    info = agent.plugins.info(PLUGIN)
    assert info is not None and info.hooks == ("register_tools",)


async def test_the_workspace_comes_from_the_environment(
    coding_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_WORKSPACE", str(coding_ws))
    (coding_ws / "here.txt").write_text("from env\n")
    provider = FauxProvider([faux.tool_call("read", {"path": "here.txt"}), faux.text("ok")])
    agent = Agent(
        model="faux:test", provider=provider, plugins=[mainspring_coding_tools], autoload=False
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("read it")

    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.text == "     1\tfrom env"


def test_the_option_wins_over_the_environment_and_the_cwd_is_the_default(
    coding_ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("MAINSPRING_WORKSPACE", str(other))
    options = mainspring_coding_tools.parse_options({"workspace": str(coding_ws)})
    assert options.workspace_root() == str(coding_ws)

    monkeypatch.delenv("MAINSPRING_WORKSPACE")
    monkeypatch.chdir(other)
    assert mainspring_coding_tools.parse_options({}).workspace_root() == str(other)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workspace": "/does/not/exist"}, "is not an existing directory"),
        ({"bash_timeout_s": -1}, "bash_timeout_s"),
        ({"bash_timeout": 5}, "bash_timeout: Extra inputs are not permitted"),
    ],
)
def test_bad_options_stop_the_agent_from_starting(options: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginLoadError, match=message) as caught:
        _agent(settings=Settings(plugin_options={PLUGIN: options}))

    assert caught.value.plugin == PLUGIN


def test_build_tools_works_without_the_plugin(coding_ws: Path) -> None:
    tools = mainspring_coding_tools.build_tools(coding_ws)
    agent = Agent(model="faux:test", provider=FauxProvider([]), tools=tools, autoload=False)

    assert agent.tool_owners == {name: "tools=" for name in mainspring_coding_tools.TOOL_NAMES}


# -- concurrency ----------------------------------------------------------------------------


async def test_parallel_edits_of_one_file_all_land(coding_ws: Path, coding_run: Any) -> None:
    markers = [f"MARKER_{n}" for n in range(8)]
    (coding_ws / "shared.txt").write_text("".join(f"{marker}\n" for marker in markers))
    one_turn = [
        faux.tool_call("edit", {"path": "shared.txt", "old_text": m, "new_text": f"done {m}"})
        for m in markers
    ]

    run = await coding_run([one_turn, faux.text("all edited")])

    assert [result.is_error for result in run.results] == [False] * len(markers)
    assert (coding_ws / "shared.txt").read_text() == "".join(f"done {m}\n" for m in markers)
    # one batch: every call started before any of them ended
    types = [e.type for e in run.recorder.events if e.type.startswith("tool_execution")]
    assert types[: len(markers)] == ["tool_execution_start"] * len(markers)


async def test_calls_on_one_file_take_effect_in_call_order(
    coding_ws: Path, coding_call: Any
) -> None:
    (coding_ws / "a.txt").write_text("old\n")

    before, written, after = await coding_call(
        ("read", {"path": "a.txt"}),
        ("write", {"path": "a.txt", "content": "new\n"}),
        ("read", {"path": "a.txt"}),
    )

    assert before.text == "     1\told"
    assert not written.is_error
    assert after.text == "     1\tnew"


# -- a full run ---------------------------------------------------------------------------


def _latest_result(request: ModelRequest) -> ToolResultMessage:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    return results[-1]


async def test_a_model_reads_then_edits_a_file(coding_ws: Path, coding_run: Any) -> None:
    (coding_ws / "greet.py").write_text('def greet():\n    return "helo"\n')

    def fix_the_typo(request: ModelRequest) -> Any:
        seen = _latest_result(request).text
        assert '     2\t    return "helo"' in seen  # the model read the numbered file
        return faux.tool_call(
            "edit", {"path": "greet.py", "old_text": '"helo"', "new_text": '"hello"'}
        )

    def report(request: ModelRequest) -> Any:
        return faux.text(f"Fixed. The tool said: {_latest_result(request).text}")

    run = await coding_run(
        [faux.tool_call("read", {"path": "greet.py"}), fix_the_typo, report],
        prompt="Fix the typo in greet.py",
    )

    assert (coding_ws / "greet.py").read_text() == 'def greet():\n    return "hello"\n'
    assert [result.tool_name for result in run.results] == ["read", "edit"]
    final = run.recorder.messages("assistant")[-1]
    assert (
        final.text
        == "Fixed. The tool said: Edited greet.py: replaced 1 line(s) at line 2 with 1 line(s)"
    )
    (end,) = run.recorder.of_type("agent_end")
    assert end.reason == "stop"
    # the model was offered all six tools, with their JSON schemas
    first_request = run.provider.requests[0]
    assert [spec.name for spec in first_request.tools] == list(mainspring_coding_tools.TOOL_NAMES)
    edit_spec = next(spec for spec in first_request.tools if spec.name == "edit")
    assert edit_spec.parameters["required"] == ["path", "old_text", "new_text"]
    json.dumps(edit_spec.parameters)


# -- installed through the entry point ------------------------------------------------------

try:
    INSTALLED = importlib_metadata.distribution(PLUGIN).version
except importlib_metadata.PackageNotFoundError:
    INSTALLED = None


@pytest.mark.skipif(
    INSTALLED is None,
    reason=f"{PLUGIN} is not installed; run: .venv/bin/pip install --no-deps -e examples/{PLUGIN}",
)
def test_the_installed_plugin_loads_through_its_entry_point(
    coding_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("MAINSPRING_DISABLE_PLUGINS", raising=False)
    monkeypatch.setenv("MAINSPRING_PLUGINS", PLUGIN)  # only this installed plugin
    settings = Settings(plugin_options={PLUGIN: {"workspace": str(coding_ws)}})

    agent = Agent(model="faux:test", provider=FauxProvider([]), settings=settings)

    info = agent.plugins.info(PLUGIN)
    assert info is not None
    assert (info.source, info.distribution, info.version) == ("entrypoint", PLUGIN, INSTALLED)
    assert agent.tool_owners["bash"] == PLUGIN
