"""mainspring-summary-compaction on the FauxProvider.

One scripted provider serves the summary request and the agent's own requests, in
order: a run that compacts before its first request is scripted ``[summary, reply]``.
"""

from __future__ import annotations

import importlib.metadata
import logging
from typing import Any

import pytest
from mainspring import (
    Agent,
    AssistantMessage,
    CompactionSummary,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mainspring.invariants import transcript_problem
from mainspring.settings import CompactionSettings, Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

import mainspring_summary_compaction as plugin

SMALL_MODEL = Model(provider="faux", id="t", context_window=2_000)
PROMPT = "new question"

SUMMARY = """\
## Goal
Ship the parser fix.

## Progress
- Read src/parser.py; the tokenizer drops trailing commas.

## Decisions
- Patch the tokenizer, not the grammar.

## Next steps
- Write the regression test.

## Files touched
- src/parser.py: read"""


def assistant(*content: Any, stop_reason: str = "stop") -> AssistantMessage:
    return AssistantMessage(
        content=tuple(content), provider="faux", model="t", stop_reason=stop_reason
    )


def long_history(exchanges: int = 12) -> list[Any]:
    """About 2_100 estimated tokens, above the 1_500-token threshold of ``SMALL_MODEL``."""
    messages: list[Any] = []
    for index in range(exchanges):
        messages.append(UserMessage(content=f"question {index} " + "q" * 300))
        if index % 3 == 0:
            call_id = f"read{index}"
            messages += [
                assistant(
                    ToolCall(id=call_id, name="read", arguments={"path": f"src/file{index}.py"}),
                    stop_reason="tool_use",
                ),
                ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name="read",
                    content=(TextContent(text="print('hi')\n" * 5),),
                    is_error=False,
                ),
            ]
        messages.append(assistant(TextContent(text=f"answer {index} " + "a" * 300)))
    return messages


