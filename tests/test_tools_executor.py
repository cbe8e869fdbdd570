"""The tool executor at run level: concurrency, ordering, progress updates, file locks,
result caps, length-cut calls and the pending set."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mainspring import Agent, Tool, ToolContext, ToolResult
from mainspring.events import (
    AgentEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
)
from mainspring.settings import Settings, ToolSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


def make_agent(
    steps: list[Any],
    *,
    tools: tuple[Tool, ...] | list[Tool] = (),
    settings: Settings | None = None,
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps)
    agent = Agent(
        model="faux:test", provider=provider, autoload=False, tools=tools, settings=settings
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder, provider


class SleepArgs(BaseModel):
    label: str
    seconds: float


def sleep_tool(name: str = "sleep", *, sequential: bool = False, counter: Any = None) -> Tool:
    async def execute(args: SleepArgs, ctx: ToolContext) -> str:
        if counter is not None:
            counter.enter(args.label)
        try:
            await asyncio.sleep(args.seconds)
        finally:
            if counter is not None:
                counter.leave()
        return f"{args.label} slept {args.seconds}"

    return Tool(name, "Sleep a while.", SleepArgs, execute, sequential=sequential)


class Concurrency:
    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.order: list[str] = []

    def enter(self, label: str) -> None:
        self.order.append(label)
        self.running += 1
        self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        self.running -= 1


def call(label: str, seconds: float, name: str = "sleep") -> Any:
    return faux.tool_call(name, {"label": label, "seconds": seconds}, id=f"id_{label}")


# ------------------------------------------------------------------ concurrency & order


async def test_parallel_tools_take_about_the_longest_sleep_and_report_in_stable_order() -> None:
    agent, recorder, _ = make_agent(
        [[call("c", 0.4), call("a", 0.2), call("b", 0.3)], faux.text("done")],
        tools=[sleep_tool()],
    )
    began = time.monotonic()
    await agent.prompt("go")
    elapsed = time.monotonic() - began
    check_event_grammar(recorder.events)
    assert elapsed < 0.85, elapsed

    starts = recorder.of_type(ToolExecutionStart)
    assert [e.tool_call_id for e in starts] == ["id_c", "id_a", "id_b"]  # call order
    ends = recorder.of_type(ToolExecutionEnd)
    assert [e.tool_call_id for e in ends] == ["id_a", "id_b", "id_c"]  # completion order
    results = recorder.messages("tool_result")
    assert [r.tool_call_id for r in results] == ["id_c", "id_a", "id_b"]  # call order
    assert [r.text for r in results] == ["c slept 0.4", "a slept 0.2", "b slept 0.3"]
    turn_end = recorder.of_type(TurnEnd)[0]
    assert [r.tool_call_id for r in turn_end.tool_results] == ["id_c", "id_a", "id_b"]
    assert turn_end.tool_results == tuple(results)
    # all tool-result messages come after every tool_execution_end
    types = recorder.types()
    last_end = max(i for i, t in enumerate(types) if t == "tool_execution_end")
    first_result = min(
        i
        for i, e in enumerate(recorder.events)
        if e.type == "message_start" and e.message.role == "tool_result"
    )
    assert last_end < first_result


async def test_without_sequential_all_calls_of_the_batch_run_at_once() -> None:
    counter = Concurrency()
    agent, recorder, _ = make_agent(
        [[call("a", 0.05), call("b", 0.05), call("c", 0.05)], faux.text("done")],
        tools=[sleep_tool(counter=counter)],
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert counter.peak == 3


async def test_one_sequential_tool_makes_the_whole_batch_sequential() -> None:
    counter = Concurrency()
    tools = [
        sleep_tool("par", counter=counter),
        sleep_tool("seq", sequential=True, counter=counter),
    ]
    agent, recorder, _ = make_agent(
        [
            [call("a", 0.05, "par"), call("b", 0.01, "seq"), call("c", 0.03, "par")],
            faux.text("done"),
        ],
        tools=tools,
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert counter.peak == 1
    assert counter.order == ["a", "b", "c"]
    ends = recorder.of_type(ToolExecutionEnd)
    assert [e.tool_call_id for e in ends] == ["id_a", "id_b", "id_c"]
    assert [r.tool_call_id for r in recorder.messages("tool_result")] == ["id_a", "id_b", "id_c"]
    assert not any(r.is_error for r in recorder.messages("tool_result"))


async def test_preparation_is_serial_and_precedes_execution() -> None:
    agent, recorder, _ = make_agent(
        [[call("a", 0.01), call("b", 0.01)], faux.text("done")], tools=[sleep_tool()]
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    tool_types = [
        (e.type, getattr(e, "tool_call_id", None))
        for e in recorder.events
        if e.type.startswith("tool_")
    ]
    assert tool_types[:4] == [
        ("tool_execution_start", "id_a"),
        ("tool_decision", "id_a"),
        ("tool_execution_start", "id_b"),
        ("tool_decision", "id_b"),
    ]


async def test_a_failing_tool_does_not_disturb_its_parallel_siblings() -> None:
    class Args(BaseModel):
        pass

    async def broken(args: Args, ctx: ToolContext) -> str:
        raise RuntimeError("disk on fire")

    tools = [sleep_tool(), Tool("broken", "fails", Args, broken)]
    agent, recorder, _ = make_agent(
        [[call("a", 0.05), faux.tool_call("broken", {}, id="id_x")], faux.text("done")],
        tools=tools,
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    ok, bad = recorder.messages("tool_result")
    assert (ok.tool_call_id, ok.is_error, ok.text) == ("id_a", False, "a slept 0.05")
    assert bad.tool_call_id == "id_x" and bad.is_error
    assert "disk on fire" in bad.text
    assert recorder.of_type(AgentEnd)[0].reason == "stop"


# ------------------------------------------------------------------ progress updates


async def test_updates_precede_the_end_and_late_updates_are_dropped() -> None:
    contexts: list[ToolContext] = []

    class Args(BaseModel):
        pass

    async def progress(args: Args, ctx: ToolContext) -> str:
        contexts.append(ctx)
        ctx.update("25%")
        await asyncio.sleep(0)
        ctx.update({"percent": 50})
        await asyncio.sleep(0.01)
        return "done"

    agent, recorder, _ = make_agent(
        [faux.tool_call("progress", {}, id="p1"), faux.text("ok")],
        tools=[Tool("progress", "reports progress", Args, progress)],
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)

    tool_events = [e for e in recorder.events if e.type.startswith("tool_execution")]
    assert [e.type for e in tool_events] == [
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_update",
        "tool_execution_end",
    ]
    updates = recorder.of_type(ToolExecutionUpdate)
    assert [u.partial_result for u in updates] == ["25%", {"percent": 50}]
    assert all(u.tool_call_id == "p1" and u.tool_name == "progress" for u in updates)

    count = len(recorder.events)
    (ctx,) = contexts
    ctx.update("too late")  # no exception
    ctx.update("still too late")
    await asyncio.sleep(0)
    assert len(recorder.events) == count


async def test_update_after_the_call_finished_but_during_the_batch_is_dropped() -> None:
    contexts: dict[str, ToolContext] = {}
    fast_ended = asyncio.Event()

    class Args(BaseModel):
        role: str

    async def execute(args: Args, ctx: ToolContext) -> str:
        contexts[args.role] = ctx
        if args.role == "slow":
            await fast_ended.wait()
            contexts["fast"].update("late update for a finished call")
            ctx.update("own update")
        return args.role

    def on_end(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_end" and event.tool_call_id == "fast":
            fast_ended.set()

    agent, recorder, _ = make_agent(
        [
            [
                faux.tool_call("t", {"role": "fast"}, id="fast"),
                faux.tool_call("t", {"role": "slow"}, id="slow"),
            ],
            faux.text("ok"),
        ],
        tools=[Tool("t", "t", Args, execute)],
    )
    agent.subscribe(on_end)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    updates = recorder.of_type(ToolExecutionUpdate)
    assert [(u.tool_call_id, u.partial_result) for u in updates] == [("slow", "own update")]


# ------------------------------------------------------------------ file locks


async def test_file_lock_serialises_read_modify_write_across_parallel_calls(
    tmp_path: Path,
) -> None:
    counter_file = tmp_path / "counter.txt"
    counter_file.write_text("0")
    alias = tmp_path / "alias.txt"
    alias.symlink_to(counter_file)

    class Args(BaseModel):
        path: str

    async def increment(args: Args, ctx: ToolContext) -> str:
        target = Path(args.path)
        async with ctx.file_lock(args.path):
            value = int(await asyncio.to_thread(target.read_text))
            await asyncio.sleep(0.01)
            await asyncio.to_thread(target.write_text, str(value + 1))
        return str(value + 1)

    paths = [counter_file, alias, tmp_path / "sub" / ".." / "counter.txt", counter_file, alias]
    (tmp_path / "sub").mkdir()
    agent, recorder, _ = make_agent(
        [
            [faux.tool_call("increment", {"path": str(p)}) for p in paths],
            faux.text("done"),
        ],
        tools=[Tool("increment", "add one", Args, increment)],
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert counter_file.read_text() == "5"
    assert sorted(r.text for r in recorder.messages("tool_result")) == ["1", "2", "3", "4", "5"]


async def test_file_locks_of_different_files_do_not_serialise(tmp_path: Path) -> None:
    inside = 0
    peak = 0

    class Args(BaseModel):
        path: str

    async def hold(args: Args, ctx: ToolContext) -> str:
        nonlocal inside, peak
        async with ctx.file_lock(args.path):
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0.05)
            inside -= 1
        return "ok"

    agent, recorder, _ = make_agent(
        [
            [faux.tool_call("hold", {"path": str(tmp_path / f"f{i}")}) for i in range(3)],
            faux.text("done"),
        ],
        tools=[Tool("hold", "hold a lock", Args, hold)],
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert peak == 3


# ------------------------------------------------------------------ pending set


async def test_pending_tool_calls_holds_the_id_during_execution_only() -> None:
    seen_at_start: list[bool] = []
    seen_at_end: list[bool] = []
    seen_inside: list[frozenset[str]] = []

    class Args(BaseModel):
        pass

    async def look(args: Args, ctx: ToolContext) -> str:
        seen_inside.append(agent.state.pending_tool_calls)
        assert ctx.tool_call_id in agent.state.pending_tool_calls
        return "looked"

    def listener(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_start":
            seen_at_start.append(event.tool_call_id in agent.state.pending_tool_calls)
        if event.type == "tool_execution_end":
            seen_at_end.append(event.tool_call_id in agent.state.pending_tool_calls)

    agent, recorder, _ = make_agent(
        [[faux.tool_call("look", {}, id="k1"), faux.tool_call("look", {}, id="k2")], "done"],
        tools=[Tool("look", "look", Args, look)],
    )
    agent.subscribe(listener)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert seen_at_start == [True, True]
    assert seen_at_end == [False, False]
    assert seen_inside and all(s == frozenset({"k1", "k2"}) for s in seen_inside)
    assert agent.state.pending_tool_calls == frozenset()
    assert not any(r.is_error for r in recorder.messages("tool_result"))


# ------------------------------------------------------------------ sync tools


async def test_sync_tool_functions_run_in_a_worker_thread() -> None:
    main_thread = threading.get_ident()
    threads: list[int] = []
    loops: list[bool] = []

    class Args(BaseModel):
        n: int

    def blocking(args: Args, ctx: ToolContext) -> str:
        threads.append(threading.get_ident())
        try:
            asyncio.get_running_loop()
            loops.append(True)
        except RuntimeError:
            loops.append(False)
        time.sleep(0.3)
        return f"n={args.n}"

    agent, recorder, _ = make_agent(
        [[faux.tool_call("blocking", {"n": 1}), faux.tool_call("blocking", {"n": 2})], "ok"],
        tools=[Tool("blocking", "blocks", Args, blocking)],
    )
    began = time.monotonic()
    await agent.prompt("go")
    elapsed = time.monotonic() - began
    check_event_grammar(recorder.events)
    assert len(threads) == 2 and main_thread not in threads
    assert loops == [False, False]
    assert elapsed < 0.55, elapsed  # the two 0.3 s blocking calls overlapped
    assert [r.text for r in recorder.messages("tool_result")] == ["n=1", "n=2"]


# ------------------------------------------------------------------ results


async def test_tool_results_keep_details_and_error_flag() -> None:
    class Args(BaseModel):
        kind: str

    async def produce(args: Args, ctx: ToolContext) -> Any:
        if args.kind == "result":
            return ToolResult("rich", details={"rows": 3})
        if args.kind == "soft_error":
            return ToolResult.error("nothing matched", details={"rows": 0})
        return {"answer": 42}

    agent, recorder, _ = make_agent(
        [
            [faux.tool_call("produce", {"kind": k}) for k in ("result", "soft_error", "json")],
            "done",
        ],
        tools=[Tool("produce", "produce", Args, produce)],
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    rich, soft, data = recorder.messages("tool_result")
    assert (rich.text, rich.details, rich.is_error) == ("rich", {"rows": 3}, False)
    assert (soft.text, soft.details, soft.is_error) == ("nothing matched", {"rows": 0}, True)
    assert '"answer"' in data.text and "42" in data.text and data.is_error is False
    ends = {e.tool_call_id: e for e in recorder.of_type(ToolExecutionEnd)}
    for message in (rich, soft, data):
        end = ends[message.tool_call_id]
        assert end.result.content == message.content
        assert end.is_error == message.is_error == end.result.is_error


async def test_result_size_cap_truncates_and_says_how_much_was_cut() -> None:
    class Args(BaseModel):
        pass

    async def chatty(args: Args, ctx: ToolContext) -> str:
        return "x" * 250

    settings = Settings(tools=ToolSettings(max_result_chars=100))
    agent, recorder, provider = make_agent(
        [faux.tool_call("chatty", {}), "done"],
        tools=[Tool("chatty", "talks a lot", Args, chatty)],
        settings=settings,
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.text.startswith("x" * 100)
    assert "x" * 101 not in result.text
    assert "150" in result.text  # how much was cut
    assert "250" in result.text
    (end,) = recorder.of_type(ToolExecutionEnd)
    assert end.result.text == result.text
    # the model was sent the truncated text
    sent = provider.requests[1].messages[-1]
    assert sent.text == result.text


async def test_results_under_the_cap_are_untouched() -> None:
    class Args(BaseModel):
        pass

    async def short(args: Args, ctx: ToolContext) -> str:
        return "y" * 100

    settings = Settings(tools=ToolSettings(max_result_chars=100))
    agent, recorder, _ = make_agent(
        [faux.tool_call("short", {}), "done"],
        tools=[Tool("short", "short", Args, short)],
        settings=settings,
    )
    await agent.prompt("go")
    assert recorder.messages("tool_result")[0].text == "y" * 100
    check_event_grammar(recorder.events)


async def test_length_cut_reply_executes_no_call_but_answers_each() -> None:
    executed: list[str] = []

    class Args(BaseModel):
        path: str

    async def write(args: Args, ctx: ToolContext) -> str:
        executed.append(args.path)
        return "written"

    cut_reply = faux.reply(
        faux.tool_call("write", {"path": "a"}, id="w1"),
        faux.tool_call("write", {"path": "b"}, id="w2"),
        stop_reason="length",
    )
    agent, recorder, provider = make_agent(
        [cut_reply, "I will be briefer."], tools=[Tool("write", "write", Args, write)]
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)

    assert executed == []
    first = recorder.messages("assistant")[0]
    assert first.stop_reason == "length"
    tool_events = [
        (e.type, e.tool_call_id) for e in recorder.events if e.type.startswith("tool_execution")
    ]
    assert tool_events == [
        ("tool_execution_start", "w1"),
        ("tool_execution_end", "w1"),
        ("tool_execution_start", "w2"),
        ("tool_execution_end", "w2"),
    ]
    results = recorder.messages("tool_result")
    assert [r.tool_call_id for r in results] == ["w1", "w2"]
    assert all(r.is_error for r in results)
    assert all("length" in r.text or "limit" in r.text for r in results)
    # the run went on to a second turn, which saw the error results
    assert len(provider.requests) == 2
    assert [m.role for m in provider.requests[1].messages][-2:] == ["tool_result", "tool_result"]
    assert recorder.of_type(AgentEnd)[0].reason == "stop"
    assert [e.turn for e in recorder.of_type("turn_start")] == [0, 1]


async def test_sync_tool_progress_updates_arrive_while_the_thread_still_runs() -> None:
    """ctx.update() from a worker thread is delivered while the tool is running."""
    delivered = threading.Event()
    waited: list[bool] = []

    class Args(BaseModel):
        pass

    def worker(args: Args, ctx: ToolContext) -> str:
        ctx.update("halfway")
        waited.append(delivered.wait(timeout=1.0))
        return "done"

    def on_update(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_update":
            delivered.set()

    agent, recorder, _ = make_agent(
        [faux.tool_call("worker", {}), "ok"], tools=[Tool("worker", "works", Args, worker)]
    )
    agent.subscribe(on_update)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert [u.partial_result for u in recorder.of_type(ToolExecutionUpdate)] == ["halfway"]
    assert waited == [True], "the update was only delivered after the thread finished"


async def test_abort_during_a_sequential_batch_ends_every_prepared_call() -> None:
    started: list[str] = []
    first_running = asyncio.Event()

    class Args(BaseModel):
        label: str

    async def slow(args: Args, ctx: ToolContext) -> str:
        started.append(args.label)
        first_running.set()
        await asyncio.sleep(3600)
        return "never"

    agent, recorder, _ = make_agent(
        [[faux.tool_call("slow", {"label": x}, id=x) for x in ("a", "b", "c")]],
        tools=[Tool("slow", "slow", Args, slow, sequential=True)],
    )
    run = asyncio.create_task(agent.prompt("go"))
    await first_running.wait()
    aborted_at = time.monotonic()
    agent.abort()
    await run
    assert time.monotonic() - aborted_at < 1.0
    check_event_grammar(recorder.events)
    assert started == ["a"]
    ends = recorder.of_type(ToolExecutionEnd)
    assert sorted(e.tool_call_id for e in ends) == ["a", "b", "c"]
    assert all(e.is_error and "aborted" in e.result.text.lower() for e in ends)
    assert [r.tool_call_id for r in recorder.messages("tool_result")] == ["a", "b", "c"]
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert agent.state.pending_tool_calls == frozenset()