def text_of(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(getattr(block, "text", "") for block in content)


async def run(
    steps: list[Any],
    *,
    messages: list[Any] | None = None,
    model: Model | str = SMALL_MODEL,
    settings: Settings | None = None,
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps)
    agent = Agent(
        model=model,
        provider=provider,
        messages=long_history() if messages is None else messages,
        plugins=[plugin],
        autoload=False,
        settings=settings,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt(PROMPT)
    check_event_grammar(recorder.events)
    return agent, recorder, provider


async def test_the_model_summary_becomes_the_compaction_summary() -> None:
    history = long_history()
    settings = Settings(plugin_options={plugin.NAME: {"max_input_chars": 100_000}})
    agent, recorder, provider = await run(
        [faux.text(SUMMARY), faux.text("done")], messages=history, settings=settings
    )

    # request 1: the summary, asked of the run's model with the dropped messages
    summary_request, agent_request = provider.requests
    assert summary_request.system_prompt == plugin.SYSTEM_PROMPT
    assert summary_request.model == SMALL_MODEL
    assert summary_request.tools == ()
    [asked] = summary_request.messages
    assert isinstance(asked, UserMessage)
    assert "[user] question 0 " in text_of(asked)
    assert '-> tool call read({"path": "src/file0.py"})' in text_of(asked)
    assert PROMPT not in text_of(asked)  # the kept tail is not summarised

    # the transcript: the marker with the model's summary, then the kept tail
    messages = agent.state.messages
    marker = messages[0]
    assert isinstance(marker, CompactionSummary)
    assert "Ship the parser fix." in marker.summary
    assert "Patch the tokenizer, not the grammar." in marker.summary
    headings = [line for line in marker.summary.splitlines() if line.startswith("## ")]
    assert headings == [f"## {section}" for section in plugin.SECTIONS]
    kept = len(messages) - 2
    assert marker.removed == len(history) + 1 - kept
    assert marker.tokens_before > 1_500
    assert marker.details["plugin"] == plugin.NAME
    assert "src/file0.py" in marker.details["files"]
    assert transcript_problem(messages) is None
    assert text_of(messages[-1]) == "done"

    # request 2: the agent's, with the summary rendered first
    assert "Ship the parser fix." in text_of(agent_request.messages[0])
    assert text_of(agent_request.messages[-1]) == PROMPT
    assert transcript_problem(agent_request.messages, llm_only=True) is None

    # the summary request is not part of the event stream
    [end] = recorder.of_type("compaction_end")
    assert end.error is None
    assert end.tokens_after < end.tokens_before
    assert recorder.of_type("hook_error") == []
    assert [text_of(m) for m in recorder.messages("assistant")] == ["done"]


async def test_missing_sections_are_added_and_files_are_listed() -> None:
    agent, _, _ = await run([faux.text("We fixed things and read some files."), "done"])
    summary = agent.state.messages[0].summary
    sections = summary.split("## ")[1:]
    assert [s.splitlines()[0] for s in sections] == list(plugin.SECTIONS)
    progress = sections[1]
    assert "We fixed things and read some files." in progress
    assert "- (none)" in sections[0]  # Goal
    files = sections[4]
    assert "- src/file0.py" in files
    assert "- (none)" not in files


async def test_a_failed_summary_falls_back_to_the_builtin(caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring_summary_compaction")
    agent, recorder, provider = await run([faux.error("summariser overloaded"), "done"])
    marker = agent.state.messages[0]
    assert isinstance(marker, CompactionSummary)
    assert "no summary is available" in marker.summary  # the built-in's marker
    assert recorder.of_type("hook_error") == []
    assert recorder.of_type("compaction_end")[0].error is None
    assert len(provider.requests) == 2
    assert text_of(agent.state.messages[-1]) == "done"
    assert "summariser overloaded" in caplog.text


@pytest.mark.parametrize(
    "step",
    [faux.text(""), faux.cut("## Goal\nhal"), faux.reply("x", stop_reason="error")],
    ids=["empty", "cut", "stop-error"],
)
async def test_an_unusable_answer_falls_back_to_the_builtin(step: Any) -> None:
    agent, recorder, _ = await run([step, "done"])
    assert "no summary is available" in agent.state.messages[0].summary
    assert recorder.of_type("hook_error") == []


async def test_no_provider_for_the_model_falls_back_to_the_builtin() -> None:
    # the run's provider is the override; the model names a provider nobody registered
    model = Model(provider="elsewhere", id="t", context_window=2_000)
    agent, _, provider = await run(["done"], model=model)
    assert "no summary is available" in agent.state.messages[0].summary
    assert len(provider.requests) == 1


async def test_an_earlier_summary_is_merged_and_its_counts_carry_over() -> None:
    earlier = CompactionSummary(
        summary="## Goal\nOLD GOAL",
        removed=30,
        details={"plugin": plugin.NAME, "files": ["docs/old.md"]},
    )
    history = [earlier, *long_history()]
    agent, _, provider = await run([faux.text(SUMMARY), "done"], messages=history)
    asked = text_of(provider.requests[0].messages[0])
    assert "<earlier-summary>\n## Goal\nOLD GOAL" in asked
    marker = agent.state.messages[0]
    assert sum(isinstance(m, CompactionSummary) for m in agent.state.messages) == 1
    kept = len(agent.state.messages) - 2
    assert marker.removed == 30 + len(history) - 1 + 1 - kept
    assert "- docs/old.md" in marker.summary
    assert marker.details["files"][0] == "docs/old.md"


async def test_an_overflow_is_summarised_too() -> None:
    overflow = faux.error("prompt is too long", context_overflow=True)
    history = long_history(3)
    agent, recorder, provider = await run(
        [overflow, faux.text(SUMMARY), "fits now"], messages=history, model="faux:big"
    )
    assert [e.reason for e in recorder.of_type("compaction_start")] == ["overflow"]
    assert len(provider.requests) == 3
    assert provider.requests[1].system_prompt == plugin.SYSTEM_PROMPT
    assert "Ship the parser fix." in agent.state.messages[0].summary
    assert "Ship the parser fix." in text_of(provider.requests[2].messages[0])
    assert text_of(agent.state.messages[-1]) == "fits now"


async def test_tool_pairs_are_never_split() -> None:
    # every exchange has a tool call: a cut in the wrong place would orphan a result
    history: list[Any] = []
    for index in range(10):
        call_id = f"c{index}"
        history += [
            UserMessage(content=f"step {index} " + "s" * 200),
            assistant(
                ToolCall(id=call_id, name="read", arguments={"path": f"f{index}"}),
                stop_reason="tool_use",
            ),
            ToolResultMessage(
                tool_call_id=call_id,
                tool_name="read",
                content=(TextContent(text="r" * 400),),
                is_error=False,
            ),
            assistant(TextContent(text="ok " + "o" * 100)),
        ]
    agent, recorder, provider = await run([faux.text(SUMMARY), "done"], messages=history)
    assert recorder.of_type("hook_error") == []
    assert transcript_problem(agent.state.messages) is None
    assert not isinstance(agent.state.messages[1], ToolResultMessage)
    assert transcript_problem(provider.requests[1].messages, llm_only=True) is None


async def test_options_limit_what_is_sent_and_kept() -> None:
    settings = Settings(
        plugin_options={
            plugin.NAME: {"max_message_chars": 40, "max_input_chars": 600, "max_summary_chars": 30}
        }
    )
    agent, _, provider = await run([faux.text("x" * 500), "done"], settings=settings)
    asked = text_of(provider.requests[0].messages[0])
    assert "more characters]" in asked
    assert "earlier messages left out ..." in asked
    transcript = asked.split("<transcript>\n", 1)[1].split("\n</transcript>", 1)[0]
    assert len(transcript) <= 600
    progress = agent.state.messages[0].summary.split("## Progress\n", 1)[1]
    assert progress.startswith("x" * 30 + " [... 470 more characters]")


async def test_a_bad_option_is_reported_as_a_hook_error() -> None:
    settings = Settings(plugin_options={plugin.NAME: {"max_input_chars": "lots"}})
    agent, recorder, provider = await run(["done"], settings=settings)
    [error] = recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("compact", plugin.NAME)
    assert "max_input_chars" in error.error
    assert recorder.of_type("compaction_end")[0].error
    assert not isinstance(agent.state.messages[0], CompactionSummary)  # uncompacted
    assert len(provider.requests) == 1


async def test_below_the_threshold_nothing_is_asked() -> None:
    history = long_history(1)
    _agent, recorder, provider = await run(["done"], messages=history)
    assert recorder.of_type("compaction_start") == []
    assert len(provider.requests) == 1


async def test_disabled_compaction_asks_nothing() -> None:
    settings = Settings(compaction=CompactionSettings(enabled=False))
    _, recorder, provider = await run(["done"], settings=settings)
    assert recorder.of_type("compaction_start") == []
    assert len(provider.requests) == 1


async def test_abort_during_the_summary_request_returns_at_once() -> None:
    import asyncio
    import time

    provider = FauxProvider([faux.text(SUMMARY), "never sent"], delay_s=0.5)
    agent = Agent(
        model=SMALL_MODEL,
        provider=provider,
        messages=long_history(),
        plugins=[plugin],
        autoload=False,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    compacting = asyncio.Event()
    agent.subscribe(
        lambda event, signal: compacting.set() if event.type == "compaction_start" else None
    )
    task = asyncio.ensure_future(agent.prompt(PROMPT))
    await compacting.wait()
    started = time.monotonic()
    agent.abort()
    await asyncio.wait_for(task, timeout=5)
    assert time.monotonic() - started < 1
    check_event_grammar(recorder.events)
    assert recorder.of_type("agent_end")[0].reason == "aborted"
    assert recorder.of_type("compaction_end")[0].error
    assert not any(isinstance(m, CompactionSummary) for m in agent.state.messages)
    assert provider.remaining == 1


async def test_the_summary_survives_a_session_round_trip(tmp_path: Any) -> None:
    path = tmp_path / "session.jsonl"
    agent, _, _ = await run([faux.text(SUMMARY), "done"], settings=Settings(session_path=str(path)))
    resumed = Agent.from_session(path, provider=FauxProvider(), autoload=False)
    marker = resumed.state.messages[0]
    assert isinstance(marker, CompactionSummary)
    assert marker == agent.state.messages[0]
    assert marker.details["files"] == agent.state.messages[0].details["files"]


# == units ==============================================================================


def test_normalise_orders_sections_and_accepts_heading_variants() -> None:
    text = "**Next steps:**\n- b\n\nGoal\nthe goal\n\n### files touched\n- a.py\n"
    out = plugin.normalise_summary(text, ["a.py", "b.py"])
    assert out == (
        "## Goal\nthe goal\n\n"
        "## Progress\n- (none)\n\n"
        "## Decisions\n- (none)\n\n"
        "## Next steps\n- b\n\n"
        "## Files touched\n- a.py\n\n- b.py"
    )


def test_render_message_covers_every_role() -> None:
    from pydantic import BaseModel

    class Note(BaseModel):
        role: str = "note"
        text: str = "remember this"

    failed = assistant(TextContent(text="half"), stop_reason="aborted")
    assert plugin.render_message(failed) == "[assistant, interrupted] half"
    assert plugin.render_message(assistant()) is None
    error_result = ToolResultMessage(
        tool_call_id="x", tool_name="sh", content=(TextContent(text="boom"),), is_error=True
    )
    assert plugin.render_message(error_result) == "[tool result: sh, error] boom"
    assert plugin.render_message(Note()) == "[note] remember this"
    assert plugin.render_message(UserMessage(content="a" * 10), limit=4) == (
        "[user] aaaa [... 6 more characters]"
    )


def test_files_touched_reads_file_arguments() -> None:
    messages = [
        assistant(
            ToolCall(id="1", name="read", arguments={"path": "a.py"}),
            ToolCall(id="2", name="edit", arguments={"file_path": "b.py", "path": "a.py"}),
            ToolCall(id="3", name="grep", arguments={"paths": ["c.py", 3, ""]}),
            stop_reason="tool_use",
        )
    ]
    assert plugin.files_touched(messages) == ["a.py", "b.py", "c.py"]


# == installation =======================================================================


def _installed() -> bool:
    return any(
        ep.name == plugin.PLUGIN_NAME for ep in importlib.metadata.entry_points(group="mainspring")
    )


@pytest.mark.skipif(not _installed(), reason="the distribution is not installed")
def test_the_entry_point_loads_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    [ep] = [
        ep
        for ep in importlib.metadata.entry_points(group="mainspring")
        if ep.name == plugin.PLUGIN_NAME
    ]
    assert ep.load() is plugin
    monkeypatch.setenv("MAINSPRING_PLUGINS", plugin.PLUGIN_NAME)
    agent = Agent(model="faux:t", provider=FauxProvider())
    info = agent.plugins.info(plugin.PLUGIN_NAME)
    assert info is not None
    assert info.source == "entrypoint"
    assert info.distribution == plugin.NAME
    assert "compact" in info.hooks


def test_in_process_it_has_the_name_it_is_installed_under() -> None:
    agent = Agent(model="faux:t", provider=FauxProvider(), autoload=False, plugins=[plugin])
    info = agent.plugins.info(plugin.PLUGIN_NAME)
    assert info is not None and info.source == "inprocess"
    assert info.declared == frozenset({"compaction"})
